"""The GPU signals the policy observes besides pods: node health, and native PodGroups as demand.

The controller is built against the two protocols here (the unit tests pass their own):
`GpuHealth` judges the pool's nodes from their own state and dcgm-exporter's scrape (`health`,
`dcgm`); `NativePodGroups` reads unschedulable gangs (`podgroups`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol

import aiohttp

from vk_provider.kit.kube import KubeApi, KubeApiError, RawObject
from vk_provider.kit.kubeversions import NATIVE_POD_GROUPS, InvalidKubernetesVersionError, cluster_version
from vk_provider.policy.dcgm import ExporterScrape, scrape_exporters
from vk_provider.policy.health import HealthMemory
from vk_provider.policy.model import Gang, NodeHealth
from vk_provider.policy.podgroups import NOT_SERVED, unschedulable_pod_groups
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

    def unavailable(self) -> str | None:
        """Why the last `demand` could not read PodGroups (the policy's status says it); None if it could."""
        ...


class NoHealthSignal:
    """Every node healthy, and long enough: for tests that judge nothing but the decision."""

    async def judge(self, now: datetime, nodes: Sequence[RawObject], policy: PolicySpec) -> HealthReport:
        return HealthReport()

    async def close(self) -> None:
        return None


class NoPodGroups:
    async def demand(self, policy: PolicySpec) -> list[Gang]:
        return []

    def unavailable(self) -> str | None:
        return None


class GpuHealth:
    """Health from the nodes themselves and, when the policy names one, dcgm-exporter: each scrape is
    judged by `health.HealthMemory`, which remembers Xids and how long a node has been healthy."""

    def __init__(self, api: KubeApi) -> None:
        self._api = api
        self._memory: HealthMemory | None = None
        self._session: aiohttp.ClientSession | None = None

    async def judge(self, now: datetime, nodes: Sequence[RawObject], policy: PolicySpec) -> HealthReport:
        settings = policy.health
        if self._memory is None:
            self._memory = HealthMemory(settings)
        self._memory.settings = settings  # the policy's spec may have changed; the memory stays
        scrape = ExporterScrape()
        if settings.exporter is not None:
            if self._session is None:
                self._session = aiohttp.ClientSession()
            scrape = await scrape_exporters(self._api, settings.exporter, self._session)
        judged: dict[str, NodeHealth] = {}
        readings: dict[str, list[GpuReading]] = {}
        for node in nodes:
            name = str(node["metadata"]["name"])
            samples = scrape.samples.get(name)
            # A new leader knows nothing of the past: a node still carrying our unhealthy taint must
            # stay healthy for healthyForSeconds again before it counts.
            tainted = any(
                taint.get("key") == settings.taint_key
                for taint in (node.get("spec") or {}).get("taints") or ()
            )
            state = self._memory.judge(now, node, samples, previously_unhealthy=tainted)
            judged[name] = NodeHealth(
                healthy=state.healthy,
                counts=state.counts,
                reason=state.reason,
                detail=state.detail,
                since=state.since,
            )
            readings[name] = [
                GpuReading(sample.gpu, sample.temperature_celsius, sample.tensor_active)
                for sample in samples or ()
            ]
        self._memory.retain(judged)
        return HealthReport(judged, readings, dict(scrape.errors))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


class NativePodGroups:
    """Demand from native PodGroups the scheduler could not place (`podgroups`); a cluster that does
    not serve them gives none, said once in the log and, for as long as it lasts, by `unavailable`."""

    def __init__(self, api: KubeApi) -> None:
        self._api = api
        self._told: str | None = None
        self._too_old: str | None = None
        """The cluster is older than the PodGroup API: the message, once the version was read."""

    async def demand(self, policy: PolicySpec) -> list[Gang]:
        if not policy.demand.pod_groups:
            self._told = None
            return []
        demands = await unschedulable_pod_groups(self._api, policy.resource)
        unavailable = demands.unavailable
        if unavailable == NOT_SERVED:
            unavailable = await self._not_served()
        if unavailable and unavailable != self._told:
            logger.info("no PodGroup demand: %s", unavailable)
        self._told = unavailable
        # A gang places all its members or none, so what it requests is what it still needs.
        return [
            Gang(
                "PodGroup",
                demand.namespace,
                demand.name,
                gpus=demand.gpus,
                unplaced_gpus=demand.gpus,
                foreseen_gpus=demand.missing_gpus,
            )
            for demand in demands
            if demand.gpus > 0
        ]

    def unavailable(self) -> str | None:
        return self._told

    async def _not_served(self) -> str:
        """Why PodGroups are not served: the cluster is too old for them (its version read once, as it
        does not change under a running controller's feet often enough to matter), or the API is off."""
        if self._too_old is None:
            try:
                version = await cluster_version(self._api)
            except (KubeApiError, InvalidKubernetesVersionError):
                return NOT_SERVED  # read again next pass
            self._too_old = NATIVE_POD_GROUPS.unavailable(version) or ""
        return self._too_old or NOT_SERVED


def health_source(api: KubeApi) -> HealthSource:
    return GpuHealth(api)


def podgroup_source(api: KubeApi) -> PodGroupSource:
    return NativePodGroups(api)
