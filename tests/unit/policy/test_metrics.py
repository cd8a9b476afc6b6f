"""The policy's metrics share the controller's registry and exposition; per-policy series go with
the policy."""

from __future__ import annotations

from typing import Any

import pytest

from vk_provider._kube.events import EventRecorder
from vk_provider.controller.metrics import ControllerMetrics
from vk_provider.kit.kube import KubeApiError
from vk_provider.policy.controller import PolicyController
from vk_provider.policy.metrics import PolicyMetrics
from vk_provider.policy.names import policies_path
from vk_provider.policy.signals import GpuReading

pytestmark = pytest.mark.unit


def test_the_policy_s_series_appear_on_the_controller_s_metrics() -> None:
    controller = ControllerMetrics()
    metrics = PolicyMetrics(controller.registry)
    metrics.pool("p", 6, {"free": 0, "reserved": 8, "busy": 6, "unhealthy": 0})
    metrics.flipped("p", "ns/chat", "away", "auto")
    metrics.skipped("p", "ManualHold")
    metrics.freed("p", 12.5)
    metrics.node("gpu-0", False, "Temperature", [GpuReading("0", 85.0, 0.4), GpuReading("1", None, None)])
    text = controller.exposition().decode()
    for line in (
        'vk_provider_policy_training_demand_gpus{policy="p"} 6.0',
        'vk_provider_policy_home_gpus{policy="p",state="reserved"} 8.0',
        'vk_provider_policy_flips_total{direction="away",namespace="ns",offload="chat",policy="p",'
        'trigger="auto"} 1.0',
        'vk_provider_policy_skipped_total{policy="p",reason="ManualHold"} 1.0',
        'vk_provider_policy_time_to_free_gpus_seconds_count{policy="p"} 1.0',
        'vk_provider_gpu_node_healthy{node="gpu-0",reason="Temperature"} 0.0',
        'vk_provider_gpu_temperature_celsius{gpu="0",node="gpu-0"} 85.0',
        'vk_provider_gpu_tensor_active_ratio{gpu="0",node="gpu-0"} 0.4',
    ):
        assert line in text, line


def test_a_policy_s_ready_gauge_goes_with_the_policy_and_with_the_leadership() -> None:
    controller = ControllerMetrics()
    metrics = PolicyMetrics(controller.registry)
    metrics.ready("training-first", False)
    metrics.ready("other", True)
    registry = controller.registry
    assert registry.get_sample_value("vk_provider_policy_ready", {"policy": "training-first"}) == 0
    metrics.policies_listed(["training-first"])  # "other" was deleted
    assert registry.get_sample_value("vk_provider_policy_ready", {"policy": "other"}) is None
    assert registry.get_sample_value("vk_provider_policy_ready", {"policy": "training-first"}) == 0
    metrics.forget_policies()
    assert registry.get_sample_value("vk_provider_policy_ready", {"policy": "training-first"}) is None


def test_a_served_check_s_verdicts_start_at_zero_so_the_first_retry_is_an_increase() -> None:
    controller = ControllerMetrics()
    metrics = PolicyMetrics(controller.registry)
    metrics.check_served("p", "gpu-pressure")
    verdicts = "vk_provider_policy_admission_verdicts_total"
    for state in ("Ready", "Retry", "Rejected"):
        labels = {"policy": "p", "check": "gpu-pressure", "state": state}
        assert controller.registry.get_sample_value(verdicts, labels) == 0
    metrics.verdict("p", "gpu-pressure", "Retry")
    labels = {"policy": "p", "check": "gpu-pressure", "state": "Retry"}
    assert controller.registry.get_sample_value(verdicts, labels) == 1


class PolicyApi:
    """An apiserver with OffloadPolicies and no Kueue, recording the status writes."""

    def __init__(self, policies: list[dict[str, Any]]) -> None:
        self.policies = policies
        self.writes: list[tuple[str, Any]] = []

    async def get(self, path: str, **_: Any) -> dict[str, Any]:
        if path == policies_path():
            return {"items": self.policies}
        raise KubeApiError(404, "NotFound", path)

    async def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> dict[str, Any]:
        self.writes.append((path, body))
        return {}


async def test_the_policy_loop_exports_each_policy_s_ready_condition() -> None:
    invalid = {"metadata": {"name": "broken", "uid": "u1", "generation": 1}, "spec": {}}
    api = PolicyApi([invalid])
    controller = ControllerMetrics()
    metrics = PolicyMetrics(controller.registry)
    loop = PolicyController(
        api,  # type: ignore[arg-type]
        EventRecorder(api, host="test"),  # type: ignore[arg-type]
        metrics=metrics,
        health=object(),  # type: ignore[arg-type]
        podgroups=object(),  # type: ignore[arg-type]
    )
    await loop.pass_once()
    [(_, body)] = api.writes
    ready = next(c for c in body["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec")
    assert controller.registry.get_sample_value("vk_provider_policy_ready", {"policy": "broken"}) == 0
    api.policies = []  # deleted
    await loop.pass_once()
    assert controller.registry.get_sample_value("vk_provider_policy_ready", {"policy": "broken"}) is None
