"""The controller keeps the site up when parts fail: a severe gate, a lost serving side, a deleted Offload.

Same rig as the migration tests (two `local` nodes, the token service, router and controller as real
processes on the real control plane), with load through the router. Each test prints what it
measured (shown with `pytest -rP`): failed requests, seconds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from typing import Any

import aiohttp
import pytest

from tests.integration.conftest import Kubectl
from tests.integration.daemons import processes_with_argument
from tests.integration.migration_rig import (
    API,
    NAME,
    Rig,
    RigFor,
    create_offloaded_service,
    token_server_template,
)
from tests.integration.test_migration import describe, flip, following, load
from tests.integration.waiting import wait_for
from vk_devtools.demo.load import Outcome, failures, share_by
from vk_devtools.devcluster.ports import PortPicker
from vk_provider.kit.kube import MERGE_PATCH, KubeApiError
from vk_provider.offload.names import FINALIZER, OFFLOAD_LABEL

pytestmark = pytest.mark.usefixtures("traffic_rbac")


def workload_processes(rig: Rig, node_name: str) -> list[int]:
    """The token servers running for `node_name`'s pods (each names its node's fail file)."""
    return processes_with_argument(f"{rig.fail_dir}/{node_name}.fail")


def condition(status: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in status.get("conditions") or () if c["type"] == kind), None)


async def restart_controller_with_metrics(rig: Rig) -> str:
    """Restart the controller serving /metrics; the graceful stop hands the Lease over at once."""
    port = PortPicker().pick()
    rig.controller.stop()
    rig.controller.arguments = [*rig.controller.arguments, "--admin-listen", f"127.0.0.1:{port}"]
    rig.controller.start()
    return f"http://127.0.0.1:{port}/metrics"


async def metric_value(url: str, name: str) -> float:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        text = await response.text()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{"))


def recovery_times(outcomes: list[Outcome], since: float) -> tuple[float, float, int]:
    """(seconds to the first success after the first failure, to the last failure, failures) after `since`."""
    after = sorted((o for o in outcomes if o.start >= since), key=lambda o: o.start)
    failed = [o for o in after if not o.ok]
    if not failed:
        return 0.0, 0.0, 0
    first_failure = failed[0].start
    first_success = next(o.start for o in after if o.ok and o.start > first_failure)
    return first_success - since, failed[-1].start - since, len(failed)


async def test_a_severe_failure_at_weight_50_rolls_back_within_one_short_window(rig_for: RigFor) -> None:
    strategy = {
        "stepIntervalSeconds": 20,  # the tolerant path alone would take 3 x 20 s
        "toAwaySteps": [50, 100],
        "failuresBeforeRollback": 3,
        "gates": {"minRequestsPerInterval": 20, "severe": {"windowSeconds": 3}},
    }
    async with rig_for(strategy) as rig, following(rig) as log, load(rig, rate=60) as generator:
        (rig.fail_dir / f"{rig.away.node_name}.fail").touch()  # the away side will answer 500s
        out = await flip(rig, "away", timeout_seconds=180)
        await generator.stop()
        events = await rig.events("SevereFailure")
    status = out["status"]
    assert status["phase"] == "RolledBack", status
    assert status["outcomeReason"] == "SevereFailure"
    assert status["awayWeight"] == 0
    assert status["lastCheck"]["verdict"] == "Severe"
    assert events
    weights = [weight for _, weight in log.changes]
    assert weights == [0, 50, 0], weights
    at_50, back = log.changes[1][0], log.changes[2][0]
    failed = failures(generator.outcomes)
    assert failed, "the away side was meant to fail"
    assert all(rig.side_of(o.served_by) == "away" for o in failed), describe(failed)
    # One window (3 s) after the routers apply 50, plus their propagation: far below one interval.
    assert back - at_50 < 10, back - at_50
    print(f"severe rollback: weight 50 held {back - at_50:.1f}s; {len(failed)} failed requests")


async def test_lost_away_workloads_bring_home_back_without_a_person(rig_for: RigFor) -> None:
    strategy = {
        "stepIntervalSeconds": 3,
        "toAwaySteps": [100],
        "gates": {"minRequestsPerInterval": 10},
        "emergency": {"graceSeconds": 30},  # the default, written out: the recovery time depends on it
    }
    async with rig_for(strategy) as rig, load(rig, rate=40) as generator:
        metrics_url = await restart_controller_with_metrics(rig)
        assert (await flip(rig, "away"))["status"]["phase"] == "Succeeded"
        assert (await rig.deployment(NAME))["spec"]["replicas"] == 0  # home at 0: nothing to fall back on
        away = await rig.deployment(f"{NAME}-away")
        assert "ownerReferences" not in away["metadata"]
        victims = workload_processes(rig, rig.away.node_name)
        assert victims, "no away workload found"
        killed_at = time.monotonic()
        rig.away.kill()  # the node daemon: nobody reports or restarts the workloads
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

        async def home_serves() -> dict[str, Any] | None:
            status: dict[str, Any] = (await rig.offload()).get("status") or {}
            done = status.get("outcomeReason") == "EmergencyMigration" and status.get("phase") == "Succeeded"
            recent = [o for o in generator.outcomes if o.start > time.monotonic() - 3]
            steady = len(recent) >= 60 and all(o.ok for o in recent)
            return status if done and steady else None

        status = await wait_for(
            home_serves,
            timeout_seconds=180,
            what=f"an emergency migration home; controller log:\n{rig.controller.log_tail(40)}",
        )
        assert status is not None
        assert status["awayWeight"] == 0
        assert status["targetPlacement"] == "home"
        degraded = condition(status, "Degraded")
        assert degraded is not None
        assert (degraded["status"], degraded["reason"]) == ("True", "EmergencyMigration")
        assert (await rig.deployment(NAME))["spec"]["replicas"] == 2
        assert await rig.events("EmergencyMigration")
        assert await metric_value(metrics_url, "vk_provider_controller_emergency_migrations_total") == 1
        offload = await rig.offload()
        assert offload["spec"]["placement"] == "away"  # the user's wish is kept, for when away is back
        # The away node comes back and restarts its workloads: once every router has seen them ready
        # for the grace period, a normal gated migration takes traffic back away.
        returned_at = time.monotonic()
        rig.away.start()

        async def back_away() -> dict[str, Any] | None:
            status: dict[str, Any] = (await rig.offload()).get("status") or {}
            degraded = condition(status, "Degraded") or {}
            done = (status.get("phase"), status.get("targetPlacement"), status.get("awayWeight")) == (
                "Succeeded",
                "away",
                100,
            )
            return status if done and degraded.get("reason") == "Recovered" else None

        await wait_for(
            back_away, timeout_seconds=240, what=f"the way back away; {rig.controller.log_tail(30)}"
        )
        await generator.stop()
        assert await rig.events("EmergencyOver")
        # The emergency migration home and the gated one back away, at least, each counted as it ended.
        assert await metric_value(metrics_url, "vk_provider_controller_migrations_ended_total") >= 2
        assert (await rig.deployment(NAME))["spec"]["replicas"] == 0

        async def home_pods_gone() -> bool:  # so that the rig's teardown finds nothing terminating
            pods = await rig.api.get(
                f"/api/v1/namespaces/{rig.namespace}/pods", query={"labelSelector": "app=chat"}
            )
            return not pods["items"]

        await wait_for(home_pods_gone, timeout_seconds=60, what="the home pods to stop again")
    first_success, steady, failed = recovery_times(
        [o for o in generator.outcomes if o.start < returned_at], killed_at
    )
    late = [o for o in generator.outcomes if killed_at + steady + 0.001 < o.start < returned_at]
    assert late
    assert all(o.ok and rig.side_of(o.served_by) == "home" for o in late)
    after = [o for o in generator.outcomes if o.start >= returned_at]
    assert not failures(after), describe(failures(after))
    assert share_by(after, rig.side_of)["away"] > 0
    print(
        f"away workloads killed: first success after {first_success:.1f}s, steady 100% success after "
        f"{steady:.1f}s, {failed} failed requests meanwhile (grace 30 s); back away after the node "
        f"returned: {len(after)} requests, 0 failed"
    )


async def test_deleting_an_offload_while_away_moves_home_first_and_drops_nothing(
    rig_for: RigFor, kubectl: Kubectl
) -> None:
    strategy = {
        "stepIntervalSeconds": 3,
        "toAwaySteps": [100],
        "toHomeSteps": [50, 100],
        "gates": {"minRequestsPerInterval": 10},
    }
    async with rig_for(strategy) as rig:
        reasons: list[str] = []
        home_at: list[float] = []
        async with load(rig, rate=40) as generator:
            assert (await flip(rig, "away"))["status"]["phase"] == "Succeeded"
            offload = await rig.offload()
            assert FINALIZER in offload["metadata"]["finalizers"]
            # An away Deployment made by an earlier controller was owned by its Offload (the garbage
            # collector would delete it with the Offload, serving or not): the controller drops that.
            metadata = offload["metadata"]
            owner = {
                "apiVersion": offload["apiVersion"],
                "kind": "Offload",
                "name": NAME,
                "uid": metadata["uid"],
            }
            await rig.api.patch(
                f"/apis/apps/v1/namespaces/{rig.namespace}/deployments/{NAME}-away",
                {"metadata": {"ownerReferences": [owner]}},
                content_type=MERGE_PATCH,
            )

            async def unowned() -> bool:
                return "ownerReferences" not in (await rig.deployment(f"{NAME}-away"))["metadata"]

            await wait_for(unowned, timeout_seconds=30, what="the away Deployment's owner to be dropped")
            started = time.monotonic()
            kubectl("delete", "offload", NAME, "-n", rig.namespace, "--wait=false")
            returned_after = time.monotonic() - started

            async def gone() -> bool:
                try:
                    status = (await rig.offload()).get("status") or {}
                except KubeApiError as error:
                    if error.not_found:
                        return True
                    raise
                if status.get("awayWeight") == 0 and not home_at:
                    home_at.append(time.monotonic())
                deleting = condition(status, "Deleting")
                if deleting is not None and (not reasons or reasons[-1] != deleting["reason"]):
                    reasons.append(deleting["reason"])
                return False

            await wait_for(
                gone, timeout_seconds=180, what=f"the Offload to go; {rig.controller.log_tail(30)}"
            )
            gone_at = time.monotonic()

            async def a_minute_after_it_went() -> bool:
                return any(o.start >= gone_at + 60 for o in generator.outcomes)

            # The route outlives the Offload: the load goes on through the router for a minute more.
            await wait_for(a_minute_after_it_went, timeout_seconds=90, what="load 60 s past the Offload")
            await generator.stop()
        assert returned_after < 5, returned_after
        # Nothing failed: not while traffic moved home, not when the Offload went, not after.
        assert home_at, reasons
        failed = failures(generator.outcomes)
        assert not failed, describe(failed)
        after = [o for o in generator.outcomes if o.start >= gone_at]
        assert len(after) > 60 * 40 * 0.9, len(after)
        assert {rig.side_of(o.served_by) for o in after} == {"home"}
        assert reasons[:1] == ["MigratingHome"], reasons
        # The route is kept (a KeptRoute, owned by the home Service) until an operator deletes it;
        # then the router lets the host go (404), as it does for any host no route names.
        kept = await rig.api.get(f"{API}/namespaces/{rig.namespace}/keptroutes/{NAME}")
        assert (kept["spec"]["service"], kept["spec"]["hosts"]) == (NAME, [rig.host]), kept
        assert kept["spec"]["claimedSince"] == metadata["creationTimestamp"], kept
        assert [owner["kind"] for owner in kept["metadata"]["ownerReferences"]] == ["Service"]
        await rig.api.delete(f"{API}/namespaces/{rig.namespace}/keptroutes/{NAME}")

        async def host_released() -> bool:
            async with (
                aiohttp.ClientSession() as session,
                session.get(f"{rig.traffic_url}/", headers={"Host": rig.host}) as response,
            ):
                return response.status == 404

        await wait_for(host_released, timeout_seconds=30, what="the router to drop the removed route")
        # The service ends at home, straight through its pods; nothing is left away.
        home = await rig.deployment(NAME)
        assert (home["spec"]["replicas"], home["status"].get("readyReplicas")) == (2, 2)
        pods = await rig.api.get(
            f"/api/v1/namespaces/{rig.namespace}/pods", query={"labelSelector": "app=chat"}
        )
        addresses = [pod["status"]["podIP"] for pod in pods["items"]]
        async with aiohttp.ClientSession() as session:
            for address in addresses:
                async with session.get(f"http://{address}:8080/healthz") as response:
                    assert response.status == 200
        with pytest.raises(KubeApiError) as missing:
            await rig.deployment(f"{NAME}-away")
        assert missing.value.not_found
        away_pods = await rig.api.get(
            f"/api/v1/namespaces/{rig.namespace}/pods", query={"labelSelector": f"{OFFLOAD_LABEL}={NAME}"}
        )
        assert away_pods["items"] == []
        assert workload_processes(rig, rig.away.node_name) == []
        with pytest.raises(KubeApiError):
            await rig.api.get(f"{API}/namespaces/{rig.namespace}/offloads/{NAME}")
    print(
        f"deleted while away: kubectl returned in {returned_after:.1f}s; Offload gone after "
        f"{gone_at - started:.1f}s; {len(generator.outcomes)} requests, {len(after)} of them in the "
        f"60 s after it was gone, 0 failed; Deleting reasons {reasons}"
    )


async def test_a_controller_restarted_under_its_identity_takes_its_lease_back_at_once(
    rig_for: RigFor,
) -> None:
    """As the manifests run it (`--leader-election-identity` the pod's name): killed and started again,
    as a container restarted in its pod, it leads at once instead of waiting out the Lease it held
    (30 s here, to tell the two apart), and acts."""
    strategy = {"stepIntervalSeconds": 3, "toAwaySteps": [100], "gates": {"minRequestsPerInterval": 0}}
    async with rig_for(strategy) as rig:
        rig.controller.stop()  # releases the Lease: the next start leads at once anyway
        identity = [
            "--leader-election-identity",
            f"controller-of-{rig.namespace}",
            "--leader-election-lease-duration-seconds",
            "30",
        ]
        rig.controller.arguments = [*rig.controller.arguments, *identity]

        async def leads() -> bool:
            if not rig.controller.alive():
                raise AssertionError(f"the controller exited:\n{rig.controller.log_tail()}")
            this_start = rig.controller.log_path.read_text().rsplit("--- start ", 1)[-1]
            return " leads " in this_start

        rig.controller.start()
        await wait_for(leads, timeout_seconds=30, what=f"the controller to lead; {rig.controller.log_tail()}")
        rig.controller.kill()  # the Lease stays held, renewed a moment ago
        restarted_at = time.monotonic()
        rig.controller.start()
        await wait_for(leads, timeout_seconds=60, what=f"the restart to lead; {rig.controller.log_tail()}")
        took = time.monotonic() - restarted_at
        assert (await flip(rig, "away"))["status"]["phase"] == "Succeeded"
    assert took < 15, took  # generous: waiting out the Lease would take 30 s
    print(f"a controller restarted under its identity led after {took:.1f}s (Lease 30 s)")


LATE = "late"
"""A second Offload in the rig's namespace, created while its home pods cannot start yet."""


async def create_late_offload(rig: Rig, strategy: dict[str, Any]) -> None:
    """Deployment, Service and Offload `late`, its pods held Pending by a node selector no node has."""
    template = token_server_template(rig.home.config["labels"], rig.fail_dir)
    template["spec"]["nodeSelector"] = {"vk-provider.dev/role": "nowhere"}
    await create_offloaded_service(
        rig.api,
        rig.namespace,
        LATE,
        template,
        replicas=1,
        offload_spec={
            "route": {"hosts": [f"{LATE}.{rig.namespace}.test"]},
            "away": {"nodeSelector": rig.away.config["labels"]},
            "strategy": strategy,
        },
    )


async def remove_late_offload(rig: Rig) -> None:
    """The Offload (released by the controller, which serves nothing away), then its Deployment."""
    base = f"/namespaces/{rig.namespace}"
    with contextlib.suppress(KubeApiError):
        await rig.api.delete(f"{API}{base}/offloads/{LATE}")

    async def gone() -> bool:
        try:
            await rig.api.get(f"{API}{base}/offloads/{LATE}")
        except KubeApiError as error:
            return error.not_found
        return False

    await wait_for(gone, timeout_seconds=60, what=f"Offload {LATE} to go; {rig.controller.log_tail()}")
    deployments = f"/apis/apps/v1{base}/deployments"
    # The away one only if an emergency moved it (the bug this guards against): left, it keeps pods.
    for path in (f"{deployments}/{LATE}", f"{deployments}/{LATE}-away", f"/api/v1{base}/services/{LATE}"):
        with contextlib.suppress(KubeApiError):
            await rig.api.delete(path)


async def test_a_new_offload_whose_home_has_not_served_yet_is_neither_degraded_nor_moved(
    rig_for: RigFor,
) -> None:
    """A side never seen serving has not been lost: no ServingSideLost, no emergency migration (which
    would pay a provider for a service still starting), and once it serves, Degraded=False `Serving`,
    never `Recovered` for an Offload that never migrated."""
    strategy = {"stepIntervalSeconds": 3, "toAwaySteps": [100], "emergency": {"graceSeconds": 2}}
    async with rig_for(strategy) as rig:

        async def rig_serving() -> dict[str, Any] | None:
            found = condition((await rig.offload()).get("status") or {}, "Degraded")
            return None if found is None or found["reason"] == "NotServingYet" else found  # still starting

        degraded = await wait_for(rig_serving, timeout_seconds=60, what="the rig's Offload's Degraded")
        assert (degraded["status"], degraded["reason"]) == ("False", "Serving"), degraded
        seen: list[tuple[str, str]] = []

        async def late_degraded(reason: str) -> None:
            async def reached() -> bool:
                offload = await rig.api.get(f"{API}/namespaces/{rig.namespace}/offloads/{LATE}")
                found = condition(offload.get("status") or {}, "Degraded")
                if found is not None and (not seen or seen[-1] != (found["status"], found["reason"])):
                    seen.append((found["status"], found["reason"]))
                return found is not None and found["reason"] == reason

            try:
                await wait_for(reached, timeout_seconds=120, what=f"Degraded {reason} on {LATE}")
            except AssertionError as error:
                raise AssertionError(f"{error}; seen {seen}; {rig.controller.log_tail()}") from None

        await create_late_offload(rig, strategy)
        try:
            await late_degraded("NotServingYet")
            await rig.api.patch(
                f"/apis/apps/v1/namespaces/{rig.namespace}/deployments/{LATE}",
                {"spec": {"template": {"spec": {"nodeSelector": rig.home.config["labels"]}}}},
                content_type=MERGE_PATCH,
            )
            await late_degraded("Serving")
            status = (await rig.api.get(f"{API}/namespaces/{rig.namespace}/offloads/{LATE}"))["status"]
            emergencies = [
                e for e in await rig.events("EmergencyMigration") if e["involvedObject"]["name"] == LATE
            ]
        finally:
            await remove_late_offload(rig)
    assert seen == [("False", "NotServingYet"), ("False", "Serving")], seen
    assert (status["phase"], status["awayWeight"]) == ("Idle", 0)
    assert not emergencies
