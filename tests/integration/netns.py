"""A routable address for a test node, inside a network namespace the test creates and removes.

The node gets the namespace's address (198.18.N.2, from the range reserved for network testing); the
daemon listens on the root side of the veth pair (198.18.N.1) and a relay, inside the namespace,
forwards between the two. Traffic never leaves this machine.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator

from vk_devtools.devcluster import relay as relay_module


@dataclasses.dataclass(frozen=True)
class NodeAddress:
    node_ip: str
    """What the Node publishes and the apiserver dials (inside the namespace)."""
    bind_ip: str
    """Where the daemon listens (the root side of the veth pair)."""
    port: int

    def node_settings(self) -> dict[str, object]:
        """The node daemon's settings that publish this address and listen behind it."""
        return {"addresses": [self.node_ip], "kubelet_bind_address": self.bind_ip, "kubelet_port": self.port}


def _ip(*arguments: str) -> str:
    return subprocess.run(["ip", *arguments], check=True, capture_output=True, text=True, timeout=30).stdout


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


@dataclasses.dataclass(frozen=True)
class NetworkNamespace:
    name: str
    host_ip: str
    """The root side of the veth pair: where processes on this host are reached from inside."""
    inner_ip: str
    """The namespace's side: where its processes are reached from this host."""

    def command(self, *arguments: str) -> list[str]:
        """`arguments` run inside the namespace (and in a mount namespace of their own)."""
        return ["ip", "netns", "exec", self.name, *arguments]


def _unused_subnet() -> str:
    """A random 198.18.N that no interface of this host has yet: two namespaces alive at once (other
    tests, other workers) on one /30 would give the root namespace two routes to it, and the
    apiserver's connections would reach the wrong one."""
    taken = set(re.findall(r"inet 198\.18\.(\d+)\.", _ip("-o", "-4", "addr", "show")))
    free = [number for number in range(256) if str(number) not in taken]
    return f"198.18.{random.choice(free)}"  # noqa: S311 - a test subnet, not a secret


@contextlib.contextmanager
def network_namespace(*, routes_via_host: tuple[str, ...] = ()) -> Iterator[NetworkNamespace]:
    """A namespace joined to this host by a veth pair (a random /30 of 198.18.N.0/24); the networks of
    `routes_via_host` (e.g. the dev pod network, local to this host) are reached through the host."""
    name = f"vkp{uuid.uuid4().hex[:6]}"
    subnet = _unused_subnet()
    namespace = NetworkNamespace(name=name, host_ip=f"{subnet}.1", inner_ip=f"{subnet}.2")
    _ip("netns", "add", name)
    try:
        _ip("link", "add", f"{name}r", "type", "veth", "peer", "name", f"{name}n")
        _ip("link", "set", f"{name}n", "netns", name)
        _ip("addr", "add", f"{namespace.host_ip}/30", "dev", f"{name}r")
        _ip("link", "set", f"{name}r", "up")
        _ip("-n", name, "addr", "add", f"{namespace.inner_ip}/30", "dev", f"{name}n")
        _ip("-n", name, "link", "set", f"{name}n", "up")
        _ip("-n", name, "link", "set", "lo", "up")
        for network in routes_via_host:
            _ip("-n", name, "route", "add", network, "via", namespace.host_ip)
        yield namespace
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            _ip("link", "del", f"{name}r")
        _ip("netns", "del", name)


@contextlib.contextmanager
def relay(
    listen_host: str,
    listen_port: int,
    target_host: str,
    target_port: int,
    *,
    inside: NetworkNamespace | None = None,
) -> Iterator[None]:
    """`vk_devtools.devcluster.relay` forwarding TCP from one address to another, on this host or
    `inside` a namespace."""
    command = [
        sys.executable,
        "-m",
        relay_module.__name__,
        listen_host,
        str(listen_port),
        target_host,
        str(target_port),
    ]
    process = subprocess.Popen(
        inside.command(*command) if inside else command, stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "relay ready"
        yield
    finally:
        process.kill()
        process.wait(10)
        if process.stdout is not None:
            process.stdout.close()


@contextlib.contextmanager
def routable_node_address(port: int) -> Iterator[NodeAddress]:
    with network_namespace() as namespace:
        address = NodeAddress(node_ip=namespace.inner_ip, bind_ip=namespace.host_ip, port=port)
        with relay(address.node_ip, port, address.bind_ip, port, inside=namespace):
            yield address
