"""The away Deployment derived from the home one."""

from __future__ import annotations

import copy
from typing import Any

from vk_provider.controller.deriving import away_deployment, away_pod_template
from vk_provider.offload.names import OFFLOAD_LABEL, SERVES_LABEL, TEMPLATE_HASH_ANNOTATION
from vk_provider.offload.spec import parse_offload

OFFLOAD: dict[str, Any] = {
    "metadata": {"namespace": "ml", "name": "chat", "uid": "u-1", "generation": 3},
    "spec": {
        "home": {"deployment": "chat", "service": "chat"},
        "placement": "away",
        "route": {"hosts": ["chat.example"]},
        "away": {"annotations": {"vk-provider.dev/gpu-types": "A100,H100"}},
    },
}
HOME: dict[str, Any] = {
    "spec": {
        "replicas": 3,
        "selector": {"matchLabels": {"app": "chat"}},
        "strategy": {"type": "RollingUpdate"},
        "template": {
            "metadata": {"labels": {"app": "chat", "tier": "inference", "pod-template-hash": "x"}},
            "spec": {
                "nodeSelector": {"vk-provider.dev/role": "home-gpu"},
                "affinity": {"nodeAffinity": {"x": 1}, "podAntiAffinity": {"y": 2}},
                "tolerations": [{"key": "gpu", "operator": "Exists"}],
                "containers": [{"name": "server", "image": "vllm"}],
            },
        },
    }
}
SERVICE: dict[str, Any] = {"spec": {"selector": {"app": "chat", "tier": "inference"}}}


def test_away_pods_leave_the_home_service_and_land_on_the_virtual_node() -> None:
    template = away_pod_template(parse_offload(OFFLOAD), HOME, SERVICE)
    # No label the home Service selects on: the away pods never count as home endpoints.
    assert template["metadata"]["labels"] == {OFFLOAD_LABEL: "chat"}
    assert template["metadata"]["annotations"] == {"vk-provider.dev/gpu-types": "A100,H100"}
    spec = template["spec"]
    assert spec["nodeSelector"] == {"node-restriction.kubernetes.io/vk-provider": "true"}
    assert spec["affinity"] == {"podAntiAffinity": {"y": 2}}
    assert {"key": "vk-provider.dev/virtual-node", "operator": "Exists", "effect": "NoSchedule"} in spec[
        "tolerations"
    ]
    assert {"key": "gpu", "operator": "Exists"} in spec["tolerations"]
    assert spec["containers"] == [{"name": "server", "image": "vllm"}]
    home_selector = HOME["spec"]["template"]["spec"]["nodeSelector"]
    assert home_selector == {"vk-provider.dev/role": "home-gpu"}  # the home template is untouched


def test_the_away_deployment_has_no_owner_and_hashes_its_template() -> None:
    offload = parse_offload(OFFLOAD)
    deployment = away_deployment(offload, HOME, SERVICE, 3)
    assert deployment["metadata"]["name"] == "chat-away"
    # No ownerReference: deleting the Offload (or its CRD) must never garbage-collect a serving side.
    assert "ownerReferences" not in deployment["metadata"]
    assert deployment["spec"]["selector"] == {"matchLabels": {OFFLOAD_LABEL: "chat"}}
    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["strategy"] == {"type": "RollingUpdate"}
    same = away_deployment(offload, HOME, SERVICE, 5)
    assert same["metadata"]["annotations"] == deployment["metadata"]["annotations"]  # replicas: same template
    changed_home = {
        "spec": {**HOME["spec"], "template": {**HOME["spec"]["template"], "metadata": {"labels": {"v": "2"}}}}
    }
    changed = away_deployment(offload, changed_home, SERVICE, 3)
    assert (
        changed["metadata"]["annotations"][TEMPLATE_HASH_ANNOTATION]
        != deployment["metadata"]["annotations"][TEMPLATE_HASH_ANNOTATION]
    )


def test_away_pods_tolerate_their_node_going_unknown_forever() -> None:
    """The router serves them on its own checks while the node daemon is down: no eviction."""
    home = copy.deepcopy(HOME)
    bounded = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}
    home["spec"]["template"]["spec"]["tolerations"].append({**bounded, "tolerationSeconds": 30})
    tolerations = away_pod_template(parse_offload(OFFLOAD), home, SERVICE)["spec"]["tolerations"]
    outage = [t for t in tolerations if t.get("key", "").startswith("node.kubernetes.io/")]
    assert outage == [bounded, {**bounded, "key": "node.kubernetes.io/not-ready"}]


def test_a_spill_over_offload_s_away_pods_carry_the_label_its_autoscaler_counts_by() -> None:
    spilling = copy.deepcopy(OFFLOAD)
    spilling["spec"]["spillOver"] = {"maxHomeReplicas": 2}
    labels = away_pod_template(parse_offload(spilling), HOME, SERVICE)["metadata"]["labels"]
    assert labels == {OFFLOAD_LABEL: "chat", SERVES_LABEL: "chat"}
