"""Record Kubernetes Events about pods and the node, without ever blocking the caller.

Events are queued and posted by a background task; a full queue drops the oldest news rather than
slowing reconciliation, and a failed post is logged, never raised: an Event is a courtesy to the
operator, the pod status is the record. Repeats are folded as client-go folds them
(`eventcorrelation`): an identical event patches the earlier Event's count, similar ones combine, and
a source that floods one object is held back, so a retry loop costs the apiserver no new object per try.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Literal

from vk_provider._kube.eventcorrelation import EventCorrelator, EventKey
from vk_provider.kit.kube import KubeApi, KubeApiError, resource_path

logger = logging.getLogger(__name__)

COMPONENT = "vk-provider"
QUEUE_SIZE = 10_000

EventType = Literal["Normal", "Warning"]


@dataclasses.dataclass(frozen=True, slots=True)
class InvolvedObject:
    kind: str
    name: str
    namespace: str
    uid: str
    api_version: str = "v1"


@dataclasses.dataclass(frozen=True, slots=True)
class PendingEvent:
    involved: InvolvedObject
    type: EventType
    reason: str
    message: str
    at: datetime
    name: str = ""
    """The Event's name: a new one's, or the one a repeat patches."""
    count: int = 1
    """1: a new Event; more: a repeat, patched onto the Event `name` (created if it is gone)."""
    first_at: datetime | None = None
    """When the Event was first seen (a repeat's firstTimestamp); None: `at`."""


def _new_name(involved_name: str) -> str:
    return f"{involved_name}.{uuid.uuid4().hex[:16]}"


class EventRecorder:
    def __init__(
        self,
        api: KubeApi,
        *,
        host: str,
        component: str = COMPONENT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = api
        self._host = host
        self._component = component
        self._queue: asyncio.Queue[PendingEvent] = asyncio.Queue(QUEUE_SIZE)
        self._correlator = EventCorrelator(clock=clock, new_name=_new_name)
        self.posted = 0

    def record(self, involved: InvolvedObject, type: EventType, reason: str, message: str) -> None:
        log = logger.warning if type == "Warning" else logger.info
        log("%s %s/%s: %s: %s", involved.kind, involved.namespace, involved.name, reason, message)
        at = datetime.now(UTC)
        key = EventKey(
            self._component,
            self._host,
            involved.kind,
            involved.namespace,
            involved.name,
            involved.uid,
            type,
            reason,
        )
        correlated = self._correlator.correlate(key, message, at)
        if correlated is None:
            logger.debug(
                "event %s about %s/%s held back: too many about it", reason, involved.kind, involved.name
            )
            return
        event = PendingEvent(
            involved,
            type,
            reason,
            correlated.message,
            at,
            name=correlated.name,
            count=correlated.count,
            first_at=correlated.first_at,
        )
        if self._queue.full():
            self._queue.get_nowait()
            logger.warning("the event queue is full; dropped the oldest event")
        self._queue.put_nowait(event)

    async def run(self) -> None:
        while True:
            event = await self._queue.get()
            try:
                await self._post(event)
                self.posted += 1
            except (KubeApiError, OSError, TimeoutError) as error:
                logger.warning("could not post event %s (%s)", event.reason, error)

    async def _post(self, event: PendingEvent) -> None:
        namespace = event.involved.namespace or "default"
        stamp = _stamp(event.at)
        name = event.name or _new_name(event.involved.name)
        if event.count > 1:
            # A repeat: the Event made for the first one gets the new count, as client-go patches it.
            patch = {"count": event.count, "lastTimestamp": stamp, "message": event.message}
            try:
                await self._api.patch(resource_path("v1", "events", namespace=namespace, name=name), patch)
                return
            except KubeApiError as error:
                if not error.not_found:
                    raise
                # Gone (expired, or its creation failed): a new Event carrying the whole count.
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": {
                "apiVersion": event.involved.api_version,
                "kind": event.involved.kind,
                "name": event.involved.name,
                "namespace": event.involved.namespace,
                "uid": event.involved.uid,
            },
            "type": event.type,
            "reason": event.reason,
            "message": event.message,
            "count": event.count,
            "firstTimestamp": _stamp(event.first_at or event.at),
            "lastTimestamp": stamp,
            "source": {"component": self._component, "host": self._host},
        }
        await self._api.create(resource_path("v1", "events", namespace=namespace), body)


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
