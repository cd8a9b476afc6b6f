"""Reads answered from watch caches: what the controller and the policy look at, mirrored once, not polled.

The policy observes its pool, its Offloads and every unfinished pod every couple of seconds, and the
reconciler reads each Offload's Deployments and Service on every pass. Sent to the apiserver, those
reads grow with the cluster even when nothing changes. `CachedApi` is a `KubeApi` whose GETs of the
resources it was told to watch are answered from an `Informer` (a `Reflector` per resource, started on
the first read and kept until `close`), the way controller-runtime's client reads from its cache:

- a list evaluates `labelSelector` and `fieldSelector` on the mirror (`selectorquery`), and a field
  the mirror cannot evaluate sends the read to the apiserver;
- a read of one object that the mirror does not hold asks the apiserver once, and the answer "not
  found" is then trusted from the mirror (its watch sees the object if it is created), so reading an
  Away Deployment that does not exist yet costs nothing after the first time;
- until its first list is in, and for namespaces outside its scope, a read goes to the apiserver,
  so a watch that is forbidden or not yet listed only costs what polling cost before;
- a write goes to the apiserver, and the object it returns replaces the mirror's copy when it is newer
  (client-go's mutation cache), so a pass reads back what it just wrote, not the watch's lag;
- a resource type the cluster does not serve is a 404 on a list, as from the apiserver.

What a read returns is the mirror's own object: callers copy before they change anything.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from vk_provider._kube.selectorquery import field_matcher, label_matcher, required_label
from vk_provider._kube.watching import Reflector, trimmed, uid_of
from vk_provider.kit.kube import JSON, KubeApi, KubeApiError, RawObject

logger = logging.getLogger(__name__)

TOMBSTONES_KEPT = 4096
"""Deleted UIDs remembered so that a late write answer does not bring a deleted object back."""
WRITES = frozenset({"POST", "PUT", "PATCH"})

Key = tuple[str, str]
"""(namespace, name); namespace "" for a cluster-scoped object."""


@dataclasses.dataclass(frozen=True)
class ResourcePath:
    """A REST path taken apart: `/apis/apps/v1/namespaces/ns/deployments/name/status`."""

    prefix: str
    """`/api/v1` or `/apis/<group>/<version>`."""
    plural: str
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None

    @classmethod
    def parse(cls, path: str) -> ResourcePath | None:
        parts = [part for part in path.split("/") if part]
        if parts[:1] == ["api"] and len(parts) >= 3:
            prefix, rest = "/" + "/".join(parts[:2]), parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 4:
            prefix, rest = "/" + "/".join(parts[:3]), parts[3:]
        else:
            return None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        else:
            namespace = None
        if len(rest) > 3:
            return None
        name, subresource = [*rest[1:], None, None][:2]
        return cls(prefix, rest[0], namespace, name, subresource)

    @property
    def collection(self) -> tuple[str, str]:
        return self.prefix, self.plural


@dataclasses.dataclass(frozen=True)
class Watched:
    """A resource that `CachedApi` answers from a mirror: `collection` is its cluster-wide path."""

    collection: str
    namespaced: bool = True
    keep: Callable[[RawObject], RawObject] | None = None
    """What of each object the mirror keeps (`Reflector`'s `keep`): its readers' fields, for a type
    with many large objects. Reads, a write's answer included, return what is kept."""


def _resource_version(obj: Mapping[str, Any]) -> int | None:
    """The apiserver's resourceVersion as a number, when it is one (etcd's revision; client-go's
    mutation cache compares them the same way), else None: never newer than anything."""
    version = (obj.get("metadata") or {}).get("resourceVersion")
    try:
        return int(str(version))
    except (TypeError, ValueError):
        return None


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _key(obj: Mapping[str, Any]) -> Key:
    metadata = obj.get("metadata") or {}
    return str(metadata.get("namespace") or ""), str(metadata.get("name") or "")


class Informer:
    """One resource's mirror with its indexes by namespace and by name, and by the value of each
    label key a selector has asked for (built on the first such read, kept up to date after: a
    Deployment's pods are found among 10,000 without looking at each)."""

    def __init__(
        self, api: KubeApi, path: str, description: str, keep: Callable[[RawObject], RawObject] | None = None
    ) -> None:
        self._keep = keep
        self.reflector = Reflector(
            api,
            path,
            query={},
            on_change=self._changed,
            description=description,
            missing_type=f"reads of {description} find nothing until it is served",
            keep=keep,
        )
        self._uid_by_key: dict[Key, str] = {}
        self._key_by_uid: dict[str, Key] = {}
        self._by_namespace: dict[str, set[str]] = collections.defaultdict(set)
        self._by_label: dict[str, dict[str, set[str]]] = {}
        """Label key -> value -> uids, for the keys asked for."""
        self._indexed_labels: dict[str, dict[str, str]] = {}
        """uid -> the values it is indexed under, by label key (to take it out again)."""
        self._absent: set[Key] = set()
        """Names the apiserver or the watch said do not exist (now or since): a miss to trust."""
        self._tombstones: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._handlers: list[Callable[[str], Awaitable[None]]] = []

    def subscribe(self, on_change: Callable[[str], Awaitable[None]]) -> None:
        """Call `on_change(uid)` for every object added, changed or removed, once the indexes (so every
        read) show the change: a reconcile queued by it reads what woke it."""
        self._handlers.append(on_change)

    @property
    def ready(self) -> bool:
        return self.reflector.synced.is_set()

    @property
    def served(self) -> bool:
        return self.reflector.served

    async def _changed(self, uid: str) -> None:
        obj = self.reflector.objects.get(uid)
        old = self._unindex(uid)
        if obj is None:
            self._tombstones[uid] = None
            while len(self._tombstones) > TOMBSTONES_KEPT:
                self._tombstones.popitem(last=False)
            if old is not None:
                self._absent.add(old)
        else:
            self._index(uid, obj)
        for handler in self._handlers:
            await handler(uid)

    def _index(self, uid: str, obj: RawObject) -> None:
        key = _key(obj)
        self._key_by_uid[uid] = key
        self._uid_by_key[key] = uid
        self._by_namespace[key[0]].add(uid)
        self._absent.discard(key)
        if self._by_label:
            labels = _labels(obj)
            values = {label: labels[label] for label in self._by_label if label in labels}
            for label, value in values.items():
                self._by_label[label].setdefault(value, set()).add(uid)
            if values:
                self._indexed_labels[uid] = values

    def _unindex(self, uid: str) -> Key | None:
        """Take `uid` out of every index; its key, if it was in them."""
        old = self._key_by_uid.pop(uid, None)
        if old is not None:
            if self._uid_by_key.get(old) == uid:
                del self._uid_by_key[old]
            self._by_namespace[old[0]].discard(uid)
        for label, value in self._indexed_labels.pop(uid, {}).items():
            holders = self._by_label[label].get(value)
            if holders is not None:
                holders.discard(uid)
                if not holders:
                    del self._by_label[label][value]
        return old

    def _label_index(self, label: str) -> dict[str, set[str]]:
        index = self._by_label.get(label)
        if index is None:
            index = self._by_label[label] = {}
            for uid, obj in self.reflector.objects.items():
                value = _labels(obj).get(label)
                if value is not None:
                    index.setdefault(value, set()).add(uid)
                    self._indexed_labels.setdefault(uid, {})[label] = value
        return index

    def kept(self, obj: RawObject) -> RawObject:
        """`obj` as the mirror keeps it."""
        kept = trimmed(obj)
        return kept if self._keep is None else self._keep(kept)

    def get(self, key: Key) -> RawObject | None:
        uid = self._uid_by_key.get(key)
        return None if uid is None else self.reflector.objects.get(uid)

    def known_absent(self, key: Key) -> bool:
        return key in self._absent

    def mark_absent(self, key: Key) -> None:
        if key not in self._uid_by_key:
            self._absent.add(key)

    def items(self, namespace: str | None, label: tuple[str, str] | None = None) -> list[RawObject]:
        """The objects in `namespace` (None: all), narrowed to those with the label `label` (key,
        value) when given: the caller still applies its whole selector."""
        objects = self.reflector.objects
        uids: Iterable[str]
        if label is not None:
            uids = self._label_index(label[0]).get(label[1], ())
            if namespace is not None:
                in_namespace = self._by_namespace.get(namespace, set())
                uids = [uid for uid in uids if uid in in_namespace]
        elif namespace is None:
            return list(objects.values())
        else:
            uids = self._by_namespace.get(namespace, ())
        return [objects[uid] for uid in uids if uid in objects]

    def remember(self, obj: RawObject) -> None:
        """A write's answer: kept when newer than the mirror's copy (the watch brings it soon anyway)."""
        try:
            uid = uid_of(obj)
        except (KeyError, TypeError):
            return
        if uid in self._tombstones:
            return
        new = _resource_version(obj)
        held = self.reflector.objects.get(uid)
        if held is not None:
            old = _resource_version(held)
            if new is None or (old is not None and new <= old):
                return
        self.reflector.objects[uid] = self.kept(obj)
        self._unindex(uid)
        self._index(uid, obj)


class Informers:
    """The mirrors of one process (or one leader term), started on first use, stopped by `close`."""

    def __init__(self, api: KubeApi, watched: list[Watched], *, namespace: str | None = None) -> None:
        self._api = api
        self._namespace = namespace
        """Namespaced resources are watched in this namespace only (None: in all of them)."""
        self._watched: dict[tuple[str, str], Watched] = {}
        for item in watched:
            parsed = ResourcePath.parse(item.collection)
            if parsed is None or parsed.name is not None or parsed.namespace is not None:
                raise ValueError(f"{item.collection!r} is not the cluster-wide path of a collection")
            self._watched[parsed.collection] = item
        self._informers: dict[tuple[str, str], Informer] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def covers(self, path: ResourcePath) -> bool:
        """Whether reads of this path can be answered from a mirror (its type watched, its namespace
        inside the scope)."""
        watched = self._watched.get(path.collection)
        if watched is None:
            return False
        if not watched.namespaced or self._namespace is None:
            return True
        return path.namespace == self._namespace

    def informer(self, path: ResourcePath) -> Informer:
        """The mirror of this path's resource, started now if this is its first read."""
        found = self._informers.get(path.collection)
        if found is not None:
            return found
        watched = self._watched[path.collection]
        namespace = self._namespace if watched.namespaced else None
        where = f"/namespaces/{namespace}" if namespace else ""
        informer = Informer(
            self._api,
            f"{path.prefix}{where}/{path.plural}",
            f"{path.plural} ({path.prefix}{', namespace ' + namespace if namespace else ''})",
            watched.keep,
        )
        self._informers[path.collection] = informer
        task = asyncio.create_task(informer.reflector.run(), name=f"informer {path.plural}")
        self._tasks.add(task)
        task.add_done_callback(self._ended)
        return informer

    def watch(self, collection: str, on_change: Callable[[str], Awaitable[None]]) -> Informer:
        """The mirror of `collection` (a watched path inside the scope), with `on_change` subscribed."""
        parsed = ResourcePath.parse(collection)
        if parsed is None or parsed.name is not None or not self.covers(parsed):
            raise ValueError(f"{collection!r} is not a watched collection inside this scope")
        informer = self.informer(parsed)
        informer.subscribe(on_change)
        return informer

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("an informer stopped: %s", task.exception())

    def started(self) -> list[str]:
        """The resources mirrored so far (for logs and tests)."""
        return sorted(plural for _, plural in self._informers)

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        self._informers.clear()


class CachedApi(KubeApi):
    """A `KubeApi` on `api`'s connection whose reads of watched resources come from `informers`."""

    def __init__(self, api: KubeApi, informers: Informers) -> None:
        super().__init__(api.api_client, budget=api.budget)
        self._direct = api
        self.informers = informers

    async def close(self) -> None:
        """The connection is `api`'s: its owner closes it."""
        await self.informers.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str | int | bool] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout_seconds: float = 30.0,
        compact: bool = False,
    ) -> RawObject:
        parsed = ResourcePath.parse(path.split("?", 1)[0])
        reading = method == "GET" and not (query or {}).get("watch")
        if reading and parsed is not None and parsed.subresource is None and self.informers.covers(parsed):
            answer = await self._cached_read(parsed, query or {})
            if answer is not None:
                return answer
        answer = await self._direct.request(
            method,
            path,
            query=query,
            body=body,
            content_type=content_type,
            timeout_seconds=timeout_seconds,
            compact=compact,
        )
        if parsed is not None and method in WRITES and self.informers.covers(parsed):
            informer = self.informers.informer(parsed)
            informer.remember(answer)
            return informer.kept(answer)  # what a read returns, so no caller depends on more
        return answer

    async def _cached_read(
        self, path: ResourcePath, query: Mapping[str, str | int | bool]
    ) -> RawObject | None:
        """The answer from the mirror, or None when the apiserver has to give it."""
        if set(query) - {"labelSelector", "fieldSelector"}:
            return None  # resourceVersion, limit, ...: the caller wants the apiserver's own answer
        informer = self.informers.informer(path)
        if not informer.ready:
            return None
        if path.name is not None:
            return await self._cached_object(informer, path)
        if not informer.served:
            raise KubeApiError(
                404, "NotFound", f"the server could not find the requested resource ({path.plural})"
            )
        matches_fields = field_matcher(str(query.get("fieldSelector") or ""))
        if matches_fields is None:
            return None
        label_selector = str(query.get("labelSelector") or "")
        matches_labels = label_matcher(label_selector)
        items = [
            obj
            for obj in informer.items(path.namespace, required_label(label_selector))
            if matches_labels((obj.get("metadata") or {}).get("labels") or {}) and matches_fields(obj)
        ]
        items.sort(key=_key)  # the apiserver lists in key order
        return {"kind": "List", "apiVersion": "v1", "metadata": {}, "items": items}

    async def _cached_object(self, informer: Informer, path: ResourcePath) -> RawObject:
        key = (path.namespace or "", path.name or "")
        found = informer.get(key)
        if found is not None:
            return found
        if not informer.known_absent(key):
            try:
                fetched = await self._direct.get(_object_path(path))
            except KubeApiError as error:
                if error.not_found:
                    informer.mark_absent(key)
                raise
            informer.remember(fetched)
            return informer.kept(fetched)
        raise KubeApiError(404, "NotFound", f'{path.plural} "{path.name}" not found')


def _object_path(path: ResourcePath) -> str:
    where = f"/namespaces/{path.namespace}" if path.namespace else ""
    return f"{path.prefix}{where}/{path.plural}/{path.name}"


def uncached(api: KubeApi) -> KubeApi:
    """The apiserver itself behind `api`: for a read whose answer a write is conditioned on (its
    resourceVersion), where a mirror's lag would only buy a conflict."""
    return api._direct if isinstance(api, CachedApi) else api
