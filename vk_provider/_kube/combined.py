"""One mirror made of several: the same objects watched in several places, read as one.

A node limited to some namespaces may not list pods or services cluster-wide (its RBAC grants them
per namespace only), so it runs one `Reflector` per namespace and its readers, which want "every pod
bound here", read their union through `CombinedReflector`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping, Sequence
from typing import Protocol

from vk_provider._kube.watching import Reflector
from vk_provider.kit.kube import RawObject


class Mirror(Protocol):
    """What readers of a watch cache use: its objects by UID, whether it has listed, and its loop.
    `Reflector` and `CombinedReflector` both are one."""

    @property
    def objects(self) -> Mapping[str, RawObject]: ...

    @property
    def synced(self) -> asyncio.Event: ...

    async def run(self) -> None: ...


class _UnionView(Mapping[str, RawObject]):
    """A live read of several reflectors' objects: each replaces its dict on a relist, so a copy or a
    ChainMap taken once would go stale. UIDs are unique cluster-wide, so no two parts share a key."""

    def __init__(self, parts: Sequence[Reflector]) -> None:
        self._parts = parts

    def __getitem__(self, uid: str) -> RawObject:
        for part in self._parts:
            found = part.objects.get(uid)
            if found is not None:
                return found
        raise KeyError(uid)

    def __iter__(self) -> Iterator[str]:
        for part in self._parts:
            yield from list(part.objects)

    def __len__(self) -> int:
        return sum(len(part.objects) for part in self._parts)


class CombinedReflector:
    """The union of `parts`: `objects` reads all of them, `synced` is set once every part has listed,
    `run` runs them all (one failing for good ends them all, as one Reflector's failure would)."""

    def __init__(self, parts: Sequence[Reflector]) -> None:
        if not parts:
            raise ValueError("a combined reflector needs at least one part")
        self.parts = tuple(parts)
        self._objects = _UnionView(self.parts)
        self._synced = asyncio.Event()

    @property
    def objects(self) -> Mapping[str, RawObject]:
        return self._objects

    @property
    def synced(self) -> asyncio.Event:
        return self._synced

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            for part in self.parts:
                group.create_task(part.run())
            for part in self.parts:
                await part.synced.wait()
            self._synced.set()
