"""Envoy Gateway on the test plane: a real Gateway API implementation for the `gatewayapi` data plane.

Envoy Gateway (built from our pinned module, `vk_devtools.devcluster.envoygateway`) and the Envoy it
starts for the Gateway run inside a network namespace of their own: both listen on fixed ports (8080
among them, which the local pods of other tests take on their own addresses). From inside, the
namespace reaches the dev pod network (the home pods) and the veth's host side (the router) through
this host; the apiserver, which listens on loopback only, through a relay on the host side (its
certificate names 127.0.0.1, which the kubeconfig asks for by `tls-server-name`). From this host, the
Gateway's listener is at the namespace's address.

One Gateway (`GATEWAY`, in Envoy Gateway's own namespace, routes from every namespace) serves the
session: Envoy Gateway runs one Envoy per Gateway, and each Envoy takes the same fixed ports. Its
statistics are relayed to `stats_address` (see `ENVOY_STATS_PORT`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from tests.integration.daemons import ManagedProcess
from tests.integration.netns import NetworkNamespace, network_namespace, relay
from tests.integration.waiting import wait_for
from vk_devtools.devcluster import cluster, podnetwork
from vk_devtools.devcluster.building import BinaryCache
from vk_devtools.devcluster.envoygateway import CONTROLLER_NAME, ENVOY_GATEWAY, EnvoyGatewayHome
from vk_devtools.devcluster.ports import PortPicker
from vk_devtools.devcluster.traffic import kubectl_apply
from vk_provider.kit.kube import KubeApi

NAMESPACE = "vk-envoy-gateway"
"""Envoy Gateway's namespace (its Secrets) and the Gateway's."""
GATEWAY_CLASS = "vk-envoy-gateway"
GATEWAY = "public"
LISTENER_PORT = 10080
ENVOY_STATS_PORT = 19101
"""Where the Gateway's Envoy's statistics are reached. In its Kubernetes mode, Envoy Gateway gives each
Envoy a listener on 19001 that routes `/stats/prometheus` to the Envoy's admin; in host mode it leaves
that listener out (19001 is Envoy Gateway's own metrics there) and puts the admin on a random loopback
port (func-e writes it to `<runtime dir>/<run>/admin-address.txt`), so a relay in the namespace plays
the listener's part on this port."""


@dataclasses.dataclass
class EnvoyGateway:
    network: NetworkNamespace
    process: ManagedProcess
    home: EnvoyGatewayHome

    @property
    def listener_url(self) -> str:
        """The Gateway's HTTP listener, as clients on this host reach it."""
        return f"http://{self.network.inner_ip}:{LISTENER_PORT}"

    @property
    def stats_address(self) -> str:
        """host:port of its Envoy's statistics (`/stats/prometheus`)."""
        return f"{self.network.inner_ip}:{ENVOY_STATS_PORT}"

    @property
    def parent_ref(self) -> dict[str, str]:
        """What an HTTPRoute's `parentRefs` names to attach to the Gateway."""
        return {"name": GATEWAY, "namespace": NAMESPACE}

    def log_tail(self, lines: int = 40) -> str:
        """Envoy Gateway's log and the end of its Envoy's, for failure messages."""
        envoy_logs = sorted(self.home.state_home.glob("envoy-runs/*/*.log"))
        parts = [f"envoy-gateway:\n{self.process.log_tail(lines)}"]
        parts += [f"{path}:\n{_tail(path, lines)}" for path in envoy_logs[-2:]]
        return "\n".join(parts)


def _tail(path: Path, lines: int) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _relayed_kubeconfig(source: Path, target: Path, server: str) -> None:
    """`source` with its cluster's server replaced by `server`, still verified as 127.0.0.1."""
    config: dict[str, Any] = yaml.safe_load(source.read_text())
    for entry in config["clusters"]:
        entry["cluster"]["server"] = server
        entry["cluster"]["tls-server-name"] = "127.0.0.1"
    target.write_text(yaml.safe_dump(config))


def _apiserver_port(kubeconfig: Path) -> int:
    config: dict[str, Any] = yaml.safe_load(kubeconfig.read_text())
    port = urllib.parse.urlsplit(config["clusters"][0]["cluster"]["server"]).port
    assert port is not None, "the plane's kubeconfig names no port"
    return port


def _gateway_objects() -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GatewayClass",
            "metadata": {"name": GATEWAY_CLASS},
            "spec": {"controllerName": CONTROLLER_NAME},
        },
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": GATEWAY, "namespace": NAMESPACE},
            "spec": {
                "gatewayClassName": GATEWAY_CLASS,
                "listeners": [
                    {
                        "name": "http",
                        "protocol": "HTTP",
                        "port": LISTENER_PORT,
                        "allowedRoutes": {"namespaces": {"from": "All"}},
                    }
                ],
            },
        },
    ]


@contextlib.contextmanager
def running_envoy_gateway(
    control_plane: cluster.ClusterState, envoy: Path, folder: Path
) -> Iterator[EnvoyGateway]:
    """Envoy Gateway with its Gateway accepted and its Envoy listening; stopped and removed after."""
    binary = BinaryCache.for_build(ENVOY_GATEWAY).ensure(wait=True, out=sys.stderr) / "envoy-gateway"
    bin_dir, admin_kubeconfig = control_plane.bin_dir, control_plane.kubeconfig
    podnetwork.ensure_local_route()
    with network_namespace(routes_via_host=(str(podnetwork.POD_NETWORK),)) as network:
        relay_port = PortPicker(network.host_ip).pick()
        with relay(network.host_ip, relay_port, "127.0.0.1", _apiserver_port(admin_kubeconfig)):
            kubeconfig = folder / "kubeconfig"
            _relayed_kubeconfig(admin_kubeconfig, kubeconfig, f"https://{network.host_ip}:{relay_port}")
            namespace = folder / "namespace.yaml"
            namespace.write_text(
                yaml.safe_dump({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
            )
            kubectl_apply(bin_dir, admin_kubeconfig, "apply", "-f", str(namespace))
            process: ManagedProcess | None = None
            try:
                home = EnvoyGatewayHome(folder, NAMESPACE)
                home.prepare(binary, envoy, admin_kubeconfig)
                process = ManagedProcess(
                    folder=folder,
                    arguments=[],
                    log_name="envoy-gateway.log",
                    program=network.command(*home.server_command(binary, kubeconfig)),
                )
                process.start()
                running = EnvoyGateway(network, process, home)
                objects = folder / "gateway.yaml"
                objects.write_text(yaml.safe_dump_all(_gateway_objects()))
                kubectl_apply(bin_dir, admin_kubeconfig, "apply", "-f", str(objects))
                _wait_until_serving(running, admin_kubeconfig)
                admin_host, admin_port = _envoy_admin_address(home)
                with relay(network.inner_ip, ENVOY_STATS_PORT, admin_host, admin_port, inside=network):
                    yield running
            finally:
                if process is not None:
                    if process.alive():
                        with contextlib.suppress(Exception):
                            process.stop(timeout_seconds=30)
                    process.close()
                with contextlib.suppress(RuntimeError):
                    kubectl_apply(
                        bin_dir, admin_kubeconfig, "delete", "gatewayclass", GATEWAY_CLASS, "--wait=false"
                    )
                with contextlib.suppress(RuntimeError):
                    kubectl_apply(bin_dir, admin_kubeconfig, "delete", "namespace", NAMESPACE, "--wait=false")


def _envoy_admin_address(home: EnvoyGatewayHome) -> tuple[str, int]:
    """host, port of the admin of the (one) Envoy Envoy Gateway runs, as func-e recorded it."""
    files = sorted(home.runtime_dir.glob("*/admin-address.txt"))
    assert len(files) == 1, f"one Envoy expected, found the runs {files}"
    host, port = files[0].read_text().strip().rsplit(":", 1)
    return host, int(port)


def _wait_until_serving(gateway: EnvoyGateway, kubeconfig: Path) -> None:
    """Until the Gateway is Accepted by Envoy Gateway and its Envoy accepts connections."""

    async def accepted() -> bool:
        if not gateway.process.alive():
            raise EnvoyGatewayExited
        api = await KubeApi.from_kubeconfig(str(kubeconfig))
        try:
            found = await api.get(
                f"/apis/gateway.networking.k8s.io/v1/namespaces/{NAMESPACE}/gateways/{GATEWAY}"
            )
        finally:
            await api.close()
        conditions = {c["type"]: c for c in (found.get("status") or {}).get("conditions") or ()}
        if conditions.get("Accepted", {}).get("status") != "True":
            return False
        with socket.create_connection((gateway.network.inner_ip, LISTENER_PORT), timeout=2):
            return True

    try:
        asyncio.run(
            wait_for(accepted, timeout_seconds=120, what="the Gateway accepted and its Envoy listening")
        )
    except AssertionError as error:
        raise AssertionError(f"{error}\n{gateway.log_tail()}") from None


class EnvoyGatewayExited(Exception):
    """Its process ended: waiting longer is pointless (`wait_for` shows this as the last error)."""
