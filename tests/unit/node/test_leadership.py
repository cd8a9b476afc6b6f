"""The node's leader election: its settings, its Lease, the election's rules, and a takeover that keeps
the node Ready."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any, cast

import pytest

from vk_provider._kube.events import EventRecorder
from vk_provider._kube.leaderelection import LeaderElector
from vk_provider.kit.kube import KubeApi, KubeApiError
from vk_provider.node import leadership
from vk_provider.node.keeper import NodeKeeper
from vk_provider.node.metrics import DaemonMetrics
from vk_provider.node.settings import NodeSettings, SettingsError, load_settings
from vk_provider.provider import ProviderContext
from vk_providers.mock import MockProvider

pytestmark = pytest.mark.unit


def test_leader_election_is_on_by_default_with_timings_inside_the_node_grace_period() -> None:
    settings = NodeSettings()
    assert settings.leader_elect
    worst_case = (
        settings.lease_renew_interval_seconds  # the last node heartbeat may be this old at the kill
        + settings.leader_election_lease_duration_seconds
        + 2 * settings.leader_election_retry_period_seconds  # the standby's polls
    )
    assert worst_case < 40 - 5  # the default node-monitor grace period, less its 5 s monitor period


def test_leader_election_settings_come_from_every_layer_and_are_checked() -> None:
    settings = load_settings(
        config_file=None,
        environ={"VK_PROVIDER_LEADER_ELECT": "false"},
        flags={"leader_election_namespace": "ns", "leader_election_lease_duration_seconds": "20"},
    )
    assert not settings.leader_elect
    assert settings.leader_election_namespace == "ns"
    assert settings.leader_election_lease_duration_seconds == 20.0
    with pytest.raises(SettingsError, match="renew deadline shorter than the lease duration"):
        load_settings(config_file=None, environ={}, flags={"leader_election_renew_deadline_seconds": "15"})


def test_the_lease_is_named_after_the_node_in_the_pods_namespace_else_in_one_every_cluster_has(
    tmp_path: Path,
) -> None:
    assert leadership.lease_name("burst-gpu") == "vk-provider-node-burst-gpu"
    assert len(leadership.lease_name("n" * 253)) == 253
    namespace_file = tmp_path / "namespace"
    assert leadership.lease_namespace(NodeSettings(), namespace_file) == "kube-node-lease"
    namespace_file.write_text("infra\n")
    assert leadership.lease_namespace(NodeSettings(), namespace_file) == "infra"
    configured = NodeSettings(leader_election_namespace="elsewhere")
    assert leadership.lease_namespace(configured, namespace_file) == "elsewhere"


def test_each_replica_has_its_own_identity_unless_given_one() -> None:
    assert leadership.identity(NodeSettings()) != leadership.identity(NodeSettings())
    assert leadership.identity(NodeSettings(leader_election_identity="pod-a")) == "pod-a"


class LeaseStore:
    """One Lease, with the apiserver's optimistic concurrency: a PUT must carry the resourceVersion."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.failing = False
        self.calls = 0
        self.called = asyncio.Event()

    def _check(self) -> None:
        self.calls += 1
        self.called.set()
        if self.failing:
            raise OSError("the apiserver is away")

    async def get(self, path: str, **_: Any) -> dict[str, Any]:
        self._check()
        if self.lease is None:
            raise KubeApiError(404, "NotFound", "not found")
        return copy.deepcopy(self.lease)

    async def create(self, path: str, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        self._check()
        if self.lease is not None:
            raise KubeApiError(409, "AlreadyExists", "exists")
        return self._store(body)

    async def request(self, method: str, path: str, *, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        self._check()
        assert method == "PUT"
        if body["metadata"].get("resourceVersion") != str(self.version):
            raise KubeApiError(409, "Conflict", "the object has been modified")
        return self._store(body)

    def _store(self, body: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        self.lease = {
            **copy.deepcopy(body),
            "metadata": {**body["metadata"], "resourceVersion": str(self.version)},
        }
        return copy.deepcopy(self.lease)

    @property
    def holder(self) -> str | None:
        holder: str | None = ((self.lease or {}).get("spec") or {}).get("holderIdentity")
        return holder


async def attempts(store: LeaseStore, count: int) -> None:
    """Wait until the elector has called the apiserver `count` more times."""
    target = store.calls + count
    async with asyncio.timeout(5):
        while store.calls < target:
            store.called.clear()
            await store.called.wait()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def elector(store: LeaseStore, clock: Clock, identity: str) -> LeaderElector:
    return LeaderElector(
        cast(KubeApi, store),
        namespace="ns",
        name="vk-provider-node-n",
        identity=identity,
        lease_seconds=6.0,
        renew_seconds=0.01,
        retry_seconds=0.01,
        renew_deadline_seconds=4.0,
        monotonic=clock,
    )


async def test_a_standby_takes_over_only_once_the_leaders_lease_expired_and_at_once_when_released() -> None:
    store, clock = LeaseStore(), Clock()
    first, second = elector(store, clock, "a"), elector(store, clock, "b")
    assert await first._attempt()
    assert not await second._attempt()  # held, and just renewed
    clock.now += 5.9
    assert not await second._attempt()  # not yet expired on the standby's own clock
    clock.now += 0.2
    assert await second._attempt()  # expired: taken over
    assert store.holder == "b"
    assert store.lease is not None
    assert store.lease["spec"]["leaseTransitions"] == 1
    assert not await first._attempt()  # the old leader sees the new holder and stands by
    await second.release()
    assert await first._attempt()  # released: no need to wait for it to expire
    assert store.holder == "a"


async def test_a_restarted_replica_takes_its_own_unexpired_lease_back_at_once() -> None:
    store, clock = LeaseStore(), Clock()
    assert await elector(store, clock, "pod-a")._attempt()
    acquired = store.lease["spec"]["acquireTime"] if store.lease else None
    # The process died without releasing; its successor in the same pod has the same identity and a
    # fresh clock: it need not wait out the Lease its predecessor held, and no transition is counted.
    restarted = elector(store, Clock(), "pod-a")
    assert await restarted._attempt()
    assert store.holder == "pod-a"
    assert store.lease is not None
    assert (store.lease["spec"]["leaseTransitions"], store.lease["spec"]["acquireTime"]) == (0, acquired)
    assert not await elector(store, Clock(), "pod-b")._attempt()  # another identity still waits


async def test_a_missing_lease_namespace_is_said_plainly(caplog: pytest.LogCaptureFixture) -> None:
    class NoNamespace(LeaseStore):
        async def create(self, path: str, body: dict[str, Any], **_: Any) -> dict[str, Any]:
            raise KubeApiError(404, "NotFound", 'namespaces "ns" not found')

    store = NoNamespace()
    assert not await elector(store, Clock(), "a")._attempt()
    assert "the namespace ns of the Lease vk-provider-node-n does not exist" in caplog.text
    assert "--leader-election-namespace" in caplog.text


async def test_a_leader_renews_with_one_put_and_reads_again_only_when_refused() -> None:
    class Counting(LeaseStore):
        def __init__(self) -> None:
            super().__init__()
            self.gets = 0

        async def get(self, path: str, **kwargs: Any) -> dict[str, Any]:
            self.gets += 1
            return await super().get(path, **kwargs)

    store, clock = Counting(), Clock()
    leader = elector(store, clock, "a")
    assert await leader._attempt()  # acquired: one GET (none there), one create
    gets = store.gets
    for _ in range(5):
        assert await leader._attempt()
    assert store.gets == gets  # renewals: a PUT each, no GET
    assert store.lease is not None
    assert store.lease["metadata"]["resourceVersion"] == "6"
    # Someone else wrote the Lease meanwhile (a takeover after a stall): the PUT is refused, the
    # Lease read again, and its new holder respected.
    assert store.lease is not None
    store._store({**store.lease, "spec": {**store.lease["spec"], "holderIdentity": "b"}})
    assert not await leader._attempt()
    assert store.gets == gets + 1
    assert store.holder == "b"


async def test_a_leader_that_cannot_renew_stops_leading_by_its_renew_deadline() -> None:
    store, clock = LeaseStore(), Clock()
    leader = elector(store, clock, "a")
    stopped = asyncio.Event()

    async def lead() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()

    running = asyncio.create_task(leader.run(lead))
    async with asyncio.timeout(5):
        await leader.leading.wait()
    store.failing = True
    clock.now += 3.9
    await attempts(store, 3)
    assert leader.leading.is_set()  # failed renewals within the deadline: still leading
    clock.now += 0.2
    async with asyncio.timeout(5):
        await stopped.wait()  # past the deadline, before the 6 s lease could let a standby in
    assert not leader.leading.is_set()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running


class NodeApi:
    """An existing Node as a previous leader left it; records the status patches."""

    def __init__(self, ready: str) -> None:
        self.ready = ready
        self.status_patches: list[dict[str, Any]] = []

    async def get(self, path: str, **_: Any) -> dict[str, Any]:
        conditions = [
            {"type": "Ready", "status": self.ready, "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "ProviderAvailable", "status": "True"},
        ]
        return {
            "metadata": {"name": "n", "uid": "u", "labels": {}, "resourceVersion": "1"},
            "spec": {"taints": []},
            "status": {"conditions": conditions},
        }

    async def patch(self, path: str, body: Any, **_: Any) -> dict[str, Any]:
        if path.endswith("/status"):
            self.status_patches.append(body["status"])
        return {}


@pytest.mark.parametrize(("before", "after"), [("True", "True"), ("Unknown", "False"), ("False", "False")])
async def test_a_takeover_keeps_a_ready_node_ready_and_writes_its_own_address_and_port(
    tmp_path: Path, before: str, after: str
) -> None:
    api = NodeApi(before)
    kube = cast(KubeApi, api)
    settings = NodeSettings(node_name="n", addresses=("10.0.0.7",), kubelet_port=10311, no_taint=True)
    provider = MockProvider(ProviderContext("n", {}, "10.0.0.7", tmp_path))
    keeper = NodeKeeper(kube, settings, provider, EventRecorder(kube, host="n"), metrics=DaemonMetrics())
    await keeper.register()
    (status,) = api.status_patches
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == after
    if before == "True":  # the same condition carried on: its transition time is kept
        assert ready["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert {"type": "InternalIP", "address": "10.0.0.7"} in status["addresses"]
    assert status["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 10311}}


async def test_a_standby_counts_as_answered_and_an_unreachable_apiserver_does_not() -> None:
    class Unreachable(LeaseStore):
        async def get(self, path: str, **_: Any) -> dict[str, Any]:
            raise OSError("connection refused")

    store, clock = LeaseStore(), Clock()
    leader, standby = elector(store, clock, "a"), elector(store, clock, "b")
    assert await leader._attempt()
    assert not await standby._attempt()
    assert leader.answered.is_set()
    assert standby.answered.is_set()  # what the controller's /readyz waits for: standbys are Ready
    cut_off = elector(Unreachable(), Clock(), "c")
    assert not await cut_off._attempt()
    assert not cut_off.answered.is_set()
