"""The development plane's Service addresses, and the `kubernetes` Service that pods can reach.

Nothing in the development cluster routes cluster IPs (there is no kube-proxy), so a pod's in-cluster
client, which dials `KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT` (the `kubernetes` Service, 443),
would reach nothing. Two things make it reach the apiserver:

- the plane's Service range is a /24 of the dev pod network (`podnetwork`), which is routed to this
  host, so the `kubernetes` Service's address (the range's first) can be bound here. The /24s 240..255
  are Service ranges, one per address group (`podnetwork`), clear of the /24s development nodes
  (2..33) and tests (34..239) give pods; a plane takes the first whose `kubernetes` address is free,
  starting from its folder's group, and keeps it in its state (`ports["kubernetes-service-subnet"]`),
  because the apiserver stores the range. That choice is the plane's address group: its pods and host
  processes take their addresses from the same group, so the hold below keeps every address of one
  running plane from every other. Planes start at once (the tests start several), so the choice is held
  from the moment it is made: a socket bound (never listening) to the address, with SO_REUSEPORT so
  that the relay can bind beside it, and closed once the relay serves; another plane's check, a bind
  without SO_REUSEPORT, fails all along;
- a relay (`relay`) listens on that address, port 443, and carries each connection to the apiserver on
  loopback, as kube-proxy would; TLS passes through, and the apiserver's certificate names the address.
Only the `kubernetes` Service is relayed; other Services are reached through their endpoints (the
router, Envoy) as before.
"""

from __future__ import annotations

import dataclasses
import errno
import ipaddress
import socket
import ssl
import sys
from pathlib import Path

from vk_devtools.devcluster import podnetwork
from vk_devtools.devcluster import relay as relay_module

COMPONENT = "kubernetes-service"
SUBNET_KEY = "kubernetes-service-subnet"
"""Where the plane's state keeps which /24 of the pod network is its Service range."""
FIRST_SUBNET = 240
SUBNET_COUNT = podnetwork.ADDRESS_GROUPS
KUBERNETES_SERVICE_PORT = 443


@dataclasses.dataclass
class Reservation:
    """A Service /24 chosen for a plane, held (see the module docstring) until `release`."""

    subnet: int
    held: socket.socket | None

    @property
    def group(self) -> int:
        return group_of(self.subnet)

    def release(self) -> None:
        if self.held is not None:
            self.held.close()
            self.held = None


def reserve_subnet(directory: Path) -> Reservation:
    """A Service /24 whose `kubernetes` address no other plane here holds (the folder's preferred
    group's when free), and with it the plane's address group. Without the pod network routed here
    nothing can be bound: the preferred group's, unheld."""
    start = podnetwork.preferred_group(directory)
    candidates = [FIRST_SUBNET + (start + offset) % SUBNET_COUNT for offset in range(SUBNET_COUNT)]
    try:
        podnetwork.ensure_local_route()
    except podnetwork.PodNetworkError:
        return Reservation(candidates[0], None)
    for index in candidates:
        held = _hold(kubernetes_service_address(index))
        if held is not None:
            return Reservation(index, held)
    raise RuntimeError(
        f"every Service range of the dev pod network ({len(candidates)}) has its `kubernetes` address "
        "taken by another plane on this host; stop one (`vk-provider dev down --dir ...`)"
    )


def _hold(address: ipaddress.IPv4Address) -> socket.socket | None:
    """A socket bound to the address's port 443 with SO_REUSEPORT; None if any other socket is bound
    there (the first bind, without the option, is the check)."""
    target = (str(address), KUBERNETES_SERVICE_PORT)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as check:
        try:
            check.bind(target)
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                return None
            raise
    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        held.bind(target)
    except OSError:
        held.close()
        return None  # taken in the microseconds between the two binds
    return held


def group_of(subnet: int) -> int:
    """The address group of the plane whose Service range is /24 number `subnet`."""
    if not FIRST_SUBNET <= subnet < FIRST_SUBNET + SUBNET_COUNT:
        raise ValueError(
            f"/24 number {subnet} is not a Service range ({FIRST_SUBNET}..{FIRST_SUBNET + SUBNET_COUNT - 1})"
        )
    return subnet - FIRST_SUBNET


def service_range(subnet: int) -> ipaddress.IPv4Network:
    return podnetwork.subnet(subnet)


def kubernetes_service_address(subnet: int) -> ipaddress.IPv4Address:
    """The `kubernetes` Service's cluster IP: the range's first address, as the apiserver allocates it."""
    return service_range(subnet)[1]


def relay_argv(subnet: int, apiserver_host: str, apiserver_port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        relay_module.__name__,
        str(kubernetes_service_address(subnet)),
        str(KUBERNETES_SERVICE_PORT),
        apiserver_host,
        str(apiserver_port),
    ]


def reaches_its_apiserver(subnet: int, ca_cert: Path) -> bool:
    """Whether a TLS client trusting this plane's CA gets through the Service's address: another
    plane's relay on it would present another CA's certificate, and this says no."""
    address = str(kubernetes_service_address(subnet))
    context = ssl.create_default_context(cafile=str(ca_cert))
    try:
        with (
            socket.create_connection((address, KUBERNETES_SERVICE_PORT), timeout=3) as connection,
            context.wrap_socket(connection, server_hostname=address),
        ):
            return True
    except (OSError, ssl.SSLError):
        return False
