"""The Node's shape: labels, our taints next to others', capacity, conditions and heartbeats."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from vk_provider.node import nodeobject
from vk_provider.node.nodeobject import Health
from vk_provider.node.settings import NodeSettings, Taint

NOW = datetime(2026, 12, 2, 10, 0, 0, tzinfo=UTC)


def test_the_default_taint_names_the_provider_and_never_evicts() -> None:
    settings = NodeSettings(provider="runpod")
    taints = nodeobject.merged_taints([], settings, Health(ready=True))
    assert taints == [{"key": "vk-provider.dev/virtual-node", "value": "runpod", "effect": "NoSchedule"}]
    assert nodeobject.merged_taints([], NodeSettings(no_taint=True), Health(ready=True)) == []


def test_our_node_keeps_the_generic_label_and_carries_the_one_only_ours_carry() -> None:
    labels = nodeobject.labels(NodeSettings(node_name="burst", labels={"pool": "gpu"}))
    assert labels["type"] == "virtual-kubelet"
    assert labels["node-restriction.kubernetes.io/vk-provider"] == "true"
    assert labels["pool"] == "gpu"


def test_the_generic_taint_an_earlier_version_set_is_replaced_by_ours() -> None:
    current = [
        {"key": "virtual-kubelet.io/provider", "value": "runpod", "effect": "NoSchedule"},
        {"key": "team.example.com/gpu", "value": "a", "effect": "NoSchedule"},
    ]
    taints = nodeobject.merged_taints(current, NodeSettings(provider="runpod"), Health(ready=True))
    assert taints == [
        {"key": "team.example.com/gpu", "value": "a", "effect": "NoSchedule"},
        {"key": "vk-provider.dev/virtual-node", "value": "runpod", "effect": "NoSchedule"},
    ]


def test_taints_others_own_are_kept_and_ours_are_replaced() -> None:
    settings = NodeSettings(taint=Taint("gpu.example.com/burst", "yes", "NoSchedule"))
    current = [
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
        {"key": "gpu.example.com/burst", "value": "old", "effect": "NoSchedule"},
    ]
    taints = nodeobject.merged_taints(current, settings, Health(ready=True, provider_available=False))
    assert taints == [
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
        {"key": "gpu.example.com/burst", "value": "yes", "effect": "NoSchedule"},
        {"key": "virtual-kubelet.io/provider-unavailable", "value": "mock", "effect": "NoSchedule"},
    ]


def test_provider_capacity_is_merged_over_the_configured_capacity() -> None:
    settings = NodeSettings(capacity={"cpu": "8", "nvidia.com/gpu": "0"})
    assert nodeobject.capacity(settings, {"nvidia.com/gpu": "4"}) == {"cpu": "8", "nvidia.com/gpu": "4"}


def test_conditions_say_ready_and_provider_health_and_keep_transition_times() -> None:
    first = nodeobject.conditions(Health(ready=True), NOW)
    by_type = {c["type"]: c for c in first}
    assert by_type["Ready"]["status"] == "True"
    assert by_type["NetworkUnavailable"]["status"] == "False"
    assert by_type["ProviderAvailable"]["status"] == "True"
    later = NOW + timedelta(seconds=30)
    second = nodeobject.conditions(
        Health(ready=True, provider_available=False, provider_message="503"), later, first
    )
    by_type = {c["type"]: c for c in second}
    assert by_type["Ready"]["lastTransitionTime"] == "2026-12-02T10:00:00Z"
    assert by_type["Ready"]["lastHeartbeatTime"] == "2026-12-02T10:00:30Z"
    assert by_type["ProviderAvailable"]["status"] == "False"
    assert by_type["ProviderAvailable"]["message"] == "503"
    assert by_type["ProviderAvailable"]["lastTransitionTime"] == "2026-12-02T10:00:30Z"


def test_status_publishes_addresses_kubelet_port_and_version() -> None:
    settings = NodeSettings(node_name="gpu-burst", addresses=("10.1.2.3",), kubelet_port=10260)
    status = nodeobject.status(settings, Health(ready=True), NOW, provider_capacity={})
    assert status["addresses"] == [
        {"type": "InternalIP", "address": "10.1.2.3"},
        {"type": "Hostname", "address": "gpu-burst"},
    ]
    assert status["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 10260}}
    assert status["nodeInfo"]["kubeletVersion"].startswith("v0.")
    assert status["capacity"] == status["allocatable"]
