"""The policy's conditions: whether dcgm-exporter could be read is said, never acted on."""

from __future__ import annotations

import dataclasses

import pytest

from tests.unit.policy.fixtures import NOW, policy
from vk_provider.policy.dcgm import ExporterSettings
from vk_provider.policy.model import Observed
from vk_provider.policy.status import conditions_for

pytestmark = pytest.mark.unit

EXPORTER = ExporterSettings(namespace="gpu-operator", selector={"matchLabels": {"app": "dcgm"}})


def metrics_condition(errors: dict[str, str], *, exporter: bool = True) -> dict[str, str]:
    spec = policy()
    if exporter:
        spec = dataclasses.replace(spec, health=dataclasses.replace(spec.health, exporter=EXPORTER))
    conditions = conditions_for(
        [], NOW, 1, problem=None, observed=Observed(), policy=spec, exporter_errors=errors
    )
    return next(c for c in conditions if c["type"] == "GpuMetricsAvailable")


def test_exporters_that_answer_are_scraped() -> None:
    condition = metrics_condition({})
    assert (condition["status"], condition["reason"]) == ("True", "Scraped")


def test_an_unreadable_exporter_is_named_in_a_false_condition() -> None:
    condition = metrics_condition({"gpu-b": "connection refused", "gpu-a": "not exporter text"})
    assert (condition["status"], condition["reason"]) == ("False", "ExporterUnavailable")
    assert condition["message"] == (
        "judged on node state alone for gpu-a: not exporter text; gpu-b: connection refused"
    )


def test_without_an_exporter_health_comes_from_the_nodes_alone() -> None:
    condition = metrics_condition({}, exporter=False)
    assert (condition["status"], condition["reason"]) == ("True", "NotConfigured")


def pod_groups_condition(unavailable: str | None, *, read: bool = True) -> dict[str, str] | None:
    spec = policy()
    spec = dataclasses.replace(spec, demand=dataclasses.replace(spec.demand, pod_groups=read))
    conditions = conditions_for(
        [], NOW, 1, problem=None, observed=Observed(), policy=spec, pod_groups_unavailable=unavailable
    )
    return next((c for c in conditions if c["type"] == "PodGroupsReadable"), None)


def test_pod_groups_that_can_be_read_are_said_to_count() -> None:
    condition = pod_groups_condition(None)
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("True", "Read")


def test_pod_groups_an_older_cluster_lacks_are_a_false_condition_with_the_reason() -> None:
    gap = "cluster v1.35.4: native PodGroups (scheduling.k8s.io/v1beta1) unavailable (needs 1.37+); ..."
    condition = pod_groups_condition(gap)
    assert condition is not None
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False",
        "PodGroupsUnavailable",
        gap,
    )


def test_a_policy_that_reads_no_pod_groups_has_no_such_condition() -> None:
    assert pod_groups_condition("whatever", read=False) is None
