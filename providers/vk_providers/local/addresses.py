"""Loopback addresses for pods: one 127.x.y.z per pod UID, stable across daemon restarts.

Every pod gets an address of its own, so two pods can both listen on port 8080 and a pod's address
means the same thing to the router as it would on a real node. Linux routes all of 127.0.0.0/8 to the
loopback interface, so a process can bind to any of them without configuration. The book is a JSON
file in the state folder: a daemon that restarts gives each pod the address it had.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

from vk_provider.errors import TemporaryProviderError
from vk_providers.local.records import read_json, write_json_atomically

LOCALHOST = ipaddress.IPv4Address("127.0.0.1")
"""Never handed out: everything on the host already listens there."""


class AddressBook:
    def __init__(self, path: Path, network: ipaddress.IPv4Network) -> None:
        self._path = path
        self._network = network
        data = read_json(path) or {}
        self._by_uid: dict[str, str] = dict(data.get("addresses", {}))
        self._last: str | None = data.get("last")

    def lookup(self, uid: str) -> str | None:
        return self._by_uid.get(uid)

    def reserve(self, uid: str) -> str:
        """The UID's address, allocated now if it has none."""
        address = self._by_uid.get(uid)
        if address is None:
            address = self._allocate()
            self._by_uid[uid] = address
            self._last = address
            self._save()
        return address

    def release(self, uid: str) -> None:
        if self._by_uid.pop(uid, None) is not None:
            self._save()

    def _allocate(self) -> str:
        first, last = self._usable_range()
        size = last - first + 1
        # Next-fit, as CNI IPAM plugins do: a freed address is reused last, so a client still holding a
        # deleted pod's address is unlikely to reach a new pod by mistake.
        start = 0
        if self._last is not None and first <= int(ipaddress.IPv4Address(self._last)) <= last:
            start = int(ipaddress.IPv4Address(self._last)) - first + 1
        used = set(self._by_uid.values())
        for step in range(size):
            candidate = ipaddress.IPv4Address(first + (start + step) % size)
            if candidate != LOCALHOST and str(candidate) not in used:
                return str(candidate)
        raise TemporaryProviderError(f"every address of {self._network} is taken by a pod")

    def _usable_range(self) -> tuple[int, int]:
        network = self._network
        if network.prefixlen >= 31:  # no network or broadcast address to skip
            return int(network.network_address), int(network.broadcast_address)
        return int(network.network_address) + 1, int(network.broadcast_address) - 1

    def _save(self) -> None:
        write_json_atomically(self._path, {"addresses": self._by_uid, "last": self._last})
