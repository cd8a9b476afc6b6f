"""The seams to the GPU signals another part of the policy provides: GPU health and native PodGroups.

`vk_provider.policy.health` and `vk_provider.policy.dcgm` (GPU health from node state and
dcgm-exporter) and `vk_provider.policy.podgroups` (unschedulable native PodGroups as demand) are
written beside this controller. They are found at run time, by name: a missing module (or one without
the expected function) is "no such signal": every node counts as healthy, and demand comes from pods
alone. The controller is built against the two protocols here, and the tests pass their own.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from types import ModuleType
from typing import Any, Protocol

import aiohttp

from vk_provider.kit.kube import KubeApi, RawObject
from vk_provider.policy.model import Gang, NodeHealth
from vk_provider.policy.spec import PolicySpec

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class GpuReading:
    """One GPU's last scrape, for the policy's status and metrics."""

    gpu: str
    temperature_celsius: float | None
    tensor_active: float | None


@dataclasses.dataclass(frozen=True)
class HealthReport:
    nodes: Mapping[str, NodeHealth] = dataclasses.field(default_factory=dict)
    readings: Mapping[str, Sequence[GpuReading]] = dataclasses.field(default_factory=dict)
    """Per node: the GPUs the exporter reported."""
    errors: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Exporter pod or node -> why it could not be read (unreachable, malformed)."""


class HealthSource(Protocol):
    async def judge(self, now: datetime, nodes: Sequence[RawObject], policy: PolicySpec) -> HealthReport: ...

    async def close(self) -> None: ...


class PodGroupSource(Protocol):
    async def demand(self, policy: PolicySpec) -> list[Gang]: ...


def optional_module(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


class NoHealthSignal:
    """Every node healthy, and long enough: what the policy assumes with no health module."""

    async def judge(self, now: datetime, nodes: Sequence[RawObject], policy: PolicySpec) -> HealthReport:
        return HealthReport()

    async def close(self) -> None:
        return None


class NoPodGroups:
    async def demand(self, policy: PolicySpec) -> list[Gang]:
        return []


class ModuleHealth:
    """Health through `vk_provider.policy.health` (`HealthSettings.from_spec`, `HealthMemory.judge`) and
    `vk_provider.policy.dcgm` (`scrape_exporters`). A module that does not match what is called here is
    logged once and read as "no signal"; a spec.health it refuses is reported as an exporter error."""

    def __init__(self, api: KubeApi, health: ModuleType, dcgm: ModuleType | None) -> None:
        self._api = api
        self._health = health
        self._dcgm = dcgm
        self._memory: Any = None
        self._session: aiohttp.ClientSession | None = None
        self._warned = False

    async def judge(self, now: datetime, nodes: Sequence[RawObject], policy: PolicySpec) -> HealthReport:
        try:
            return await self._judge(now, nodes, policy)
        except (AttributeError, TypeError) as error:
            if not self._warned:
                logger.warning("the GPU health module does not match (%s): no health signal", error)
                self._warned = True
            return HealthReport()

    async def _judge(self, now: datetime, nodes: Sequence[RawObject], policy: PolicySpec) -> HealthReport:
        try:
            settings = self._health.HealthSettings.from_spec(policy.raw_health, resource=policy.resource)
        except ValueError as error:
            return HealthReport(errors={"spec.health": str(error)})
        if self._memory is None:
            self._memory = self._health.HealthMemory(settings)
        self._memory.settings = settings
        samples: Mapping[str, Any] = {}
        errors: Mapping[str, str] = {}
        if self._dcgm is not None and settings.exporter is not None:
            if self._session is None:
                self._session = aiohttp.ClientSession()
            scrape = await self._dcgm.scrape_exporters(self._api, settings.exporter, self._session)
            samples, errors = scrape.samples, scrape.errors
        judged: dict[str, NodeHealth] = {}
        readings: dict[str, list[GpuReading]] = {}
        for node in nodes:
            name = node["metadata"]["name"]
            node_samples = samples.get(name)
            # A new leader trusts a node it finds under the policy's unhealthy taint only after it
            # has been healthy for healthyForSeconds again.
            tainted = any(
                t.get("key") == settings.taint_key for t in (node.get("spec") or {}).get("taints") or ()
            )
            state = self._memory.judge(now, node, node_samples, previously_unhealthy=tainted)
            judged[name] = NodeHealth(
                healthy=bool(state.healthy),
                counts=bool(state.counts),
                reason=state.reason,
                detail=str(state.detail or ""),
                since=state.since,
            )
            readings[name] = [
                GpuReading(str(s.gpu), s.temperature_celsius, s.tensor_active) for s in node_samples or ()
            ]
        self._memory.retain(judged)
        return HealthReport(judged, readings, dict(errors))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


class ModulePodGroups:
    """Demand through `vk_provider.policy.podgroups.unschedulable_pod_groups(api, resource)`: each
    PodGroup the scheduler could not place is a gang whose unplaced GPUs are its demand."""

    def __init__(self, api: KubeApi, module: ModuleType) -> None:
        self._api = api
        self._module = module
        self._warned: set[str] = set()

    async def demand(self, policy: PolicySpec) -> list[Gang]:
        if not policy.demand.pod_groups:
            return []
        try:
            demands = await self._module.unschedulable_pod_groups(self._api, policy.resource)
        except (AttributeError, TypeError) as error:
            self._warn_once(f"the PodGroup module does not match ({error}): no PodGroup demand")
            return []
        if getattr(demands, "unavailable", None):
            self._warn_once(f"no PodGroup demand: {demands.unavailable}")
        return [Gang("PodGroup", d.namespace, d.name, int(d.gpus), int(d.gpus)) for d in demands]

    def _warn_once(self, message: str) -> None:
        if message not in self._warned:
            logger.warning("%s", message)
            self._warned.add(message)


def health_source(api: KubeApi) -> HealthSource:
    health = optional_module("vk_provider.policy.health")
    if health is None:
        logger.info("no GPU health module: every home node counts as healthy")
        return NoHealthSignal()
    return ModuleHealth(api, health, optional_module("vk_provider.policy.dcgm"))


def podgroup_source(api: KubeApi) -> PodGroupSource:
    module = optional_module("vk_provider.policy.podgroups")
    return NoPodGroups() if module is None else ModulePodGroups(api, module)
