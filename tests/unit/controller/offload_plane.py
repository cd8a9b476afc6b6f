"""An in-memory apiserver and data plane for driving the migration controller's `Reconciler` pass by
pass in unit tests (the integration tests run it against a real plane).

`MemoryApi` keeps objects by path and applies merge patches as the apiserver does; it lists a
collection by label selector. It runs no controllers: `settle` plays the Deployment controller and
the kubelet (each Deployment runs its replicas as pods, ready or not), so a test says when replicas
come up. `StaticRoutes` is a data plane whose every router applies what it is told at once and sees
each side's ready replicas as usable endpoints.
"""

from __future__ import annotations

import copy
import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from vk_provider._kube.events import EventRecorder, EventType, InvolvedObject
from vk_provider.controller.dataplanes import DataPlanes
from vk_provider.controller.gates import SideSample
from vk_provider.controller.reconciler import Reconciler
from vk_provider.controller.routers import RouteView
from vk_provider.kit.kube import KubeApi, KubeApiError, RawObject
from vk_provider.offload.names import offload_path
from vk_provider.offload.spec import OffloadSpec
from vk_provider.offloadcli.dryrun import merge_patch

NAMESPACE = "team"
NAME = "chat"
DEPLOYMENTS = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments"
PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"
HOME = f"{DEPLOYMENTS}/{NAME}"
AWAY = f"{DEPLOYMENTS}/{NAME}-away"
OFFLOAD = offload_path(NAMESPACE, NAME)
START = datetime(2026, 12, 7, 2, 0, 0, tzinfo=UTC)


class MemoryApi:
    """Objects by path; every write is recorded as (verb, path, body)."""

    def __init__(self) -> None:
        self.objects: dict[str, RawObject] = {}
        self.writes: list[tuple[str, str, Any]] = []
        self.reads: list[str] = []

    async def get(self, path: str, *, query: dict[str, str] | None = None) -> RawObject:
        self.reads.append(path)
        if path in self.objects:
            return copy.deepcopy(self.objects[path])
        items = [
            copy.deepcopy(item)
            for key, item in sorted(self.objects.items())
            if key.rpartition("/")[0] == path and _selected(item, (query or {}).get("labelSelector", ""))
        ]
        if items or path.endswith(("/pods", "/keptroutes", "/offloads", "/deployments")):
            return {"items": items}
        raise KubeApiError(404, "NotFound", path)

    async def create(self, collection: str, body: RawObject) -> RawObject:
        self.writes.append(("create", collection, body))
        stored = copy.deepcopy(body)
        stored.setdefault("metadata", {}).setdefault("generation", 1)
        self.objects[f"{collection}/{stored['metadata']['name']}"] = stored
        return copy.deepcopy(stored)

    async def patch(self, path: str, body: Any, *, content_type: str = "") -> RawObject:
        self.writes.append(("patch", path, body))
        target, subresource = (
            (path.removesuffix("/status"), "status") if path.endswith("/status") else (path, "")
        )
        if target not in self.objects:
            raise KubeApiError(404, "NotFound", path)
        current = self.objects[target]
        if subresource:
            current["status"] = merge_patch(current.get("status") or {}, body["status"])
        else:
            body = {key: value for key, value in body.items() if key != "status"}
            updated = merge_patch(current, body)
            if updated.get("spec") != current.get("spec"):
                updated["metadata"]["generation"] = int(current["metadata"].get("generation") or 1) + 1
            self.objects[target] = updated
        return copy.deepcopy(self.objects[target])

    async def delete(self, path: str, body: Any = None) -> RawObject:
        self.writes.append(("delete", path, body))
        if self.objects.pop(path, None) is None:
            raise KubeApiError(404, "NotFound", path)
        return {}

    def scales_of(self, path: str) -> list[int]:
        """The replicas each write to the Deployment at `path` asked for (its creation too), in order."""
        scales = []
        for verb, where, body in self.writes:
            target = f"{where}/{(body.get('metadata') or {}).get('name')}" if verb == "create" else where
            replicas = (body.get("spec") or {}).get("replicas")
            if target == path and replicas is not None:
                scales.append(replicas)
        return scales

    def settle(self, *, ready: bool = True) -> None:
        """Every Deployment runs its replicas as pods (ready, or not yet); pods beyond them are gone."""
        for path, deployment in list(self.objects.items()):
            if path.rpartition("/")[0] != DEPLOYMENTS:
                continue
            name = deployment["metadata"]["name"]
            replicas = int(deployment["spec"].get("replicas", 1))
            labels = deployment["spec"]["template"]["metadata"]["labels"]
            for pod in [key for key in self.objects if key.startswith(f"{PODS}/{name}-")]:
                if int(pod.rpartition("-")[2]) >= replicas:
                    del self.objects[pod]
            for index in range(replicas):
                self.objects[f"{PODS}/{name}-{index}"] = {
                    "metadata": {"name": f"{name}-{index}", "namespace": NAMESPACE, "labels": labels},
                    "spec": {},
                    "status": {},
                }
            deployment["status"] = {
                "observedGeneration": deployment["metadata"].get("generation", 1),
                "replicas": replicas,
                "updatedReplicas": replicas,
                "readyReplicas": replicas if ready else 0,
            }

    def offload(self) -> RawObject:
        return copy.deepcopy(self.objects[OFFLOAD])

    def status(self) -> dict[str, Any]:
        return dict(self.objects[OFFLOAD].get("status") or {})

    def condition(self, kind: str) -> dict[str, Any]:
        found = [c for c in self.status().get("conditions") or () if c["type"] == kind]
        assert found, f"no {kind} condition in {self.status()}"
        return dict(found[0])

    def annotate(self, **annotations: str | None) -> None:
        metadata = self.objects[OFFLOAD]["metadata"]
        metadata["annotations"] = merge_patch(metadata.get("annotations") or {}, annotations)

    def change_spec(self, **fields: Any) -> None:
        offload = self.objects[OFFLOAD]
        offload["spec"] = merge_patch(offload["spec"], fields)
        offload["metadata"]["generation"] += 1


def _selected(item: RawObject, selector: str) -> bool:
    labels = (item.get("metadata") or {}).get("labels") or {}
    wanted = dict(part.split("=", 1) for part in selector.split(",") if part)
    return all(labels.get(key) == value for key, value in wanted.items())


class StaticRoutes:
    """A data plane of one router that applies every weight at once and counts each side's ready
    replicas as usable endpoints."""

    name = "builtin"

    def __init__(self, api: MemoryApi) -> None:
        self._api = api
        self.applied: list[int] = []

    async def check(self, spec: OffloadSpec) -> None:
        return None

    async def apply(self, spec: OffloadSpec, weight: int) -> None:
        self.applied.append(weight)

    async def views(self, spec: OffloadSpec) -> list[RouteView]:
        usable = {
            side: int(((self._api.objects.get(path) or {}).get("status") or {}).get("readyReplicas") or 0)
            for side, path in (("home", HOME), ("away", AWAY))
        }
        weight = self.applied[-1] if self.applied else 0
        return [RouteView("router r", weight, usable)]

    async def samples(self, spec: OffloadSpec, side: str) -> dict[str, SideSample]:
        return {}

    def measures(self, side: str) -> bool:
        return False

    async def close(self) -> None:
        return None


@dataclasses.dataclass(frozen=True)
class Posted:
    type: str
    reason: str
    message: str


class RecordedEvents:
    """Stands in for the EventRecorder: what was posted, in order."""

    def __init__(self) -> None:
        self.posted: list[Posted] = []

    def record(self, involved: InvolvedObject, type: EventType, reason: str, message: str) -> None:
        self.posted.append(Posted(type, reason, message))

    def reasons(self) -> list[str]:
        return [event.reason for event in self.posted]


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def elapsed(self) -> float:
        """Seconds since START: the reconciler's monotonic clock, moved by the same hand."""
        return (self.now - START).total_seconds()

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclasses.dataclass
class Controller:
    """A Reconciler on `api`, with its clock, Events and data plane in reach of the test."""

    api: MemoryApi
    clock: Clock
    events: RecordedEvents
    routes: StaticRoutes
    reconciler: Reconciler

    async def reconcile(self) -> float | None:
        return await self.reconciler.reconcile(NAMESPACE, NAME)


def controller(api: MemoryApi) -> Controller:
    clock, events, routes = Clock(), RecordedEvents(), StaticRoutes(api)
    reconciler = Reconciler(
        cast(KubeApi, api),
        DataPlanes(routes),
        cast(EventRecorder, events),
        wall_clock=clock,
        monotonic=clock.elapsed,
    )
    return Controller(api, clock, events, routes, reconciler)


def serving_home(*, home_replicas: int = 2, away: dict[str, Any] | None = None) -> MemoryApi:
    """An apiserver with the home Deployment (its replicas ready), its Service, and an Offload placed
    home with `spec.away` from `away` and a 10 s, one-step strategy each way."""
    api = MemoryApi()
    api.objects[HOME] = {
        "metadata": {"name": NAME, "namespace": NAMESPACE, "generation": 1},
        "spec": {
            "replicas": home_replicas,
            "selector": {"matchLabels": {"app": NAME}},
            "template": {
                "metadata": {"labels": {"app": NAME}},
                "spec": {"containers": [{"name": "server", "image": "tokens"}]},
            },
        },
    }
    api.objects[f"/api/v1/namespaces/{NAMESPACE}/services/{NAME}"] = {
        "metadata": {"name": NAME, "namespace": NAMESPACE, "uid": "svc"},
        "spec": {"selector": {"app": NAME}},
    }
    api.objects[OFFLOAD] = {
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "uid": "offload-uid",
            "generation": 1,
            "creationTimestamp": "2026-12-01T00:00:00Z",
            "finalizers": ["offload.vk-provider.dev/migrate-home"],
        },
        "spec": {
            "home": {"deployment": NAME, "service": NAME},
            "placement": "home",
            "route": {"hosts": ["chat.test"]},
            "away": away or {},
            "strategy": {"toAwaySteps": [100], "toHomeSteps": [100], "stepIntervalSeconds": 10},
        },
    }
    api.settle()
    return api
