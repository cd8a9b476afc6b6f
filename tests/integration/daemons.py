"""Run `vk-provider node` as a real subprocess against the test plane, so tests can stop and kill -9 it."""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from vk_devtools.devcluster.ports import PortPicker
from vk_devtools.devcluster.processes import tail_of_file
from vk_provider.kit import procfs

# Short intervals so the tests observe behaviour in seconds; the lease keeps its real 40 s duration.
SYSTEM_NAMESPACE = "vk-provider-system"
"""The manifests' namespace: the test plane creates it (`conftest.start_test_plane`)."""
TRAFFIC_KEY_SECRET = f"{SYSTEM_NAMESPACE}/vk-provider-traffic-key"
"""Where every test's node daemons, routers and xDS servers keep the traffic key, as deployed (their
pods' namespace): routers running as the manifests' ServiceAccount may read it there and nowhere else."""
TRAFFIC_KEY_ARGUMENTS = ("--traffic-key-secret", TRAFFIC_KEY_SECRET)
"""The router's and the xDS server's flags for it."""

FAST_SETTINGS: dict[str, Any] = {
    "health_check_interval_seconds": 1.0,
    "orphan_sweep_interval_seconds": 2.0,
    "retry_initial_seconds": 0.5,
    "retry_max_seconds": 4.0,
    "status_poll_interval_seconds": 1.0,
    "node_status_interval_seconds": 20.0,
    # Leader election as deployed, in a namespace every plane has, with timings scaled to the test
    # plane's 20 s node-monitor grace period.
    "leader_elect": True,
    "leader_election_namespace": "default",
    "leader_election_lease_duration_seconds": 6.0,
    "leader_election_renew_deadline_seconds": 4.0,
    "leader_election_retry_period_seconds": 1.0,
}


VK_PROVIDER = (sys.executable, "-m", "vk_provider")


class ManagedProcess:
    """A `python -m vk_provider ...` subprocess (or another `program`'s) with its own log file, which
    tests can stop, kill -9, or pause."""

    def __init__(
        self,
        *,
        folder: Path,
        arguments: list[str],
        log_name: str = "daemon.log",
        program: Sequence[str] = VK_PROVIDER,
    ) -> None:
        self.folder = folder
        self.log_path = folder / log_name
        self.arguments = arguments
        self.program = tuple(program)
        folder.mkdir(parents=True, exist_ok=True)
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        assert self.process is None or self.process.poll() is not None, "already running"
        self.starts += 1
        with self.log_path.open("ab") as log:
            log.write(f"\n--- start {self.starts} ---\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                [*self.program, *self.arguments],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout_seconds: float = 30) -> int:
        """SIGTERM and wait: the graceful path."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout_seconds)

    def kill(self) -> None:
        """kill -9 the process alone; whatever it started must survive it."""
        assert self.process is not None
        self.process.kill()
        self.process.wait(30)

    def pause(self) -> None:
        """SIGSTOP: the process keeps its sockets open and answers nothing."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def log_tail(self, lines: int = 60) -> str:
        return tail_of_file(self.log_path, lines=lines)

    def close(self) -> None:
        if self.alive():
            assert self.process is not None
            procfs.signal_group(self.process.pid, signal.SIGKILL)
            self.process.wait(30)


class NodeReplica(ManagedProcess):
    """`vk-provider node` run from the settings `config`, written to `node.yaml` in its folder."""

    def __init__(self, *, folder: Path, config: dict[str, Any]) -> None:
        self.config = config
        self.config_path = folder / "node.yaml"
        super().__init__(
            folder=folder, arguments=["node", "--config", str(self.config_path), "--log-level", "DEBUG"]
        )
        self.config_path.write_text(yaml.safe_dump(config))

    @property
    def kubelet_port(self) -> int:
        port: int = self.config["kubelet_port"]
        return port

    @property
    def identity(self) -> str:
        identity: str = self.config["leader_election_identity"]
        return identity


class NodeDaemon(NodeReplica):
    """One virtual node daemon: a config file, a state folder, a log, and the process.

    `add_replica` starts more replicas of the same node (leader election decides which one runs it),
    as a Deployment's pods: the same settings and state folder, each its own kubelet port, identity
    and log. `alive`, `stop` and `close` then cover every replica.
    """

    def __init__(self, *, folder: Path, provider: str, **settings: Any) -> None:
        self.node_name = settings.pop("node_name", f"vk-{provider}-{uuid.uuid4().hex[:6]}")
        config: dict[str, Any] = {
            "node_name": self.node_name,
            "provider": provider,
            "state_dir": str(folder / "state"),
            # Every daemon serves its kubelet API on a port of its own, on loopback.
            "kubelet_port": PortPicker().pick(),
            "kubelet_bind_address": "127.0.0.1",
            "kubelet_csr_self_approve": True,
            # Stable across restarts of this process: a restart takes its own Lease back at once.
            "leader_election_identity": f"{self.node_name}-0",
            "traffic_key_secret": TRAFFIC_KEY_SECRET,
            **FAST_SETTINGS,
            **settings,
        }
        super().__init__(folder=folder, config=config)
        self.replicas: list[NodeReplica] = []

    def add_replica(self) -> NodeReplica:
        """Another replica of this node (not started yet), with the next identity `<node>-<n>`."""
        number = len(self.replicas) + 1
        config = {
            **self.config,
            "kubelet_port": PortPicker().pick(),
            "leader_election_identity": f"{self.node_name}-{number}",
        }
        replica = NodeReplica(folder=self.folder / f"replica-{number}", config=config)
        self.replicas.append(replica)
        return replica

    def alive(self) -> bool:
        return super().alive() or any(replica.alive() for replica in self.replicas)

    def stop(self, timeout_seconds: float = 30) -> int:
        """SIGTERM every replica at once (none takes over from another), then wait for each."""
        if not self.replicas:
            return super().stop(timeout_seconds)
        running = [process for process in (self, *self.replicas) if ManagedProcess.alive(process)]
        for process in running:
            assert process.process is not None
            process.process.send_signal(signal.SIGTERM)
        codes = [process.process.wait(timeout_seconds) for process in running if process.process]
        return max(codes, default=0, key=abs)

    def close(self) -> None:
        super().close()
        for replica in self.replicas:
            replica.close()


def processes_with_argument(argument: str) -> list[int]:
    """Live processes whose command line contains `argument` (our test workloads tag themselves)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            arguments = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if argument.encode() in arguments and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found
