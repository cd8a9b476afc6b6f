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


class NoPodGroups:
    async def demand(self, policy: PolicySpec) -> list[Gang]:
        return []


class ModuleHealth:
    """Health through `vk_provider.policy.health` (and `dcgm` for the exporter), per their contract:
    `judge_node(now, node, samples, xid_seen, settings)` and a `HealthMemory` that says since when
    and whether a node counts. Any deviation from it is logged once and read as "no signal"."""

    def __init__(self, api: KubeApi, health: ModuleType, dcgm: ModuleType | None) -> None:
        self._api = api
        self._health = health
        self._dcgm = dcgm
        self._memory: Any = health.HealthMemory()
        self._session: aiohttp.ClientSession | None = None
        self._warned = False

    async def judge(self, now: datetime, nodes: Sequence[RawObject], policy: PolicySpec) -> HealthReport:
        try:
            return await self._judge(now, nodes, policy)
        except (AttributeError, TypeError) as error:
            if not self._warned:
                logger.warning(
                    "the GPU health module does not match the contract (%s): no health signal", error
                )
                self._warned = True
            return HealthReport()

    async def _judge(self, now: datetime, nodes: Sequence[RawObject], policy: PolicySpec) -> HealthReport:
        settings = self._health.HealthSettings.from_policy(policy)
        samples: Mapping[str, Any] = {}
        errors: Mapping[str, str] = {}
        if self._dcgm is not None and policy.health.exporter is not None:
            if self._session is None:
                self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5))
            scrape = await self._dcgm.scrape_exporters(self._api, settings.exporter, self._session)
            samples, errors = scrape.samples, scrape.errors
        judged: dict[str, NodeHealth] = {}
        readings: dict[str, list[GpuReading]] = {}
        for node in nodes:
            name = node["metadata"]["name"]
            node_samples = samples.get(name)
            xid_seen = self._memory.xids(name) if hasattr(self._memory, "xids") else {}
            verdict = self._health.judge_node(now, node, node_samples, xid_seen, settings)
            state = self._memory.observe(now, name, verdict)
            judged[name] = NodeHealth(
                healthy=bool(verdict.healthy),
                counts=bool(state.counts),
                reason=verdict.reason,
                detail=str(verdict.detail or ""),
                since=state.since,
            )
            readings[name] = [
                GpuReading(str(s.gpu), s.temperature_celsius, s.tensor_active) for s in node_samples or ()
            ]
        return HealthReport(judged, readings, dict(errors))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


class ModulePodGroups:
    """Demand through `vk_provider.policy.podgroups.unschedulable_gangs(api, policy) -> list[Gang]`."""

    def __init__(self, api: KubeApi, module: ModuleType) -> None:
        self._api = api
        self._module = module
        self._warned = False

    async def demand(self, policy: PolicySpec) -> list[Gang]:
        if not policy.demand.pod_groups:
            return []
        try:
            gangs: list[Gang] = list(await self._module.unschedulable_gangs(self._api, policy))
        except (AttributeError, TypeError) as error:
            if not self._warned:
                logger.warning(
                    "the PodGroup module does not match the contract (%s): no PodGroup demand", error
                )
                self._warned = True
            return []
        return gangs


def health_source(api: KubeApi) -> HealthSource:
    health = optional_module("vk_provider.policy.health")
    if health is None:
        logger.info("no GPU health module: every home node counts as healthy")
        return NoHealthSignal()
    return ModuleHealth(api, health, optional_module("vk_provider.policy.dcgm"))


def podgroup_source(api: KubeApi) -> PodGroupSource:
    module = optional_module("vk_provider.policy.podgroups")
    return NoPodGroups() if module is None else ModulePodGroups(api, module)
