"""Choose loopback ports for the control plane: the usual one when it is free, any free one otherwise."""

from __future__ import annotations

import socket

LOOPBACK = "127.0.0.1"


def is_free(port: int, host: str = LOOPBACK) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def _ephemeral(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


class PortPicker:
    """Hands out distinct free ports; remembers what it gave so two components never share one.

    A port is only known to be free at the moment it is probed; a component that then fails to bind
    reports "address already in use" in its log, which the start-up error shows.
    """

    def __init__(self, host: str = LOOPBACK) -> None:
        self.host = host
        self._taken: set[int] = set()

    def pick(self, preferred: int | None = None) -> int:
        if preferred is not None and preferred not in self._taken and is_free(preferred, self.host):
            self._taken.add(preferred)
            return preferred
        for _ in range(100):
            port = _ephemeral(self.host)
            if port not in self._taken:
                self._taken.add(port)
                return port
        raise RuntimeError(f"no free port found on {self.host}")
