"""Kueue v0.17.0 (built from our pinned module) queues training; our AdmissionCheck holds it until the
policy has moved inference out of the home GPUs, then lets the whole gang start at once.

Kueue runs once for this module (fixture `kueue`), as a process against the shared plane, with its
webhooks scoped to namespaces labelled `kueue.vk-provider.dev/managed=true`: only this module's
namespaces carry the label, so other tests' Jobs never reach Kueue's webhooks, even while Kueue is
restarting. Every test here is in the policy tests' xdist group (one worker runs them, one after the
other): they run policy controllers, share the Kueue process, and one of them restarts it.
Everything cluster-scoped a test creates (ResourceFlavor, ClusterQueue, AdmissionCheck, OffloadPolicy,
nodes) is named after the test's tag.

The rig is the policy tests' (`test_policy.policy_rig`): two `local` home nodes of 4 GPUs, an away node,
token-server services at 1 GPU per home replica, their Offloads, the router, the controller.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import POLICY_GROUP
from tests.integration.gangs import working_for
from tests.integration.test_policy import (
    FAST_TIMING,
    GPU,
    PolicyRig,
    host_of,
    job_pods,
    policy_rig,
    wait_for_placement,
)
from tests.integration.waiting import wait_for
from vk_devtools.demo.load import LoadGenerator, failures
from vk_devtools.devcluster import cluster, kueue, processes
from vk_devtools.devcluster import restart as restarting
from vk_provider.kit.kube import MERGE_PATCH, KubeApiError, RawObject
from vk_provider.kit.timestamps import parse_timestamp
from vk_provider.policy.actuate import POLICY_FLIPS_ANNOTATION
from vk_provider.policy.admission.names import CONTROLLER_NAME, admission_checks_path, workloads_path
from vk_provider.policy.names import RESERVED_TAINT_KEY, RESERVED_TAINT_VALUE

pytestmark = [
    # The policy tests' serial group, not a group of its own: every test here runs a policy controller,
    # and a policy controller acts on every OffloadPolicy, so these must not run beside the policy
    # tests. One worker runs them all, which is also what the one Kueue process (restarted by one test)
    # needs.
    POLICY_GROUP,
    pytest.mark.integration,
    pytest.mark.usefixtures("policy_crd"),
]

KUEUE_API = "/apis/kueue.x-k8s.io/v1beta2"
QUEUE = "training"


@dataclasses.dataclass
class KueueProcess:
    """Kueue as the plane's state records it (a component `dev status` lists)."""

    directory: Path

    def record(self) -> processes.ProcessRecord:
        state = cluster.ClusterState.load(self.directory)
        record = state.record(kueue.COMPONENT) if state is not None else None
        assert record is not None, f"no Kueue recorded in {self.directory}"
        return record

    def restart(self) -> None:
        """Stop Kueue and start it again as it was started, as `dev restart kueue` does; until ready."""
        state = cluster.ClusterState.load(self.directory)
        assert state is not None
        restarting.restart(state, kueue.COMPONENT, timeout_seconds=kueue.READY_TIMEOUT_SECONDS)

    def log_tail(self) -> str:
        return processes.tail_of_file(Path(self.record().log), lines=30)


@pytest.fixture(scope="module")
def kueue_process(
    control_plane: cluster.ClusterState,
    policy_crd: None,
) -> Iterator[KueueProcess]:
    """Kueue built (cached) and running against the plane for this module's tests, recorded in the
    plane's state; one a reused plane already runs (`dev up --with-kueue`) is used and left running."""
    existing = control_plane.record(kueue.COMPONENT)
    ours = existing is None or not processes.is_running(existing)
    started = time.monotonic()
    kueue.add_to_plane(control_plane, out=sys.stderr)
    print(f"Kueue built, installed and ready in {time.monotonic() - started:.1f} s", file=sys.stderr)
    handle = KueueProcess(control_plane.directory)
    try:
        yield handle
    finally:
        if ours:
            # Dropped from the shared plane's state too: tests on other workers that look at the plane
            # after this module must find it fully running.
            kueue.remove_from_plane(control_plane)


@dataclasses.dataclass
class Queueing:
    """One test's Kueue objects: a flavor, a ClusterQueue using our check, a LocalQueue, the check."""

    rig: PolicyRig
    check: str
    cluster_queue: str
    flavor: str

    async def job(self, name: str, pods: int, seconds: float, *, gpus: int = 1) -> RawObject:
        """A queued training Job: no toleration, no node selector of its own (podSetUpdates add them).
        One that needs no GPU gets its own node selector (the pool), to stay off other tests' nodes."""
        resources = {"limits": {GPU: str(gpus)}} if gpus else {"requests": {"cpu": "10m"}}
        placement = {} if gpus else {"nodeSelector": self.rig.pool_label}
        body = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": QUEUE}},
            "spec": {
                "parallelism": pods,
                "completions": pods,
                "backoffLimit": 0,
                "suspend": True,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "priorityClassName": "training",
                        "terminationGracePeriodSeconds": 1,
                        **placement,
                        "containers": [
                            {
                                "name": "train",
                                "image": "local",
                                "command": working_for(seconds),
                                "resources": resources,
                            }
                        ],
                    }
                },
            },
        }
        return await self.rig.api.create(f"/apis/batch/v1/namespaces/{self.rig.namespace}/jobs", body)

    async def workload_of(self, job: str) -> RawObject | None:
        listing = await self.rig.api.get(workloads_path(self.rig.namespace))
        for item in listing.get("items") or ():
            if any(owner.get("name") == job for owner in item["metadata"].get("ownerReferences") or ()):
                return dict(item)
        return None

    async def check_state(self, job: str) -> dict[str, Any]:
        workload = await self.workload_of(job)
        entries = ((workload or {}).get("status") or {}).get("admissionChecks") or ()
        return next((dict(e) for e in entries if e["name"] == self.check), {})

    async def wait_for_check(self, job: str, state: str, timeout_seconds: float = 120) -> dict[str, Any]:
        last: dict[str, Any] = {}

        async def reached() -> dict[str, Any] | None:
            entry = await self.check_state(job)
            last.clear()
            last.update(entry)
            return entry if entry.get("state") == state else None

        return await wait_for(
            reached,
            timeout_seconds=timeout_seconds,
            what=lambda: f"check {state} on {job} (last seen: {last}):\n{self.rig.log()}",
        )


@contextlib.asynccontextmanager
async def queueing(
    rig: PolicyRig, *, quota: int = 16, check_parameters: str | None = None
) -> AsyncIterator[Queueing]:
    api, tag = rig.api, rig.tag
    await api.patch(
        f"/api/v1/namespaces/{rig.namespace}",
        {"metadata": {"labels": kueue.managed_namespace_labels()}},
        content_type=MERGE_PATCH,
    )
    names = Queueing(rig, check=f"gpu-reclaim-{tag}", cluster_queue=f"cq-{tag}", flavor=f"home-{tag}")
    policy = rig.policy_name if check_parameters is None else check_parameters
    created: list[str] = []
    try:
        await api.create(
            f"{KUEUE_API}/resourceflavors",
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ResourceFlavor",
                "metadata": {"name": names.flavor},
            },
        )
        created.append(f"{KUEUE_API}/resourceflavors/{names.flavor}")
        await api.create(
            admission_checks_path(),
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "AdmissionCheck",
                "metadata": {"name": names.check},
                "spec": {
                    "controllerName": CONTROLLER_NAME,
                    "parameters": {
                        "apiGroup": "offload.vk-provider.dev",
                        "kind": "OffloadPolicy",
                        "name": policy,
                    },
                },
            },
        )
        created.append(admission_checks_path(names.check))
        await api.create(
            f"{KUEUE_API}/clusterqueues",
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ClusterQueue",
                "metadata": {"name": names.cluster_queue},
                "spec": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": rig.namespace}},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu", GPU],
                            "flavors": [
                                {
                                    "name": names.flavor,
                                    "resources": [
                                        {"name": "cpu", "nominalQuota": "10"},
                                        {"name": GPU, "nominalQuota": quota},
                                    ],
                                }
                            ],
                        }
                    ],
                    "admissionChecksStrategy": {"admissionChecks": [{"name": names.check}]},
                },
            },
        )
        created.append(f"{KUEUE_API}/clusterqueues/{names.cluster_queue}")
        await api.create(
            f"{KUEUE_API}/namespaces/{rig.namespace}/localqueues",
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": QUEUE},
                "spec": {"clusterQueue": names.cluster_queue},
            },
        )
        yield names
    finally:
        with contextlib.suppress(KubeApiError):
            for item in (await api.get(f"/apis/batch/v1/namespaces/{rig.namespace}/jobs")).get("items") or ():
                await api.delete(
                    f"/apis/batch/v1/namespaces/{rig.namespace}/jobs/{item['metadata']['name']}",
                    {"propagationPolicy": "Background"},
                )
        for path in reversed(created):
            with contextlib.suppress(KubeApiError):
                await api.delete(path)


@contextlib.asynccontextmanager
async def chat_under_load_with_a_queue(
    rig_args: dict[str, Any],
) -> AsyncIterator[tuple[PolicyRig, Queueing, LoadGenerator]]:
    """Where the queued-training stories start: `chat` served on four home GPUs and under load, this
    test's queue behind our check, and the policy created."""
    async with (
        policy_rig(services={"chat": 4}, **rig_args) as rig,
        queueing(rig) as queue,
        rig.load(host_of("chat")) as generator,
    ):
        await rig.create_policy()
        await _whole_pool_counted(rig, busy=4)
        yield rig, queue, generator


async def _whole_pool_counted(rig: PolicyRig, *, busy: int) -> None:
    """Wait until the policy counts every pool GPU but the service's `busy` ones as free: a pool node
    it does not count yet (a transient taint of a node just registered) makes the whole pool look
    too small for a gang, and the check answers Retry, which Kueue honours for minutes."""

    async def counted() -> bool:
        pool = ((await rig.policy()).get("status") or {}).get("pool") or {}
        total = pool.get("total")
        return bool(total) and pool.get("free") == total - busy

    await wait_for(counted, timeout_seconds=60, what=lambda: f"the whole pool counted:\n{rig.log()}")


async def active_condition(api: Any, check: str) -> dict[str, Any]:
    raw = await api.get(admission_checks_path(check))
    return next(
        (dict(c) for c in (raw.get("status") or {}).get("conditions") or () if c["type"] == "Active"), {}
    )


def tolerates_reservation(pod: RawObject) -> bool:
    return any(
        t.get("key") == RESERVED_TAINT_KEY and t.get("value") == RESERVED_TAINT_VALUE
        for t in pod["spec"].get("tolerations") or ()
    )


async def gpu_shortage_events(rig: PolicyRig) -> list[RawObject]:
    listing = await rig.api.get(
        f"/api/v1/namespaces/{rig.namespace}/events", query={"fieldSelector": "reason=FailedScheduling"}
    )
    return [e for e in listing.get("items") or () if f"Insufficient {GPU}" in e.get("message", "")]


def flips(offload: RawObject) -> list[str]:
    return list(
        json.loads((offload["metadata"].get("annotations") or {}).get(POLICY_FLIPS_ANNOTATION) or "[]")
    )


async def test_a_queued_job_waits_on_our_check_while_inference_moves_out_then_starts_whole(
    rig_args: dict[str, Any],
    kueue_process: KueueProcess,
) -> None:
    async with chat_under_load_with_a_queue(rig_args) as (rig, queue, generator):
        await wait_for(
            lambda: _active(rig, queue.check), timeout_seconds=30, what=lambda: f"check Active:\n{rig.log()}"
        )
        queued = time.monotonic()
        await queue.job("pretrain", pods=6, seconds=20)
        await queue.wait_for_check("pretrain", "Pending", timeout_seconds=60)
        assert (await job_pods(rig, "pretrain")) == []  # suspended: quota, but no pod yet
        ready = await queue.wait_for_check("pretrain", "Ready", timeout_seconds=180)
        ready_after = time.monotonic() - queued
        # Ready only once the service has left the GPUs: its migration away is over (or finishing).
        chat = await rig.offload("chat")
        assert chat["spec"]["placement"] == "away"
        assert (chat.get("status") or {}).get("phase") in ("Finalizing", "Succeeded"), chat.get("status")
        assert ready["podSetUpdates"][0]["tolerations"][0]["key"] == RESERVED_TAINT_KEY
        ready_at = time.monotonic()

        async def all_bound() -> list[RawObject] | None:
            pods = await job_pods(rig, "pretrain")
            return pods if len(pods) == 6 and all(p["spec"].get("nodeName") for p in pods) else None

        pods = await wait_for(all_bound, timeout_seconds=60, what=lambda: f"all 6 pods bound:\n{rig.log()}")
        ready_time = parse_timestamp(ready["lastTransitionTime"])
        assert ready_time is not None
        # As the cluster recorded it (seconds): our Ready, then each pod's PodScheduled=True.
        scheduled = [
            parse_timestamp(c.get("lastTransitionTime"))
            for p in pods
            for c in (p.get("status") or {}).get("conditions") or ()
            if c["type"] == "PodScheduled" and c["status"] == "True"
        ]
        assert len(scheduled) == 6, [p.get("status") for p in pods]
        bound_after_ready = max((moment - ready_time).total_seconds() for moment in scheduled if moment)
        assert bound_after_ready < 30, (ready_time, scheduled, time.monotonic() - ready_at)
        assert {p["spec"]["nodeName"] for p in pods} <= {n.node_name for n in rig.pool}
        assert all(tolerates_reservation(p) for p in pods), [p["spec"].get("tolerations") for p in pods]
        assert all(p["spec"].get("nodeSelector") == rig.pool_label for p in pods)
        created = [parse_timestamp(p["metadata"]["creationTimestamp"]) for p in pods]
        assert all(moment is not None and moment >= ready_time for moment in created), (ready_time, created)
        assert await gpu_shortage_events(rig) == []

        # The Job ends: the Workload finishes, demand is gone, the service comes home.
        await wait_for_placement(rig, "chat", "home", timeout_seconds=180)
        await generator.stop()
        failed = failures(generator.outcomes)
        assert not failed, [(o.kind, o.status, o.failure) for o in failed[:10]]
        assert len(flips(await rig.offload("chat"))) == 2  # out once, home once
        print(
            f"queued Job -> check Ready {ready_after:.1f} s; "
            f"Ready -> all 6 pods bound {bound_after_ready:.1f} s; "
            f"{len(generator.outcomes)} requests, {len(failed)} failed"
        )


async def _active(rig: PolicyRig, check: str) -> bool:
    return (await active_condition(rig.api, check)).get("status") == "True"


async def test_impossible_or_uncoverable_demand_is_retried_with_the_shortfall_and_bad_input_is_reported(
    rig_args: dict[str, Any],
    kueue_process: KueueProcess,
) -> None:
    async with policy_rig(services={"chat": 2}, **rig_args) as rig, queueing(rig, quota=32) as queue:
        # The service may not move (auto off): a gang that needs its GPUs can only wait, then Retry.
        await rig.api.patch(
            rig.offload_path("chat"),
            {"metadata": {"annotations": {"offload.vk-provider.dev/auto": "off"}}},
            content_type=MERGE_PATCH,
        )
        await rig.create_policy(timing={**FAST_TIMING, "admissionRetryAfterSeconds": 6})
        await queue.job("huge", pods=12, seconds=5)  # more than the 8 GPUs of the pool
        await queue.job("blocked", pods=7, seconds=5)  # 6 free, the other 2 held by chat
        await queue.job("cpu-only", pods=1, seconds=1, gpus=0)
        huge, blocked, cpu_only = await asyncio.gather(
            queue.wait_for_check("huge", "Retry", timeout_seconds=60),
            queue.wait_for_check("blocked", "Retry", timeout_seconds=60),
            queue.wait_for_check("cpu-only", "Ready", timeout_seconds=60),
        )
        assert "needs 12 nvidia.com/gpu, more than the 8 of the usable home pool (short 4)" in huge["message"]
        assert "for 7 nvidia.com/gpu; 6 free on healthy home nodes (short 1)" in blocked["message"], blocked
        assert cpu_only.get("podSetUpdates") in (None, [])
        chat = await rig.offload("chat")
        assert chat["spec"]["placement"] == "home"
        assert flips(chat) == []
        assert await rig.events("FlipOutStarted", "OffloadPolicy") == []

        # Bad input: a check naming a policy that does not exist is inactive, with the reason.
        orphan = f"orphan-{rig.tag}"
        await rig.api.create(
            admission_checks_path(),
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "AdmissionCheck",
                "metadata": {"name": orphan},
                "spec": {
                    "controllerName": CONTROLLER_NAME,
                    "parameters": {
                        "apiGroup": "offload.vk-provider.dev",
                        "kind": "OffloadPolicy",
                        "name": "nope",
                    },
                },
            },
        )
        try:

            async def inactive() -> dict[str, Any] | None:
                condition = await active_condition(rig.api, orphan)
                return condition if condition.get("status") == "False" else None

            condition = await wait_for(
                inactive, timeout_seconds=30, what=lambda: f"orphan check inactive:\n{rig.log()}"
            )
            assert condition["reason"] == "UnknownPolicy"
            assert "no OffloadPolicy named 'nope'" in condition["message"]
        finally:
            with contextlib.suppress(KubeApiError):
                await rig.api.delete(admission_checks_path(orphan))

        # A Workload whose pod set asks for half a GPU: rejected with the reason, nothing crashes.
        await rig.api.create(
            workloads_path(rig.namespace),
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Workload",
                "metadata": {"name": "half-gpu"},
                "spec": {
                    "queueName": QUEUE,
                    "podSets": [
                        {
                            "name": "main",
                            "count": 1,
                            "template": {
                                "spec": {
                                    "restartPolicy": "Never",
                                    "containers": [
                                        {
                                            "name": "c",
                                            "image": "local",
                                            "resources": {"requests": {GPU: "500m"}},
                                        }
                                    ],
                                }
                            },
                        }
                    ],
                },
            },
        )

        async def rejected() -> dict[str, Any] | None:
            workload = await rig.api.get(workloads_path(rig.namespace, "half-gpu"))
            entries = (workload.get("status") or {}).get("admissionChecks") or ()
            return next((e for e in entries if e["name"] == queue.check and e["state"] == "Rejected"), None)

        entry = await wait_for(rejected, timeout_seconds=60, what=lambda: f"half-gpu Rejected:\n{rig.log()}")
        assert "not a whole number" in entry["message"]
        assert rig.controller.alive()


async def test_kueue_restarted_and_controller_killed_mid_way_end_ready_without_a_double_flip(
    rig_args: dict[str, Any],
    kueue_process: KueueProcess,
) -> None:
    async with chat_under_load_with_a_queue(rig_args) as (rig, queue, generator):
        await queue.job("pretrain", pods=6, seconds=10)

        async def moving() -> bool:
            offload = await rig.offload("chat")
            # Events are written after the flip, in the background: kill only once it is out.
            started = await rig.events("FlipOutStarted", "OffloadPolicy")
            return bool(offload["spec"]["placement"] == "away") and bool(started)

        await wait_for(moving, timeout_seconds=90, what=lambda: f"chat flipped away:\n{rig.log()}")
        # Mid-way: the flip is written, the check still Pending. Both controllers go down.
        rig.controller.kill()
        processes.stop(kueue_process.record())
        # Kueue is down: its webhooks fail closed in its own namespaces and never touch another's Jobs.
        probe = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"generateName": "probe-"}, "spec": {
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "local"}]}}
        }}  # fmt: skip
        await rig.api.request(
            "POST", "/apis/batch/v1/namespaces/default/jobs", query={"dryRun": "All"}, body=probe
        )
        with pytest.raises(KubeApiError) as refused:
            await rig.api.request(
                "POST", f"/apis/batch/v1/namespaces/{rig.namespace}/jobs", query={"dryRun": "All"}, body=probe
            )
        assert "webhook" in refused.value.message, refused.value.message
        await asyncio.to_thread(kueue_process.restart)
        rig.controller.start()
        await queue.wait_for_check("pretrain", "Ready", timeout_seconds=180)

        async def all_bound() -> bool:
            pods = await job_pods(rig, "pretrain")
            return len(pods) == 6 and all(p["spec"].get("nodeName") for p in pods)

        await wait_for(all_bound, timeout_seconds=60, what=f"all 6 pods bound:\n{kueue_process.log_tail()}")
        chat = await rig.offload("chat")
        assert len(flips(chat)) == 1, chat["metadata"].get("annotations")
        assert len(await rig.events("FlipOutStarted", "OffloadPolicy")) == 1
        await generator.stop()
        assert not failures(generator.outcomes)
