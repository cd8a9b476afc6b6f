"""The feed's rebuild: what it hands the active checks, and one Warning per object it ignores (a pod
with forged annotations, on a node that is not ours, without a seal that verifies or with a marker the
router will not sign for; an EndpointSlice no trusted manager wrote).

The mirrors are filled by hand (no watch runs); events go to a recording stand-in for the recorder.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest

from vk_provider._kube.events import InvolvedObject
from vk_provider.offload.homeslices import ENDPOINTSLICE_CONTROLLER, MANAGED_BY_LABEL, SliceManagers
from vk_provider.offload.names import (
    OFFLOAD_LABEL,
    TRAFFIC_ADDRESS_ANNOTATION,
    TRAFFIC_ADDRESS_CONDITION,
    TRAFFIC_AUTH_CONDITION,
)
from vk_provider.router.metrics import RouterMetrics
from vk_provider.routetable import feed as feed_module
from vk_provider.routetable.feed import TableFeed
from vk_provider.routetable.signingscope import SigningScope
from vk_provider.routetable.table import Route, RouteMatch, RouteTable

from .sealing import TEST_KEY_SECRET, seal_condition


class RecordedEvents:
    def __init__(self) -> None:
        self.recorded: list[tuple[InvolvedObject, str, str, str]] = []

    def record(self, involved: InvolvedObject, type: str, reason: str, message: str) -> None:
        self.recorded.append((involved, type, reason, message))


def away_pod(name: str, *, forged: bool, node: str = "vk-away", marker: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": "ml",
        "uid": f"uid-{name}",
        "labels": {OFFLOAD_LABEL: "chat"},
    }
    if forged:
        metadata["annotations"] = {TRAFFIC_ADDRESS_ANNOTATION: "http://attacker.example"}
    url = f"http://{name}.test:8080"
    address = {"type": TRAFFIC_ADDRESS_CONDITION, "status": "True", "message": url}
    conditions = [
        {"type": "Ready", "status": "True"},
        address,
        seal_condition(f"uid-{name}", url, marker or ""),
    ]
    if marker is not None:
        conditions.append({"type": TRAFFIC_AUTH_CONDITION, "status": "True", "message": marker})
    return {"metadata": metadata, "spec": {"nodeName": node}, "status": {"conditions": conditions}}


def home_slice(name: str, address: str, *, manager: str | None) -> dict[str, Any]:
    """A slice of the Offload's home Service `chat`, written by `manager`."""
    labels = {"kubernetes.io/service-name": "chat"} | ({MANAGED_BY_LABEL: manager} if manager else {})
    return {
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}", "labels": labels},
        "ports": [{"name": "http", "port": 8080}],
        "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
    }


OFFLOAD = {
    "metadata": {"name": "chat", "namespace": "ml", "generation": 1},
    "spec": {"home": {"deployment": "chat", "service": "chat"}, "route": {"hosts": ["chat.test"]}},
    "status": {"awayWeight": 100},
}
NODE = {
    "metadata": {
        "name": "vk-away",
        "uid": "node-uid",
        "labels": {"type": "virtual-kubelet", "node-restriction.kubernetes.io/vk-provider": "true"},
    },
    "status": {"conditions": [{"type": "Ready", "status": "True"}]},
}


def test_one_warning_per_forged_pod_and_every_away_address_checked() -> None:
    tables: list[RouteTable] = []
    events = RecordedEvents()
    feed = TableFeed(None, tables.append, events=events)  # type: ignore[arg-type]
    feed.traffic_key.objects["k"] = copy.deepcopy(TEST_KEY_SECRET)
    feed.offloads.objects["o"] = copy.deepcopy(OFFLOAD)
    feed.virtual_nodes.objects["n"] = copy.deepcopy(NODE)
    feed.away_pods.objects["a"] = away_pod("a", forged=True)
    feed.away_pods.objects["b"] = away_pod("b", forged=False)

    feed.rebuild()
    feed.rebuild()  # the same forged pod: no second Event
    (route,) = tables[-1].routes
    assert [endpoint.url for endpoint in route.away] == ["http://a.test:8080", "http://b.test:8080"]
    assert set(feed.checks.status()) == {"http://a.test:8080", "http://b.test:8080"}
    ((involved, kind, reason, message),) = events.recorded
    assert (involved.name, involved.uid, kind, reason) == (
        "a",
        "uid-a",
        "Warning",
        "UntrustedTrafficAnnotation",
    )
    assert TRAFFIC_ADDRESS_ANNOTATION in message

    # Gone and back (a new forgery of the same pod after it was cleaned): warned again.
    feed.away_pods.objects["a"] = away_pod("a", forged=False)
    feed.rebuild()
    feed.away_pods.objects["a"] = away_pod("a", forged=True)
    feed.rebuild()
    assert len(events.recorded) == 2


def test_one_warning_per_pod_on_a_foreign_node_naming_the_node_and_the_missing_label() -> None:
    tables: list[RouteTable] = []
    events = RecordedEvents()
    feed = TableFeed(None, tables.append, events=events)  # type: ignore[arg-type]
    feed.traffic_key.objects["k"] = copy.deepcopy(TEST_KEY_SECRET)
    feed.offloads.objects["o"] = copy.deepcopy(OFFLOAD)
    feed.virtual_nodes.objects["n"] = copy.deepcopy(NODE)
    feed.away_pods.objects["a"] = away_pod("a", forged=False)
    feed.away_pods.objects["x"] = away_pod("x", forged=False, node="virtual-node-aci-linux")

    feed.rebuild()
    feed.rebuild()  # a resync: no second Event
    (route,) = tables[-1].routes
    assert [endpoint.url for endpoint in route.away] == ["http://a.test:8080"]
    assert set(feed.checks.status()) == {"http://a.test:8080"}
    ((involved, kind, reason, message),) = events.recorded
    assert (involved.name, involved.uid, kind, reason) == ("x", "uid-x", "Warning", "NotOnVkProviderNode")
    assert "virtual-node-aci-linux" in message
    assert "node-restriction.kubernetes.io/vk-provider" in message

    # Gone from the report (here: on our node) and back: the feed forgot it, so it warns again.
    feed.away_pods.objects["x"] = away_pod("x", forged=False)
    feed.rebuild()
    feed.away_pods.objects["x"] = away_pod("x", forged=False, node="virtual-node-aci-linux")
    feed.rebuild()
    assert len(events.recorded) == 2


def test_one_warning_per_pod_whose_marker_the_router_will_not_sign_for() -> None:
    tables: list[RouteTable] = []
    events = RecordedEvents()
    scope = SigningScope.with_hosts(["signed.test"])
    feed = TableFeed(None, tables.append, events=events, signing_scope=scope)  # type: ignore[arg-type]
    feed.traffic_key.objects["k"] = copy.deepcopy(TEST_KEY_SECRET)
    feed.offloads.objects["o"] = copy.deepcopy(OFFLOAD)
    feed.virtual_nodes.objects["n"] = copy.deepcopy(NODE)
    feed.away_pods.objects["a"] = away_pod("a", forged=False)
    feed.away_pods.objects["s3"] = away_pod(
        "s3", forged=False, marker="aws-sigv4; service=s3; region=eu-west-1"
    )
    feed.away_pods.objects["signed"] = away_pod(
        "signed", forged=False, marker="aws-sigv4; service=sagemaker; region=eu-west-1"
    )

    feed.rebuild()
    feed.rebuild()  # a resync: no second Event
    (route,) = tables[-1].routes
    assert [endpoint.url for endpoint in route.away] == ["http://a.test:8080", "http://signed.test:8080"]
    ((involved, kind, reason, message),) = events.recorded
    assert (involved.kind, involved.name, involved.uid, kind, reason) == (
        "Pod",
        "s3",
        "uid-s3",
        "Warning",
        "TrafficAuthRefused",
    )
    assert "'s3'" in message


def test_one_warning_per_untrusted_slice_of_a_home_service_on_the_slice() -> None:
    tables: list[RouteTable] = []
    events = RecordedEvents()
    managers = SliceManagers.with_extra(["mesh.io"])
    feed = TableFeed(None, tables.append, events=events, slice_managers=managers)  # type: ignore[arg-type]
    feed.traffic_key.objects["k"] = copy.deepcopy(TEST_KEY_SECRET)
    feed.offloads.objects["o"] = copy.deepcopy(OFFLOAD)
    feed.endpoint_slices.objects["k"] = home_slice("chat-k8s", "10.0.0.1", manager=ENDPOINTSLICE_CONTROLLER)
    feed.endpoint_slices.objects["m"] = home_slice("chat-mesh", "10.0.0.2", manager="mesh.io")
    feed.endpoint_slices.objects["h"] = home_slice("hand-made", "10.6.6.6", manager=None)

    feed.rebuild()
    feed.rebuild()  # a resync: no second Event
    (route,) = tables[-1].routes
    assert [endpoint.url for endpoint in route.home] == ["http://10.0.0.1:8080", "http://10.0.0.2:8080"]
    ((involved, kind, reason, message),) = events.recorded
    assert involved == InvolvedObject(
        "EndpointSlice", "hand-made", "ml", "uid-hand-made", "discovery.k8s.io/v1"
    )
    assert (kind, reason) == ("Warning", "UntrustedEndpointSlice")
    assert f"no {MANAGED_BY_LABEL} label" in message


def test_one_warning_per_unsealed_pod_and_the_ignored_gauge_counts_every_reason() -> None:
    tables: list[RouteTable] = []
    events = RecordedEvents()
    metrics = RouterMetrics()
    feed = TableFeed(None, tables.append, events=events, metrics=metrics)  # type: ignore[arg-type]
    feed.traffic_key.objects["k"] = copy.deepcopy(TEST_KEY_SECRET)
    feed.offloads.objects["o"] = copy.deepcopy(OFFLOAD)
    feed.virtual_nodes.objects["n"] = copy.deepcopy(NODE)
    feed.away_pods.objects["a"] = away_pod("a", forged=False)
    forged = away_pod("f", forged=False)
    forged["status"]["conditions"][1]["message"] = "http://decoy.test:8080"  # rewritten after sealing
    feed.away_pods.objects["f"] = forged

    feed.rebuild()
    feed.rebuild()  # a resync: no second Event
    (route,) = tables[-1].routes
    assert [endpoint.url for endpoint in route.away] == ["http://a.test:8080"]
    ((involved, kind, reason, message),) = events.recorded
    assert (involved.name, involved.uid, kind, reason) == (
        "f",
        "uid-f",
        "Warning",
        "UnverifiedTrafficAddress",
    )
    assert "does not match its address" in message
    exposition = metrics.exposition().decode()
    assert 'vk_provider_router_ignored_objects{reason="UnverifiedTrafficAddress"} 1.0' in exposition
    assert 'vk_provider_router_ignored_objects{reason="NotOnVkProviderNode"} 0.0' in exposition


def test_without_the_key_secret_no_away_pod_is_taken_and_the_cause_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tables: list[RouteTable] = []
    feed = TableFeed(None, tables.append, events=RecordedEvents())  # type: ignore[arg-type]
    feed.offloads.objects["o"] = copy.deepcopy(OFFLOAD)
    feed.virtual_nodes.objects["n"] = copy.deepcopy(NODE)
    feed.away_pods.objects["a"] = away_pod("a", forged=False)

    with caplog.at_level(logging.INFO, logger="vk_provider.routetable.feed"):
        feed.rebuild()
        feed.rebuild()
        assert tables[-1].routes[0].away == ()
        missing = [r for r in caplog.records if "does not exist" in r.getMessage()]
        assert len(missing) == 1
        assert "default/vk-provider-traffic-key" in missing[0].getMessage()

        feed.traffic_key.objects["k"] = copy.deepcopy(TEST_KEY_SECRET)  # a node created it
        feed.rebuild()
        assert [endpoint.url for endpoint in tables[-1].routes[0].away] == ["http://a.test:8080"]
        assert any("away pods' addresses are verified" in r.getMessage() for r in caplog.records)

        feed.traffic_key.objects["k"] = {"data": {"key": "c2hvcnQ="}}  # "short": unusable
        feed.rebuild()
        assert tables[-1].routes[0].away == ()
        assert any("is unusable" in r.getMessage() for r in caplog.records)


def _weighted(name: str, weight: int) -> Route:
    return Route("ml", name, 1, RouteMatch(hosts=(f"{name}.example",)), weight)


def test_a_new_table_is_logged_by_the_routes_it_changed_not_all_of_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    before = RouteTable.of([_weighted(f"m{number}", 0) for number in range(100)])
    after = RouteTable.of([_weighted("m1", 50), *(_weighted(f"m{number}", 0) for number in range(2, 100))])
    with caplog.at_level(logging.INFO, logger="vk_provider.routetable.feed"):
        feed_module._log_changes(before, after)
    (message,) = [record.getMessage() for record in caplog.records]
    assert message == "route table updated (99 routes): ml/m1 away=50%; removed ml/m0"


async def test_an_offload_wakes_a_rebuild_only_when_what_the_table_reads_of_it_changed() -> None:
    """The controller writes an Offload's status several times per step (gates, conditions); only its
    weight, spec and identity make the table, so only those wake a rebuild."""
    feed = TableFeed(None, lambda table: None)  # type: ignore[arg-type]

    async def woken_by(offload: dict[str, Any] | None) -> bool:
        feed._wake.clear()
        if offload is None:
            feed.offloads.objects.pop("o", None)
        else:
            feed.offloads.objects["o"] = offload
        await feed.offload_changed("o")
        return feed._wake.is_set()

    def changed(**status: Any) -> dict[str, Any]:
        offload: dict[str, Any] = copy.deepcopy(OFFLOAD)
        offload["status"].update(status)
        return offload

    assert await woken_by(copy.deepcopy(OFFLOAD))  # a new Offload
    gated = changed(conditions=[{"type": "Progressing", "status": "True", "reason": "StepGated"}])
    gated["metadata"]["resourceVersion"] = "2"
    assert not await woken_by(gated)
    assert not await woken_by(changed(phase="Shifting", stepStartedAt="2026-12-07T18:00:00Z"))
    assert await woken_by(changed(phase="Migrating"))  # unreadable: the route is left out, with why
    assert await woken_by(changed(phase="Shifting"))
    assert await woken_by(changed(phase="Shifting", awayWeight=50))
    assert not await woken_by(changed(phase="Shifting", awayWeight=50, observedGeneration=1))
    rerouted = changed(phase="Shifting", awayWeight=50)
    rerouted["spec"]["route"]["hosts"] = ["chat.test", "chat.example"]
    assert await woken_by(rerouted)
    broken = copy.deepcopy(rerouted)
    del broken["spec"]["home"]["service"]
    assert await woken_by(broken)  # now left out of the table, with the reason
    assert await woken_by(None)  # deleted
