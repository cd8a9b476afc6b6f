"""The policy's metrics share the controller's registry and exposition."""

from __future__ import annotations

import pytest

from vk_provider.controller.metrics import ControllerMetrics
from vk_provider.policy.metrics import PolicyMetrics
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
