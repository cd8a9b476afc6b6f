"""A pod address range for `local` nodes that Services accept.

The `local` provider gives each pod an address of its own on this host. Loopback addresses need no
setup, but the apiserver refuses them in EndpointSlices ("may not be in the loopback range"), so a
Service in front of local pods would never get endpoints. A range routed to the host itself
(`ip route replace local 198.19.0.0/16 dev lo`, the "AnyIP" route) behaves like loopback for binding
and connecting, and is a valid endpoint address. 198.19.0.0/16 is half of the benchmarking block
(RFC 2544): never routed on the internet, and clear of the 198.18.x addresses the kubelet API tests
give their network namespaces.

The same range gives the development cluster's own host processes addresses the apiserver accepts:
its virtual nodes (the apiserver's node proxy refuses a loopback node address, so `kubectl get --raw
/api/v1/nodes/<node>/proxy/...` and metrics-server could not reach them) and metrics-server (the
endpoint of the aggregated `metrics.k8s.io` API). They come from /24 number 1 (`HOST_SUBNET_INDEX`),
which no node hands out to pods: 16 addresses per plane, one slot per process.

Several planes may run on one host at once (the tests start several), so each takes an address group
of its own when it starts: its Service /24 (`servicenetwork`, which holds the choice), its pods' pair
of /24s (`localnode`) and its block of host addresses. Two running planes never share an address.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import shutil
import subprocess
import zlib
from pathlib import Path

from vk_providers.local.config import is_local_range

logger = logging.getLogger(__name__)

POD_NETWORK = ipaddress.IPv4Network("198.19.0.0/16")
HOST_SUBNET_INDEX = 1
"""The /24 of `POD_NETWORK` that host processes of development clusters take their addresses from."""
HOST_SLOTS_PER_CLUSTER = 16
ADDRESS_GROUPS = 16
"""How many planes can run on one host at once: one address group each (fills the host /24)."""


class PodNetworkError(RuntimeError):
    """The range cannot be made local; the message says what to run instead."""


def ensure_local_route(network: ipaddress.IPv4Network = POD_NETWORK) -> None:
    """Make `network` local to this host if it is not already (needs root and iproute2)."""
    if is_local_range(network):
        return
    command = ["ip", "route", "replace", "local", str(network), "dev", "lo"]
    if os.geteuid() != 0 or shutil.which("ip") is None:
        raise PodNetworkError(
            f"pods of local nodes need {network} routed to this host; run as root: {' '.join(command)}"
        )
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    if completed.returncode != 0 or not is_local_range(network):
        raise PodNetworkError(
            f"`{' '.join(command)}` failed: {completed.stderr.strip() or 'still not local'}"
        )
    logger.info("routed %s to this host for local pods", network)


def subnet(index: int, network: ipaddress.IPv4Network = POD_NETWORK) -> ipaddress.IPv4Network:
    """The index-th /24 of the pod network: one per local node, so nodes never share an address."""
    subnets = list(network.subnets(new_prefix=24))
    return subnets[index % len(subnets)]


def preferred_group(directory: Path) -> int:
    """The address group a plane in `directory` tries first (a hash of the path, so a folder's plane
    usually gets the same addresses again); `servicenetwork.reserve_subnet` takes the first free one."""
    return zlib.crc32(str(directory.resolve()).encode()) % ADDRESS_GROUPS


def host_address(group: int, slot: int) -> str:
    """The address of host process `slot` (1..15) of the plane holding address `group`.

    Slots: 1 the home node, 2 the burst node, 3 metrics-server; the rest are free."""
    if not 1 <= slot < HOST_SLOTS_PER_CLUSTER:
        raise ValueError(f"host address slot {slot} is not in 1..{HOST_SLOTS_PER_CLUSTER - 1}")
    if not 0 <= group < ADDRESS_GROUPS:
        raise ValueError(f"address group {group} is not in 0..{ADDRESS_GROUPS - 1}")
    block = subnet(HOST_SUBNET_INDEX)
    return str(block[group * HOST_SLOTS_PER_CLUSTER + slot])
