"""The rig's processes and nodes: mock node daemons, registered GPU nodes, the router, the controller,
and the one backend every mock pod's address reaches.

- Node daemons are `vk-provider node --provider mock`, as deployed but with a self-signed kubelet
  certificate (no CSR traffic): the pool's daemons (no taint, the pool label, the `runs-pods` label the
  services' home pods select, GPUs for them), the away daemons (the virtual node taint, the away label)
  and the filler daemons (pods that are not inference, bound to them by name);
- registered GPU nodes make the pool M nodes without M processes (200 Python daemons do not fit two
  cores): Node objects the rig registers (Ready, GPUs, the pool label) and keeps alive by renewing their
  Leases every 10 s, as a kubelet does, from the rig's own (admin) identity, so their heartbeats are
  the plane's background, not a component's. Nothing runs their pods: pods bound there stay Pending, as
  training pods waiting on an image pull would;
- the backend is one `vk_devtools.demo.tokens` server on 0.0.0.0:<port>. Every mock pod's address is
  in the development pod network (a local route: `podnetwork`), and the mock provider gives each pod
  http://<its address>:<port> (`traffic_port`), so every home and away replica reaches that one server
  and requests through the router really flow, at no process per pod.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from vk_devtools.devcluster.ports import PortPicker
from vk_provider.kit import procfs
from vk_provider.kit.kube import MERGE_PATCH, KubeApi, KubeApiError

GPU = "nvidia.com/gpu"
RUNS_PODS_LABEL = "scale.vk-provider.dev/runs-pods"
"""On the pool's daemons only: the services' home pods select it, so none lands on a registered node."""
SYSTEM_NAMESPACE = "vk-provider-system"
TRAFFIC_KEY_SECRET = f"{SYSTEM_NAMESPACE}/vk-provider-traffic-key"
LEASE_NAMESPACE = "kube-node-lease"
LEASE_RENEW_SECONDS = 10.0
NODE_CAPACITY = {"cpu": "10000", "memory": "40Ti", "pods": "20000"}
REGISTERED_NODE_GPUS = 8
VK_PROVIDER = (sys.executable, "-m", "vk_provider")


@dataclasses.dataclass
class Process:
    """One component's process, its log, and how to read its memory and CPU."""

    name: str
    component: str
    argv: list[str]
    log: Path
    popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as stream:
            self.popen = subprocess.Popen(
                self.argv,
                stdout=stream,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        if self.popen is None:
            raise RuntimeError(f"{self.name} was never started")
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, timeout_seconds: float = 20) -> None:
        """SIGTERM its process group, SIGKILL what is left after `timeout_seconds`."""
        if self.popen is None:
            return
        if self.popen.poll() is None:
            procfs.signal_group(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout_seconds)
            except subprocess.TimeoutExpired:
                procfs.signal_group(self.popen.pid, signal.SIGKILL)
                self.popen.wait(10)

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def node_daemon(
    folder: Path,
    *,
    name: str,
    kubeconfig: Path,
    labels: Mapping[str, str],
    pod_cidr: str,
    backend_port: int,
    gpus: int,
    tainted: bool,
) -> Process:
    """A mock node daemon (not started), its settings written to <folder>/<name>/node.yaml."""
    home = folder / name
    home.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {
        "node_name": name,
        "provider": "mock",
        "provider_config": {
            "pod_cidr": pod_cidr,
            "traffic_port": backend_port,
            "capacity": {GPU: str(gpus)} if gpus else {},
        },
        "kubeconfig": str(kubeconfig),
        "state_dir": str(home / "state"),
        "kubelet_port": PortPicker().pick(),
        "kubelet_bind_address": "127.0.0.1",
        "serving_certificate": "self-signed",
        "labels": dict(labels),
        "no_taint": not tainted,
        "capacity": NODE_CAPACITY,
        "traffic_key_secret": TRAFFIC_KEY_SECRET,
        "leader_election_namespace": SYSTEM_NAMESPACE,
    }
    path = home / "node.yaml"
    path.write_text(yaml.safe_dump(config))
    return Process(name, "nodes", [*VK_PROVIDER, "node", "--config", str(path)], home / "daemon.log")


def router(folder: Path, kubeconfig: Path, *, namespace: str | None) -> tuple[Process, str, str]:
    """The router (not started), its traffic URL and its admin URL."""
    picker = PortPicker()
    port, admin = picker.pick(), picker.pick()
    scope = ["--namespace", namespace] if namespace else []
    argv = [
        *VK_PROVIDER,
        "router",
        "--kubeconfig",
        str(kubeconfig),
        *scope,
        "--listen",
        f"127.0.0.1:{port}",
        "--admin-listen",
        f"127.0.0.1:{admin}",
        "--traffic-key-secret",
        TRAFFIC_KEY_SECRET,
    ]
    return (
        Process("router", "router", argv, folder / "router.log"),
        f"http://127.0.0.1:{port}",
        f"http://127.0.0.1:{admin}",
    )


def controller(
    folder: Path, kubeconfig: Path, *, router_admin_url: str, namespace: str | None, lease_name: str
) -> tuple[Process, str]:
    """The controller with its policy loop, as deployed (the policy's default 2 s interval), not
    started, and its admin URL (its metrics: the work queue's waits and the API budget's)."""
    scope = ["--namespace", namespace] if namespace else []
    admin = PortPicker().pick()
    argv = [
        *VK_PROVIDER,
        "controller",
        "--kubeconfig",
        str(kubeconfig),
        *scope,
        "--router-url",
        router_admin_url,
        "--leader-election-namespace",
        SYSTEM_NAMESPACE,
        "--leader-election-lease-name",
        lease_name,
        "--admin-listen",
        f"127.0.0.1:{admin}",
    ]
    return Process("controller", "controller", argv, folder / "controller.log"), f"http://127.0.0.1:{admin}"


def backend(folder: Path) -> tuple[Process, int]:
    """The shared token server (not started) on every address of this host, and its port."""
    port = PortPicker("0.0.0.0").pick()  # noqa: S104 - every pod address of the pod network reaches it
    argv = [sys.executable, "-m", "vk_devtools.demo.tokens", "--host", "0.0.0.0", "--port", str(port)]  # noqa: S104
    argv += ["--name", "scale-backend"]
    return Process("backend", "backend", argv, folder / "backend.log"), port


# --- registered GPU nodes -------------------------------------------------------------------------


def _micro_time(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def register_node(api: KubeApi, name: str, labels: Mapping[str, str], gpus: int) -> None:
    """A Ready Node advertising `gpus` GPUs, and its Lease."""
    now = datetime.now(UTC)
    with contextlib.suppress(KubeApiError):  # left by an earlier run: its status is set again below
        await api.create("/api/v1/nodes", {"metadata": {"name": name, "labels": dict(labels)}})
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: str(gpus)}
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    await api.patch(
        f"/api/v1/nodes/{name}/status",
        {
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "registered by the scale rig; its Lease is renewed for it",
                        "lastHeartbeatTime": stamp,
                        "lastTransitionTime": stamp,
                    }
                ],
            }
        },
        content_type=MERGE_PATCH,
    )
    lease = {
        "metadata": {"name": name, "namespace": LEASE_NAMESPACE},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": _micro_time(now)},
    }
    with contextlib.suppress(KubeApiError):
        await api.create(f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases", lease)


async def keep_alive(api: KubeApi, names: Sequence[str]) -> None:
    """Renew the Leases of the registered nodes every LEASE_RENEW_SECONDS, until cancelled."""
    while True:
        now = _micro_time(datetime.now(UTC))
        for name in names:
            with contextlib.suppress(KubeApiError):
                await api.patch(
                    f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{name}",
                    {"spec": {"renewTime": now}},
                    content_type=MERGE_PATCH,
                )
        await asyncio.sleep(LEASE_RENEW_SECONDS)  # a kubelet's heartbeat period (noqa: sleep-ok)


# --- memory and CPU -------------------------------------------------------------------------------


def rss_kib(pid: int) -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process, in seconds."""
    fields = procfs.stat_fields(pid)
    if fields is None:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclasses.dataclass(frozen=True, slots=True)
class Usage:
    """One process tree's RSS (KiB) and CPU time (s) at a moment."""

    rss_kib: int
    cpu_seconds: float

    @classmethod
    def of(cls, pid: int) -> Usage:
        tree = [pid, *procfs.descendants_of(pid)]
        return cls(sum(rss_kib(one) for one in tree), sum(cpu_seconds(one) for one in tree))
