"""Run `vk-provider node` as a real subprocess against the test plane, so tests can stop and kill -9 it."""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import yaml

from vk_devtools.devcluster.ports import PortPicker
from vk_devtools.devcluster.processes import tail_of_file
from vk_provider.kit import procfs

# Short intervals so the tests observe behaviour in seconds; the lease keeps its real 40 s duration.
FAST_SETTINGS: dict[str, Any] = {
    "health_check_interval_seconds": 1.0,
    "orphan_sweep_interval_seconds": 2.0,
    "retry_initial_seconds": 0.5,
    "retry_max_seconds": 4.0,
    "status_poll_interval_seconds": 1.0,
    "node_status_interval_seconds": 20.0,
}


class ManagedProcess:
    """A `python -m vk_provider ...` subprocess with its own log file, which tests can stop or kill -9."""

    def __init__(self, *, folder: Path, arguments: list[str], log_name: str = "daemon.log") -> None:
        self.folder = folder
        self.log_path = folder / log_name
        self.arguments = arguments
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
                [sys.executable, "-m", "vk_provider", *self.arguments],
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

    def log_tail(self, lines: int = 60) -> str:
        return tail_of_file(self.log_path, lines=lines)

    def close(self) -> None:
        if self.alive():
            assert self.process is not None
            procfs.signal_group(self.process.pid, signal.SIGKILL)
            self.process.wait(30)


class NodeDaemon(ManagedProcess):
    """One virtual node daemon: a config file, a state folder, a log, and the process."""

    def __init__(self, *, folder: Path, provider: str, **settings: Any) -> None:
        self.node_name = settings.pop("node_name", f"vk-{provider}-{uuid.uuid4().hex[:6]}")
        self.config_path = folder / "node.yaml"
        config = {
            "node_name": self.node_name,
            "provider": provider,
            "state_dir": str(folder / "state"),
            # Every daemon serves its kubelet API on a port of its own, on loopback.
            "kubelet_port": PortPicker().pick(),
            "kubelet_bind_address": "127.0.0.1",
            "kubelet_csr_self_approve": True,
            **FAST_SETTINGS,
            **settings,
        }
        super().__init__(
            folder=folder,
            arguments=["node", "--config", str(self.config_path), "--log-level", "DEBUG"],
        )
        self.config_path.write_text(yaml.safe_dump(config))
