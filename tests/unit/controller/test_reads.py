"""What the controller's pod mirror keeps: every field its readers read, not the rest of the pod."""

from __future__ import annotations

import json

import pytest

from vk_devtools.routescale import away_pod
from vk_provider.controller.reads import pod_as_read
from vk_provider.policy import pods
from vk_provider.policy.podgroups import pod_gpu_request

pytestmark = pytest.mark.unit
GPU = "nvidia.com/gpu"


def test_a_kept_pod_answers_the_policy_and_the_controller_as_the_whole_pod_does() -> None:
    whole = away_pod(3, 1)
    whole["spec"]["initContainers"] = [
        {"name": "sidecar", "image": "proxy", "restartPolicy": "Always", "resources": {"limits": {GPU: "1"}}}
    ]
    whole["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
    kept = pod_as_read(json.loads(json.dumps(whole)))
    for read in (
        lambda pod: pods.pod_gpus(pod, GPU),
        lambda pod: pod_gpu_request(pod, GPU),
        lambda pod: pods.gang_name(pod, "job", None),
        pods.unschedulable,
        pods.priority,
        lambda pod: (pod["metadata"], pod["spec"].get("nodeName"), pod["spec"].get("tolerations")),
        lambda pod: {key: pod["status"].get(key) for key in ("phase", "conditions", "podIP", "hostIP")},
    ):
        assert read(kept) == read(whole)
    assert len(json.dumps(kept)) < 0.6 * len(json.dumps(whole))
    container = kept["spec"]["containers"][0]
    assert set(container) <= {"name", "resources", "restartPolicy"}
    assert "containerStatuses" not in kept["status"]
