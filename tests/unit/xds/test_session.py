"""The xDS protocol on one stream, and the "applied" check across streams, without a real Envoy."""

from __future__ import annotations

import asyncio

from envoy.service.discovery.v3 import discovery_pb2

from vk_provider.routetable.table import Endpoint
from vk_provider.xds.names import (
    CLUSTER_TYPE,
    LISTENER_TYPE,
    LOAD_ASSIGNMENT_TYPE,
    PUSH_ORDER,
    ROUTE_CONFIGURATION_NAME,
    ROUTE_CONFIGURATION_TYPE,
)
from vk_provider.xds.resources import build_resources
from vk_provider.xds.session import DiscoverySession
from vk_provider.xds.snapshots import Snapshot, SnapshotStore
from vk_provider.xds.tracking import ConnectedNodes

from . import route, table

HOME = (Endpoint("http://10.0.0.1:8080"),)
AWAY = (Endpoint("http://10.1.0.1:8000"),)


def request(
    type_url: str,
    *,
    nonce: str = "",
    version: str = "",
    names: tuple[str, ...] = (),
    node: str | None = None,
    error: str | None = None,
) -> discovery_pb2.DiscoveryRequest:
    message = discovery_pb2.DiscoveryRequest(
        type_url=type_url, response_nonce=nonce, version_info=version, resource_names=names
    )
    if node is not None:
        message.node.id = node
    if error is not None:
        message.error_detail.code = 3
        message.error_detail.message = error
    return message


def snapshot(version: int, away_weight: int = 0) -> Snapshot:
    return Snapshot(version, build_resources(table(route(away_weight=away_weight, home=HOME, away=AWAY))))


def subscribe_all(
    session: DiscoverySession, current: Snapshot, node: str = "envoy-a", types: tuple[str, ...] = PUSH_ORDER
) -> None:
    """Ask for and ACK each of `types`, as a starting Envoy does."""
    names = {
        ROUTE_CONFIGURATION_TYPE: (ROUTE_CONFIGURATION_NAME,),
        LOAD_ASSIGNMENT_TYPE: ("default/chat/home",),
    }
    for type_url in types:
        (response,) = session.on_request(request(type_url, names=names.get(type_url, ()), node=node), current)
        ack = request(
            type_url, nonce=response.nonce, version=response.version_info, names=names.get(type_url, ())
        )
        assert session.on_request(ack, current) == []


def test_a_first_request_is_answered_with_the_current_version_and_its_ack_is_recorded() -> None:
    session = DiscoverySession("ipv4:127.0.0.1:5000")
    current = snapshot(1)
    (response,) = session.on_request(request(LISTENER_TYPE, node="envoy-a"), current)
    assert (response.version_info, response.type_url) == ("1", LISTENER_TYPE)
    assert len(response.resources) == 1
    assert session.node_id == "envoy-a"
    assert session.acked_version(LISTENER_TYPE) == 0
    assert session.on_request(request(LISTENER_TYPE, nonce=response.nonce, version="1"), current) == []
    assert session.acked_version(LISTENER_TYPE) == 1


def test_a_nack_is_kept_with_its_reason_and_the_refused_version_is_not_sent_again() -> None:
    session = DiscoverySession("peer")
    subscribe_all(session, snapshot(1))
    newer = snapshot(2, away_weight=50)
    pushed = session.on_snapshot(newer)
    assert [r.type_url for r in pushed] == list(PUSH_ORDER)
    by_type = {r.type_url: r for r in pushed}
    nack = request(CLUSTER_TYPE, nonce=by_type[CLUSTER_TYPE].nonce, version="1", error="bad cluster")
    assert session.on_request(nack, newer) == []
    (refusal,) = session.nacks
    assert (refusal.node, refusal.type_url, refusal.version, refusal.message) == (
        "envoy-a",
        CLUSTER_TYPE,
        2,
        "bad cluster",
    )
    assert session.acked_version(CLUSTER_TYPE) == 1
    assert session.applied_version(newer) == 1
    # The next version goes out, and its ACK clears the refusal.
    newest = snapshot(3, away_weight=100)
    (clusters, *_) = session.on_snapshot(newest)
    session.on_request(request(CLUSTER_TYPE, nonce=clusters.nonce, version="3"), newest)
    assert session.nacks == []


def test_a_request_with_an_older_nonce_is_ignored() -> None:
    session = DiscoverySession("peer")
    current = snapshot(1)
    (first,) = session.on_request(request(LISTENER_TYPE, node="envoy-a"), current)
    newer = snapshot(2, away_weight=10)
    (second,) = session.on_snapshot(newer)
    assert session.on_request(request(LISTENER_TYPE, nonce=first.nonce, version="1"), newer) == []
    assert session.acked_version(LISTENER_TYPE) == 0
    session.on_request(request(LISTENER_TYPE, nonce=second.nonce, version="2"), newer)
    assert session.acked_version(LISTENER_TYPE) == 2


def test_named_types_get_only_what_was_asked_and_a_new_name_is_answered_at_the_same_version() -> None:
    session = DiscoverySession("peer")
    current = Snapshot(
        1,
        build_resources(
            table(route(home=HOME, name="one"), route(home=HOME, name="two", hosts=("b.example",)))
        ),
    )
    (first,) = session.on_request(request(LOAD_ASSIGNMENT_TYPE, names=("default/one/home",)), current)
    assert len(first.resources) == 1
    asked_more = request(
        LOAD_ASSIGNMENT_TYPE, nonce=first.nonce, version="1", names=("default/one/home", "default/two/home")
    )
    (second,) = session.on_request(asked_more, current)
    assert (second.version_info, len(second.resources)) == ("1", 2)


def test_a_new_version_goes_only_to_the_types_the_stream_asked_for() -> None:
    session = DiscoverySession("peer")
    session.on_request(request(CLUSTER_TYPE), snapshot(1))
    session.on_request(request(LISTENER_TYPE), snapshot(1))
    assert [r.type_url for r in session.on_snapshot(snapshot(2, 20))] == [CLUSTER_TYPE, LISTENER_TYPE]


def test_a_version_is_applied_once_every_type_it_has_is_acked() -> None:
    session = DiscoverySession("peer")
    current = snapshot(1)
    assert current.required_types == frozenset(PUSH_ORDER)
    assert Snapshot(1, build_resources(table())).required_types == frozenset(
        {LISTENER_TYPE, ROUTE_CONFIGURATION_TYPE, CLUSTER_TYPE}
    )
    subscribe_all(session, current, types=(LISTENER_TYPE, CLUSTER_TYPE))
    assert session.applied_version(current) == 0
    subscribe_all(session, current, types=(ROUTE_CONFIGURATION_TYPE, LOAD_ASSIGNMENT_TYPE))
    assert session.applied_version(current) == 1


async def test_connected_nodes_report_who_has_not_applied_a_version_and_wake_waiters() -> None:
    store = SnapshotStore()
    store.publish(build_resources(table(route(home=HOME))))
    assert store.current is not None
    nodes = ConnectedNodes(store)
    fast, slow = DiscoverySession("peer-1"), DiscoverySession("peer-2")
    nodes.add(fast)
    nodes.add(slow)
    subscribe_all(fast, store.current)
    slow.on_request(request(LISTENER_TYPE, node="envoy-b"), store.current)
    assert nodes.acked() == {"envoy-a": 1, "envoy-b": 0}
    assert nodes.not_acked(1) == ["envoy-b"]
    waiting = asyncio.create_task(nodes.wait_applied(1, nodes=2))
    nodes.remove(slow)  # gone: no longer lagging, but one Envoy is not the two asked for
    await asyncio.sleep(0)
    assert not waiting.done()
    late = DiscoverySession("peer-3")
    nodes.add(late)
    subscribe_all(late, store.current, node="envoy-c")
    nodes.notify()
    async with asyncio.timeout(1):
        await waiting
    assert nodes.acked() == {"envoy-a": 1, "envoy-c": 1}


def test_publishing_unchanged_resources_keeps_the_version() -> None:
    store = SnapshotStore()
    seen: list[int] = []
    store.subscribe(lambda snapshot: seen.append(snapshot.version))
    assert store.publish(build_resources(table(route(home=HOME)))) == 1
    assert store.publish(build_resources(table(route(home=HOME)))) == 1
    assert store.publish(build_resources(table(route(home=HOME, away=AWAY, away_weight=10)))) == 2
    assert seen == [1, 2]
