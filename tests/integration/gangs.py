"""Training workloads for the tests: members of a native PodGroup, and what their containers run."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from vk_provider.kit.kube import RawObject

GPU = "nvidia.com/gpu"


def working_for(seconds: float) -> list[str]:
    """A container command that works `seconds` and exits, as a training step would: the workload's
    own run time on a `local` node, not a wait in the test (noqa: sleep-ok)."""
    return [sys.executable, "-c", f"import time; time.sleep({seconds})"]  # noqa: sleep-ok


def gang_member(
    name: str, gang: str, node_selector: dict[str, str], tolerations: Sequence[dict[str, str]] = ()
) -> dict[str, Any]:
    """A pod of the native PodGroup `gang` (labelled gang=<gang>), 1 GPU, running until deleted."""
    return {
        "metadata": {"name": name, "labels": {"gang": gang}},
        "spec": {
            "schedulingGroup": {"podGroupName": gang},
            "nodeSelector": node_selector,
            "tolerations": list(tolerations),
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "rank",
                    "image": "local",
                    "command": working_for(600),
                    "resources": {"limits": {GPU: "1"}},
                }
            ],
        },
    }


def scheduled_condition(group: RawObject) -> dict[str, Any]:
    """The PodGroup's PodGroupInitiallyScheduled condition ({} until it has one)."""
    for item in (group.get("status") or {}).get("conditions") or ():
        if item.get("type") == "PodGroupInitiallyScheduled":
            return dict(item)
    return {}
