"""The policy's Prometheus metrics, in the controller's registry (served on its `--admin-listen`).

Names follow the design (research 6.6): `vk_provider_policy_*` for what the policy sees and does,
`vk_provider_gpu_*` for the GPUs of the home pool as the exporter reported them at the last scrape.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from vk_provider.policy.admission.names import READY, REJECTED, RETRY
from vk_provider.policy.signals import GpuReading

STATES = ("free", "reserved", "busy", "unhealthy")
VERDICTS = (READY, RETRY, REJECTED)
"""What our AdmissionCheck may write on a Workload (Pending is Kueue's, never ours to write)."""


class PolicyMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self._demand = Gauge(
            "training_demand_gpus",
            "GPUs the training gangs of the policy request, placed or not.",
            ["policy"],
            namespace="vk_provider_policy",
            registry=registry,
        )
        self._home = Gauge(
            "home_gpus",
            "GPUs of the policy's home pool, by state (free, reserved, busy, unhealthy).",
            ["policy", "state"],
            namespace="vk_provider_policy",
            registry=registry,
        )
        self._flips = Counter(
            "flips",
            "Placements the policy set, by direction (away, home) and trigger (auto: demand; abort: "
            "demand returned while coming home).",
            ["policy", "namespace", "offload", "direction", "trigger"],
            namespace="vk_provider_policy",
            registry=registry,
        )
        self._skipped = Counter(
            "skipped",
            "Decisions the policy could not carry out, by reason (ManualHold, AutoOff, Dwell, RateLimited, "
            "NoCandidate, UnhealthyCapacity, ...).",
            ["policy", "reason"],
            namespace="vk_provider_policy",
            registry=registry,
        )
        self._time_to_free = Histogram(
            "time_to_free_gpus_seconds",
            "Seconds from a gang's shortfall first seen to its shortfall gone (GPUs free for it).",
            ["policy"],
            buckets=(5, 10, 30, 60, 120, 300, 600, 1200, 3600),
            namespace="vk_provider_policy",
            registry=registry,
        )
        self._training_wait = Histogram(
            "training_wait_seconds",
            "Seconds a training gang waited for home GPUs: from the gang first seen to its shortfall gone.",
            ["policy"],
            buckets=(5, 10, 20, 30, 60, 120, 300, 600, 1200, 3600),
            namespace="vk_provider_policy",
            registry=registry,
        )
        self._waiting = Gauge(
            "training_waiting_gangs",
            "Training gangs waiting for GPUs now, by what they wait for (WarmingAway, ShiftingTraffic, "
            "PodsLeaving, Scheduling, Confirming, NoCandidate).",
            ["policy", "stage"],
            namespace="vk_provider_policy",
            registry=registry,
        )
        self._ready = Gauge(
            "ready",
            "1 while the OffloadPolicy's Ready condition is True, 0 while it cannot work as written "
            "(the condition's reason says why).",
            ["policy"],
            namespace="vk_provider_policy",
            registry=registry,
        )
        self._with_ready: set[str] = set()
        self._verdicts = Counter(
            "admission_verdicts",
            "Verdicts our Kueue AdmissionChecks wrote on Workloads, by check and state (Ready, Retry, "
            "Rejected). Each starts at 0 once a policy serves the check.",
            ["policy", "check", "state"],
            namespace="vk_provider_policy",
            registry=registry,
        )
        self._healthy = Gauge(
            "node_healthy",
            "1 when the home node counts as healthy, 0 when not (reason: why).",
            ["node", "reason"],
            namespace="vk_provider_gpu",
            registry=registry,
        )
        self._temperature = Gauge(
            "temperature_celsius",
            "GPU temperature at the last scrape of the node's dcgm-exporter.",
            ["node", "gpu"],
            namespace="vk_provider_gpu",
            registry=registry,
        )
        self._tensor = Gauge(
            "tensor_active_ratio",
            "Share of cycles the GPU's tensor pipes were active (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE) "
            "at the last scrape: whether reclaimed GPUs really train.",
            ["node", "gpu"],
            namespace="vk_provider_gpu",
            registry=registry,
        )

    def pool(self, policy: str, demand_gpus: int, states: Mapping[str, int]) -> None:
        self._demand.labels(policy).set(demand_gpus)
        for state in STATES:
            self._home.labels(policy, state).set(states.get(state, 0))

    def ready(self, policy: str, ready: bool) -> None:
        self._ready.labels(policy).set(1 if ready else 0)
        self._with_ready.add(policy)

    def policies_listed(self, names: Iterable[str]) -> None:
        """Drop the Ready gauge of every policy not among `names` (deleted)."""
        for policy in self._with_ready - set(names):
            with contextlib.suppress(KeyError):
                self._ready.remove(policy)
            self._with_ready.discard(policy)

    def forget_policies(self) -> None:
        """Drop every Ready gauge when this replica stops leading: a standby's would go stale."""
        self._ready.clear()
        self._with_ready.clear()

    def check_served(self, policy: str, check: str) -> None:
        """Start the check's verdict counters at 0, so that `increase()` sees its first Retry."""
        for state in VERDICTS:
            self._verdicts.labels(policy, check, state)

    def verdict(self, policy: str, check: str, state: str) -> None:
        self._verdicts.labels(policy, check, state).inc()

    def flipped(self, policy: str, key: str, direction: str, trigger: str) -> None:
        namespace, _, name = key.partition("/")
        self._flips.labels(policy, namespace, name, direction, trigger).inc()

    def skipped(self, policy: str, reason: str) -> None:
        self._skipped.labels(policy, reason).inc()

    def freed(self, policy: str, seconds: float) -> None:
        self._time_to_free.labels(policy).observe(seconds)

    def waited(self, policy: str, seconds: float) -> None:
        self._training_wait.labels(policy).observe(seconds)

    def waiting(self, policy: str, stages: Mapping[str, int]) -> None:
        for stage, count in stages.items():
            self._waiting.labels(policy, stage).set(count)

    def node(self, name: str, healthy: bool, reason: str | None, readings: Sequence[GpuReading]) -> None:
        self._healthy.labels(name, reason or "").set(1 if healthy else 0)
        for reading in readings:
            if reading.temperature_celsius is not None:
                self._temperature.labels(name, reading.gpu).set(reading.temperature_celsius)
            if reading.tensor_active is not None:
                self._tensor.labels(name, reading.gpu).set(reading.tensor_active)
