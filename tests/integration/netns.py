"""A routable address for a test node, inside a network namespace the test creates and removes.

The node gets the namespace's address (198.18.N.2, from the range reserved for network testing); the
daemon listens on the root side of the veth pair (198.18.N.1) and `relay.py`, inside the namespace,
forwards between the two. Traffic never leaves this machine.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

RELAY = Path(__file__).with_name("relay.py")


@dataclasses.dataclass(frozen=True)
class NodeAddress:
    node_ip: str
    """What the Node publishes and the apiserver dials (inside the namespace)."""
    bind_ip: str
    """Where the daemon listens (the root side of the veth pair)."""
    port: int


def _ip(*arguments: str) -> None:
    subprocess.run(["ip", *arguments], check=True, capture_output=True, text=True, timeout=30)


def unavailable_reason() -> str | None:
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed"
    probe = f"vkpprobe{uuid.uuid4().hex[:4]}"
    try:
        _ip("netns", "add", probe)
    except subprocess.CalledProcessError as error:
        return f"network namespaces are not available here: {error.stderr.strip()}"
    _ip("netns", "del", probe)
    return None


@contextlib.contextmanager
def routable_node_address(port: int) -> Iterator[NodeAddress]:
    name = f"vkp{uuid.uuid4().hex[:6]}"
    subnet = f"198.18.{random.randrange(256)}"  # noqa: S311 - a test subnet, not a secret
    address = NodeAddress(node_ip=f"{subnet}.2", bind_ip=f"{subnet}.1", port=port)
    relay: subprocess.Popen[str] | None = None
    _ip("netns", "add", name)
    try:
        _ip("link", "add", f"{name}r", "type", "veth", "peer", "name", f"{name}n")
        _ip("link", "set", f"{name}n", "netns", name)
        _ip("addr", "add", f"{address.bind_ip}/30", "dev", f"{name}r")
        _ip("link", "set", f"{name}r", "up")
        _ip("-n", name, "addr", "add", f"{address.node_ip}/30", "dev", f"{name}n")
        _ip("-n", name, "link", "set", f"{name}n", "up")
        _ip("-n", name, "link", "set", "lo", "up")
        relay = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                name,
                sys.executable,
                str(RELAY),
                address.node_ip,
                str(port),
                address.bind_ip,
                str(port),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert relay.stdout is not None
        assert relay.stdout.readline().strip() == "relay ready"
        yield address
    finally:
        if relay is not None:
            relay.kill()
            relay.wait(10)
            if relay.stdout is not None:
                relay.stdout.close()
        with contextlib.suppress(subprocess.CalledProcessError):
            _ip("link", "del", f"{name}r")
        _ip("netns", "del", name)
