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
