"""Keep a local copy of a set of objects: list, then watch from that version, forever.

The loop follows the API's contract: list to get a consistent snapshot and its resourceVersion; watch
from there; on a closed stream resume from the last version seen (bookmarks included); on 410 Gone
(history compacted) list again and report what disappeared meanwhile. Any other error is logged and
retried with a short capped backoff, so a flapping apiserver never kills the node.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping

import aiohttp

from vk_provider.kit.backoff import jittered_backoff_seconds
from vk_provider.kit.kube import KubeApi, KubeApiError, RawObject

logger = logging.getLogger(__name__)

WATCH_TIMEOUT_SECONDS = 300
RETRY_INITIAL_SECONDS = 0.5
RETRY_MAX_SECONDS = 10.0


def trimmed(obj: RawObject) -> RawObject:
    """The object as the cache keeps it: without `metadata.managedFields` (server-side apply's record
    of field owners, which nothing here reads and which doubles a pod's size), as client-go's
    informers drop it."""
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        metadata.pop("managedFields", None)
    return obj


def uid_of(obj: RawObject) -> str:
    uid: str = obj["metadata"]["uid"]
    return uid


class Reflector:
    """Mirrors the objects at `path` (filtered by `query`) into `objects`, keyed by UID, `trimmed`.

    `on_change(uid)` is called for every object that was added, changed or removed, after `objects`
    reflects the change. `synced` is set once the first list is in `objects`.

    `missing_type`, when given, says what a cluster that does not serve the resource type loses (a
    CRD added by a newer version, not yet applied on an upgrade): a 404 on the list then counts as an
    empty list, synced, logged once with that text, and listed again every `RETRY_MAX_SECONDS`, so
    the rest of the component works meanwhile. Without it a 404 is retried like any other error.

    `keep`, when given, makes what is kept of each object after `trimmed`: the fields its reader
    reads, for a mirror of many large objects (it must keep `metadata.uid` and `resourceVersion`).
    """

    def __init__(
        self,
        api: KubeApi,
        path: str,
        *,
        query: Mapping[str, str],
        on_change: Callable[[str], Awaitable[None]],
        description: str,
        missing_type: str | None = None,
        keep: Callable[[RawObject], RawObject] | None = None,
    ) -> None:
        self._api = api
        self._keep = keep
        self._missing_type = missing_type
        self._missing_logged = False
        self._path = path
        self._query = dict(query)
        self._on_change = on_change
        self._description = description
        self.objects: dict[str, RawObject] = {}
        self.synced = asyncio.Event()
        self.served = True
        """False while the cluster does not serve the type (with `missing_type`: a 404 on the list)."""
        self.relists = 0

    async def _list(self) -> str:
        listing = await self._api.get(self._path, query=self._query, compact=True)
        fresh = {uid_of(item): self._kept(item) for item in listing.get("items", [])}
        self.served = True
        gone = set(self.objects) - set(fresh)
        changed = [
            uid
            for uid, item in fresh.items()
            if self.objects.get(uid, {}).get("metadata", {}).get("resourceVersion")
            != item["metadata"].get("resourceVersion")
        ]
        self.objects = fresh
        self.relists += 1
        self.synced.set()
        for uid in [*gone, *changed]:
            await self._on_change(uid)
        version: str = listing["metadata"]["resourceVersion"]
        return version

    def _kept(self, obj: RawObject) -> RawObject:
        kept = trimmed(obj)
        return kept if self._keep is None else self._keep(kept)

    async def _watch_from(self, version: str) -> str:
        """Apply events until the stream ends; return the last version seen."""
        async for event in self._api.watch(
            self._path,
            query={**self._query, "resourceVersion": version},
            timeout_seconds=WATCH_TIMEOUT_SECONDS,
        ):
            version = event.object.get("metadata", {}).get("resourceVersion", version)
            if event.type == "BOOKMARK":
                continue
            uid = uid_of(event.object)
            if event.type == "DELETED":
                self.objects.pop(uid, None)
            else:
                self.objects[uid] = self._kept(event.object)
            await self._on_change(uid)
        return version

    async def run(self) -> None:
        version: str | None = None
        failures = 0
        while True:
            try:
                if version is None:
                    version = await self._list()
                version = await self._watch_from(version)
                failures = 0
            except KubeApiError as error:
                if error.gone:
                    logger.info("the %s watch is too old (410 Gone); listing again", self._description)
                    version = None
                    continue
                if error.not_found and self._missing_type is not None and version is None:
                    await self._type_not_served(error)
                    continue
                failures += 1
                await self._back_off(failures, error)
            except (aiohttp.ClientError, OSError, TimeoutError, ValueError, KeyError) as error:
                # Connection drops, truncated payloads and garbled JSON: start over from the last version.
                failures += 1
                await self._back_off(failures, error)

    async def _type_not_served(self, error: KubeApiError) -> None:
        """The resource type is not served: nothing to mirror yet; look again later."""
        if not self._missing_logged:
            logger.warning(
                "the cluster does not serve %s (%s): %s; looking again every %.0f s",
                self._description,
                error,
                self._missing_type,
                RETRY_MAX_SECONDS,
            )
            self._missing_logged = True
        gone = list(self.objects)
        self.objects = {}
        self.served = False
        self.synced.set()
        for uid in gone:
            await self._on_change(uid)
        await asyncio.sleep(RETRY_MAX_SECONDS)

    async def _back_off(self, failures: int, error: BaseException) -> None:
        delay = jittered_backoff_seconds(
            failures, initial_seconds=RETRY_INITIAL_SECONDS, max_seconds=RETRY_MAX_SECONDS
        )
        logger.warning("watching %s failed (%s); retrying in %.1fs", self._description, error, delay)
        await asyncio.sleep(delay)
