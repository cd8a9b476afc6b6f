"""The node daemon is highly available: its replicas elect a leader, and losing the leader loses nothing.

All traffic is away (home scaled to 0), so every request is served by the away node's workloads, and
the away node runs two replicas of its daemon sharing one state folder, as two pods on one host would.
Killing the leader (kill -9) or rolling the replicas over (SIGTERM, as a Deployment's rolling update
does) under load must fail no request, must never let the node leave Ready (the node lifecycle
controller would then mark every pod not Ready and the router would drop them), and the new leader
must adopt the running workloads: no second process for a pod, no workload deleted as an orphan.

Leader-election timings are the test plane's (tests/integration/daemons.py: 6 s lease, 4 s renew
deadline, 1 s retry, for a 20 s node-monitor grace period); the away node heartbeats every 2 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.integration.daemons import ManagedProcess, NodeDaemon, NodeReplica
from tests.integration.migration_rig import NAME, Rig, RigFor
from tests.integration.waiting import wait_for
from vk_devtools.demo.load import LoadGenerator, LoadSettings, Outcome, failures, share_by, window
from vk_provider.kit import procfs
from vk_provider.kit.backoff import jittered_backoff_seconds
from vk_provider.kit.kube import KubeApi, RawObject
from vk_provider.node.leadership import lease_name

pytestmark = pytest.mark.usefixtures("traffic_rbac")

STRATEGY = {"stepIntervalSeconds": 3, "toAwaySteps": [100], "gates": {"minRequestsPerInterval": 20}}
AWAY_SETTINGS = {"lease_renew_interval_seconds": 2.0}
RATE = 40.0
TAKEOVER_LIMIT_SECONDS = 12.0
"""6 s lease + 1 s retry + the time a poll takes to see the change + start-up, with room for a busy CI."""
Replica = NodeDaemon | NodeReplica


def load(rig: Rig) -> LoadGenerator:
    return LoadGenerator(
        LoadSettings(url=rig.router_url, host_header=rig.host, rate=RATE, stream_share=0.3, stream_tokens=4)
    )


def describe(outcomes: list[Outcome]) -> str:
    return "\n".join(
        f"{o.kind} status={o.status} by={o.served_by} failure={o.failure}" for o in outcomes[:10]
    )


class NodeLog:
    """Every Ready status the away Node showed, and every away pod that was ever not Ready, from watches."""

    def __init__(self, api: KubeApi, rig: Rig) -> None:
        self._api = api
        self._rig = rig
        self.node_ready: list[str] = []
        self.unready_pods: list[str] = []
        self.pods_settled = False
        """Set once the away pods have started: from then on none may be seen not Ready."""

    async def follow_node(self) -> None:
        await self._follow(
            "/api/v1/nodes", {"fieldSelector": f"metadata.name={self._rig.away.node_name}"}, self._node
        )

    async def follow_pods(self) -> None:
        path = f"/api/v1/namespaces/{self._rig.namespace}/pods"
        await self._follow(path, {"fieldSelector": f"spec.nodeName={self._rig.away.node_name}"}, self._pod)

    async def _follow(self, path: str, query: dict[str, str], record: Any) -> None:
        broken = 0
        while True:
            try:
                async for event in self._api.watch(path, query=query, timeout_seconds=60):
                    if event.type != "BOOKMARK":
                        record(event.type, event.object)
                    broken = 0
            except Exception:  # the watch broke: watch again after a backoff, never spinning
                broken += 1
                await asyncio.sleep(jittered_backoff_seconds(broken, initial_seconds=0.2, max_seconds=2))

    def _node(self, kind: str, node: RawObject) -> None:
        status = condition(node, "Ready")
        if not self.node_ready or self.node_ready[-1] != status:
            self.node_ready.append(status)

    def _pod(self, kind: str, pod: RawObject) -> None:
        running = (pod.get("status") or {}).get("phase") == "Running"
        deleting = pod["metadata"].get("deletionTimestamp") is not None
        settled = self.pods_settled and kind != "DELETED" and running and not deleting
        if settled and condition(pod, "Ready") != "True":
            self.unready_pods.append(f"{pod['metadata']['name']}: {pod['status'].get('conditions')}")


def condition(thing: RawObject, kind: str) -> str:
    conditions = (thing.get("status") or {}).get("conditions") or []
    return next((c.get("status", "?") for c in conditions if c.get("type") == kind), "absent")


@contextlib.asynccontextmanager
async def following(rig: Rig) -> AsyncIterator[NodeLog]:
    log = NodeLog(rig.api, rig)
    tasks = [asyncio.create_task(log.follow_node()), asyncio.create_task(log.follow_pods())]
    try:
        yield log
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@pytest.fixture
async def away_rig(rig_for: RigFor) -> AsyncIterator[Rig]:
    async with rig_for(STRATEGY, away_settings=AWAY_SETTINGS) as rig:
        yield rig


async def lease_holder(rig: Rig) -> str | None:
    lease = await rig.api.get(
        f"/apis/coordination.k8s.io/v1/namespaces/default/leases/{lease_name(rig.away.node_name)}"
    )
    holder: str | None = (lease.get("spec") or {}).get("holderIdentity")
    return holder


async def kubelet_port(rig: Rig) -> int:
    node = await rig.api.get(f"/api/v1/nodes/{rig.away.node_name}")
    port: int = node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
    return port


def current_log(process: ManagedProcess) -> str:
    """The log of the process's latest start only."""
    return process.log_path.read_text().rsplit(f"--- start {process.starts} ---", 1)[-1]


async def start_standby(rig: Rig, replica: Replica) -> None:
    """Start a replica and wait until it waits on the Lease (the leader stays who it was)."""
    leader = await lease_holder(rig)
    replica.start()

    async def standing_by() -> bool:
        if not ManagedProcess.alive(replica):
            raise AssertionError(f"the replica exited:\n{replica.log_tail()}")
        return "waits for the leader Lease" in current_log(replica)

    await wait_for(standing_by, timeout_seconds=60, what=f"{replica.identity} to stand by")
    assert await lease_holder(rig) == leader
    assert "this replica leads" not in current_log(replica)


async def takeover(rig: Rig, leader: Replica, successors: list[Replica], *, since: float) -> dict[str, Any]:
    """Wait until one of `successors` has taken the node over (the Lease, the Node's port, Ready and
    its workloads adopted); return who and when."""
    identities = {replica.identity: replica for replica in successors}
    measured: dict[str, Any] = {}

    async def taken_over() -> bool:
        if not measured.get("lease"):
            holder = await lease_holder(rig)
            if holder in identities:
                measured.update(lease=time.monotonic() - since, successor=identities[holder])
        successor = measured.get("successor")
        if successor is None:
            return False
        if not measured.get("port") and await kubelet_port(rig) == successor.kubelet_port:
            measured["port"] = time.monotonic() - since
        took = re.search(r"took over in ([0-9.]+)s", current_log(successor))
        if took and measured.get("port"):
            measured["start_up"] = float(took.group(1))
            measured["ready"] = time.monotonic() - since
            return True
        return False

    await wait_for(
        taken_over,
        timeout_seconds=60,
        what=f"a standby to take over from {leader.identity}",
    )
    return measured


def away_workloads(rig: Rig, pods: list[RawObject]) -> dict[str, list[int]]:
    """Each away pod's live processes (the local provider runs each container as one)."""
    return {
        pod["metadata"]["name"]: procfs.processes_with_environment("POD_NAME", pod["metadata"]["name"])
        for pod in pods
    }


def provider_records(rig: Rig) -> set[str]:
    """The pod UIDs the away node's local provider keeps a workload record for."""
    pods = rig.away.folder / "state" / "provider" / "pods"
    return {entry.name for entry in pods.iterdir() if (entry / "pod.json").exists()}


async def away_pods(rig: Rig) -> list[RawObject]:
    listing = await rig.api.get(
        f"/api/v1/namespaces/{rig.namespace}/pods",
        query={"fieldSelector": f"spec.nodeName={rig.away.node_name}"},
    )
    items: list[RawObject] = listing.get("items") or []
    return items


async def all_away(rig: Rig, generator: LoadGenerator) -> tuple[list[RawObject], dict[str, list[int]]]:
    """Flip to away under the running load; return the away pods and their processes once settled."""
    await rig.patch_offload({"spec": {"placement": "away"}})
    done = await rig.wait_for_phase("Succeeded", "RolledBack", "Failed", timeout_seconds=240)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    assert (await rig.deployment(NAME))["spec"]["replicas"] == 0  # home at 0: only away serves
    pods = await away_pods(rig)
    assert pods
    assert all(condition(pod, "Ready") == "True" for pod in pods)

    async def home_drained() -> bool:
        listing = await rig.api.get(
            f"/api/v1/namespaces/{rig.namespace}/pods",
            query={"fieldSelector": f"spec.nodeName={rig.home.node_name}"},
        )
        return not listing.get("items")

    await wait_for(home_drained, timeout_seconds=90, what="the home pods to be gone")
    return pods, away_workloads(rig, pods)


def timings(measured: dict[str, Any]) -> str:
    return (
        f"Lease taken {measured['lease']:.1f}s, Node port {measured['port']:.1f}s, "
        f"Ready with workloads adopted {measured['ready']:.1f}s (start-up {measured['start_up']:.2f}s)"
    )


async def keep_serving(generator: LoadGenerator, since: str) -> None:
    """Wait for five more seconds' worth of requests to complete (on a condition, not a sleep)."""
    served = len(generator.outcomes)

    async def more() -> bool:
        return len(generator.outcomes) >= served + 5 * RATE

    await wait_for(more, timeout_seconds=60, what=f"more requests served after {since}")


def assert_nothing_duplicated_or_lost(
    rig: Rig, pods: list[RawObject], processes: dict[str, list[int]], after: list[RawObject]
) -> None:
    assert sorted(pod["metadata"]["uid"] for pod in after) == sorted(pod["metadata"]["uid"] for pod in pods)
    assert all(condition(pod, "Ready") == "True" for pod in after)
    # The same processes: adopted, neither started a second time nor stopped as orphans.
    assert away_workloads(rig, after) == processes
    assert all(len(pids) >= 1 for pids in processes.values()), processes
    assert provider_records(rig) == {pod["metadata"]["uid"] for pod in pods}


async def test_kill_9_of_the_leading_node_daemon_twice_fails_no_request(away_rig: Rig) -> None:
    rig = away_rig
    first, second = rig.away, rig.away.add_replica()
    await start_standby(rig, second)
    assert await lease_holder(rig) == first.identity
    async with following(rig) as log, load(rig) as generator:
        pods, processes = await all_away(rig, generator)
        log.pods_settled, all_away_at = True, time.monotonic()
        measured = []
        for leader, standby in ((first, second), (second, first)):
            killed_at = time.monotonic()
            leader.kill()
            measured.append(await takeover(rig, leader, [standby], since=killed_at))
            assert measured[-1]["successor"] is standby
            await start_standby(rig, leader)  # the killed one comes back, as its Deployment would
        # Load keeps flowing a while after the second takeover, served by the adopted workloads.
        await keep_serving(generator, "the takeovers")
        await generator.stop()
        after = await away_pods(rig)
    outcomes = generator.outcomes
    report = [f"kill -9 #{number}: {timings(m)} after the kill" for number, m in enumerate(measured, 1)]
    print(f"{len(outcomes)} requests, {len(failures(outcomes))} failed; " + "; ".join(report))
    assert not failures(outcomes), describe(failures(outcomes))
    assert share_by(window(outcomes, all_away_at, time.monotonic()), rig.side_of)["home"] == 0
    assert log.node_ready == ["True"], log.node_ready  # never NotReady, never Unknown
    assert log.unready_pods == [], log.unready_pods[:5]
    assert all(m["ready"] < TAKEOVER_LIMIT_SECONDS for m in measured), report
    assert_nothing_duplicated_or_lost(rig, pods, processes, after)


async def test_a_rolling_restart_of_the_node_replicas_fails_no_request(away_rig: Rig) -> None:
    """As a Deployment with maxSurge 1 and maxUnavailable 0: a new replica first, then an old one stops."""
    rig = away_rig
    old: list[Replica] = [rig.away, rig.away.add_replica()]
    await start_standby(rig, old[1])
    async with following(rig) as log, load(rig) as generator:
        pods, processes = await all_away(rig, generator)
        log.pods_settled, all_away_at = True, time.monotonic()
        running: list[Replica] = list(old)
        measured = []
        for stopping in old:
            new = rig.away.add_replica()
            await start_standby(rig, new)
            running.append(new)
            running.remove(stopping)
            leading = await lease_holder(rig) == stopping.identity
            stopped_at = time.monotonic()
            assert ManagedProcess.stop(stopping) == 0, stopping.log_tail()
            if leading:
                measured.append(await takeover(rig, stopping, running, since=stopped_at))
            assert "released" in current_log(stopping) or not leading
        await keep_serving(generator, "the rolling restart")
        await generator.stop()
        after = await away_pods(rig)
    outcomes = generator.outcomes
    report = [f"graceful takeover: {timings(m)} after SIGTERM" for m in measured]
    print(f"{len(outcomes)} requests, {len(failures(outcomes))} failed; " + "; ".join(report))
    assert not failures(outcomes), describe(failures(outcomes))
    assert len(measured) >= 1  # the first leader was stopped: someone took over
    assert share_by(window(outcomes, all_away_at, time.monotonic()), rig.side_of)["home"] == 0
    assert log.node_ready == ["True"], log.node_ready
    assert log.unready_pods == [], log.unready_pods[:5]
    # A released Lease is taken at the standby's next retry (1 s), not after the lease duration (6 s).
    assert all(m["lease"] < 3.0 for m in measured), report
    assert_nothing_duplicated_or_lost(rig, pods, processes, after)
