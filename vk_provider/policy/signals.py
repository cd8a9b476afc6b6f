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
from vk_provider.policy.health import HealthMemory, Verdict, judge, node_health
from vk_provider.policy.healthcap import CapOutcome, apply_cap
from vk_provider.policy.interconnect import InterconnectScrape, scrape_interconnect
from vk_provider.policy.model import Gang, NodeHealth
from vk_provider.policy.podgroups import NOT_SERVED, unschedulable_pod_groups
from vk_provider.policy.severity import Finding
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
    cap: CapOutcome | None = None
    """The pool's cap on non-fatal taints this pass (None: not judged, as without a health signal)."""


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
        memory = self._memory
        memory.settings = settings  # the policy's spec may have changed; the memory stays
        scrape, links = await self._scrape(policy)
        judged: dict[str, _Judged] = {}
        for node in nodes:
            name = str(node["metadata"]["name"])
            # A new leader knows nothing of the past: a node still carrying our unhealthy taint must
            # stay healthy for healthyForSeconds again before it counts, and stays tainted while a
            # degrading signal lasts.
            tainted = any(
                taint.get("key") == settings.taint_key
                for taint in (node.get("spec") or {}).get("taints") or ()
            )
            found = memory.findings(now, node, scrape.samples.get(name), links=links.samples.get(name))
            kept = tainted or memory.unhealthy(name)
            verdict, rule = judge(now, found, settings, tainted=kept)
            judged[name] = _Judged(verdict, rule, found, tainted=tainted, kept=kept)
        cap = apply_cap(
            {
                name: (item.rule.since if item.rule is not None else None) or now
                for name, item in judged.items()
                if item.verdict is Verdict.DUE
            },
            # Tainted (or judged unhealthy) for anything but a fatal finding: each holds a slot.
            [name for name, item in judged.items() if item.kept and item.verdict is not Verdict.FATAL],
            share=settings.max_non_fatal_share,
            pool_nodes=len(nodes),
        )
        states: dict[str, NodeHealth] = {}
        readings: dict[str, list[GpuReading]] = {}
        for name, item in judged.items():
            health = node_health(item.verdict, item.rule, item.found, held_back=name in cap.held_back)
            state = memory.observe(now, name, health, previously_unhealthy=item.tainted)
            states[name] = NodeHealth(
                healthy=state.healthy,
                counts=state.counts,
                reason=state.reason,
                detail=state.detail,
                since=state.since,
                findings=state.findings,
                rule=state.rule,
                verdict=state.verdict,
                held_back=state.held_back,
            )
            readings[name] = [
                GpuReading(sample.gpu, sample.temperature_celsius, sample.tensor_active)
                for sample in scrape.samples.get(name) or ()
            ]
        memory.retain(states)
        errors = dict(scrape.errors)
        for where, message in links.errors.items():
            errors[where] = f"{errors[where]}; {message}" if where in errors else message
        return HealthReport(states, readings, errors, cap)

    async def _scrape(self, policy: PolicySpec) -> tuple[ExporterScrape, InterconnectScrape]:
        """dcgm-exporter's GPUs and the interconnect exporter's rates, each when the policy names it."""
        settings = policy.health
        scrape, links = ExporterScrape(), InterconnectScrape()
        if settings.exporter is None and settings.interconnect is None:
            return scrape, links
        if self._session is None:
            self._session = aiohttp.ClientSession()
        if settings.exporter is not None:
            scrape = await scrape_exporters(self._api, settings.exporter, self._session)
        if settings.interconnect is not None:
            links = await scrape_interconnect(self._api, settings.interconnect, self._session)
        return scrape, links

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


@dataclasses.dataclass(frozen=True)
class _Judged:
    """One node's verdict before the cap."""

    verdict: Verdict
    rule: Finding | None
    found: list[Finding]
    tainted: bool
    """It carries the policy's unhealthy taint."""
    kept: bool
    """Tainted, or judged unhealthy on the last pass (the taint may not have landed yet)."""


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
