"""A provider that refuses all new work (an empty balance, a quota of 0) shows on the node: the
ProviderAvailable condition with the provider's reason, a Warning naming it, pods retried no sooner than
the provider asks; and the provider's own pod Events reach the pods."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from tests.unit.node.test_keeper_stop import RecordingApi
from vk_provider._kube.events import EventRecorder, InvolvedObject
from vk_provider.errors import ProviderRefusesWorkError
from vk_provider.kit.kube import KubeApi
from vk_provider.node import nodeobject
from vk_provider.node.daemon import _pod_event_poster
from vk_provider.node.keeper import NodeKeeper
from vk_provider.node.metrics import DaemonMetrics
from vk_provider.node.pods import provider_wait_seconds, retry_delay
from vk_provider.node.settings import NodeSettings
from vk_provider.provider import PodRef, ProviderContext
from vk_providers.mock import MockProvider


class Events:
    """The node's event recorder, as far as these tests look at it."""

    def __init__(self) -> None:
        self.recorded: list[tuple[InvolvedObject, str, str, str]] = []

    def record(self, involved: InvolvedObject, type: str, reason: str, message: str) -> None:
        self.recorded.append((involved, type, reason, message))


class Refusing(MockProvider):
    def __init__(self, state_dir: Path) -> None:
        super().__init__(ProviderContext("n", {}, "10.0.0.1", state_dir))
        self.refusal: ProviderRefusesWorkError | None = None

    async def check_health(self) -> None:
        if self.refusal is not None:
            raise self.refusal


def balance_refusal(seconds: float = 60.0) -> ProviderRefusesWorkError:
    return ProviderRefusesWorkError(
        "RunPod create_pod: HTTP 402 Payment Required: insufficient balance",
        reason="InsufficientBalance",
        retry_after_seconds=seconds,
    )


def provider_condition(keeper: NodeKeeper) -> dict[str, Any]:
    conditions = nodeobject.conditions(keeper.health, datetime.now(UTC))
    return next(c for c in conditions if c["type"] == nodeobject.PROVIDER_AVAILABLE_CONDITION)


async def test_a_refusal_of_all_work_is_the_nodes_condition_with_its_reason_until_it_ends(
    tmp_path: Path,
) -> None:
    kube = cast(KubeApi, RecordingApi())
    events = Events()
    provider = Refusing(tmp_path)
    keeper = NodeKeeper(
        kube,
        NodeSettings(node_name="n", no_taint=True),
        provider,
        cast(EventRecorder, events),
        metrics=DaemonMetrics(),
    )
    provider.refusal = balance_refusal()
    await keeper.check_health_once()
    await keeper.check_health_once()  # still refused: no second Warning
    condition = provider_condition(keeper)
    assert (condition["status"], condition["reason"]) == ("False", "InsufficientBalance")
    assert "402 Payment Required" in condition["message"]
    assert [(kind, reason) for _, kind, reason, _ in events.recorded] == [("Warning", "InsufficientBalance")]

    provider.refusal = None
    await keeper.check_health_once()
    condition = provider_condition(keeper)
    assert (condition["status"], condition["reason"]) == ("True", "ProviderHealthy")
    assert [(kind, reason) for _, kind, reason, _ in events.recorded][-1] == ("Normal", "ProviderAvailable")
    await provider.aclose()


def test_a_pod_refused_with_all_work_is_retried_no_sooner_than_the_provider_asks() -> None:
    refusal = balance_refusal(240.0)
    assert provider_wait_seconds(refusal) == 240.0
    assert retry_delay(60.0, refusal) == 240.0  # the node's longest backoff is shorter than the wait


def test_a_providers_pod_events_are_posted_on_the_pod_and_counted() -> None:
    events = Events()
    metrics = DaemonMetrics()
    post = _pod_event_poster(cast(EventRecorder, events), metrics)
    post(PodRef("team", "llm-0", "uid-1"), "Warning", "NoCapacity", "RunPod has no capacity for ...")
    [(involved, kind, reason, message)] = events.recorded
    assert involved == InvolvedObject("Pod", "llm-0", "team", "uid-1")
    assert (kind, reason, message) == ("Warning", "NoCapacity", "RunPod has no capacity for ...")
    exposed = metrics.exposition().decode()
    assert 'vk_provider_provider_pod_events_total{reason="NoCapacity",type="Warning"} 1.0' in exposed


class Noting(MockProvider):
    """Available, with something to say: a chain whose member refuses all work, say."""

    def __init__(self, state_dir: Path) -> None:
        super().__init__(ProviderContext("n", {}, "10.0.0.1", state_dir))
        self.note = ""

    def health_note(self) -> str:
        return self.note


async def test_an_available_providers_note_is_in_its_condition(tmp_path: Path) -> None:
    provider = Noting(tmp_path)
    keeper = NodeKeeper(
        cast(KubeApi, RecordingApi()),
        NodeSettings(node_name="n", no_taint=True),
        provider,
        cast(EventRecorder, Events()),
        metrics=DaemonMetrics(),
    )
    provider.note = "cheap refuses new work (InsufficientBalance); the other members take new pods"
    await keeper.check_health_once()
    condition = provider_condition(keeper)
    assert (condition["status"], condition["reason"]) == ("True", "ProviderHealthy")
    assert condition["message"] == f"the provider answers its health check; {provider.note}"

    provider.note = ""
    await keeper.check_health_once()
    assert provider_condition(keeper)["message"] == "the provider answers its health check"
    await provider.aclose()
