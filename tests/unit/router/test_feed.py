"""The feed's rebuild: what it hands the active checks, and one Warning per pod it ignores (forged
annotations, or a node that is not ours).

The mirrors are filled by hand (no watch runs); events go to a recording stand-in for the recorder.
"""

from __future__ import annotations

import copy
from typing import Any

from vk_provider._kube.events import InvolvedObject
from vk_provider.offload.names import OFFLOAD_LABEL, TRAFFIC_ADDRESS_ANNOTATION, TRAFFIC_ADDRESS_CONDITION
from vk_provider.router.feed import TableFeed
from vk_provider.router.table import RouteTable


class RecordedEvents:
    def __init__(self) -> None:
        self.recorded: list[tuple[InvolvedObject, str, str, str]] = []

    def record(self, involved: InvolvedObject, type: str, reason: str, message: str) -> None:
        self.recorded.append((involved, type, reason, message))


def away_pod(name: str, *, forged: bool, node: str = "vk-away") -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": "ml",
        "uid": f"uid-{name}",
        "labels": {OFFLOAD_LABEL: "chat"},
    }
    if forged:
        metadata["annotations"] = {TRAFFIC_ADDRESS_ANNOTATION: "http://attacker.example"}
    address = {"type": TRAFFIC_ADDRESS_CONDITION, "status": "True", "message": f"http://{name}.test:8080"}
    return {
        "metadata": metadata,
        "spec": {"nodeName": node},
        "status": {"conditions": [{"type": "Ready", "status": "True"}, address]},
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
