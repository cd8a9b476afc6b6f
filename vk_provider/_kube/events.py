"""Record Kubernetes Events about pods and the node, without ever blocking the caller.

Events are queued and posted by a background task; a full queue drops the oldest news rather than
slowing reconciliation, and a failed post is logged, never raised: an Event is a courtesy to the
operator, the pod status is the record.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from datetime import UTC, datetime
from typing import Literal

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


class EventRecorder:
    def __init__(self, api: KubeApi, *, host: str, component: str = COMPONENT) -> None:
        self._api = api
        self._host = host
        self._component = component
        self._queue: asyncio.Queue[PendingEvent] = asyncio.Queue(QUEUE_SIZE)
        self.posted = 0

    def record(self, involved: InvolvedObject, type: EventType, reason: str, message: str) -> None:
        log = logger.warning if type == "Warning" else logger.info
        log("%s %s/%s: %s: %s", involved.kind, involved.namespace, involved.name, reason, message)
        event = PendingEvent(involved, type, reason, message, datetime.now(UTC))
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
        stamp = event.at.strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{event.involved.name}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
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
            "count": 1,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "source": {"component": self._component, "host": self._host},
        }
        await self._api.create(resource_path("v1", "events", namespace=namespace), body)
