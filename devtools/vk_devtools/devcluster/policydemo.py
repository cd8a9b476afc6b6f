"""The demo's automatic story: training arrives, the OffloadPolicy moves inference out and back.

Nobody runs `kubectl offload flip` here. A training gang that needs every GPU of the home node is
created (a PodGroup of minCount 8 and its Job): none of its pods is bound while the service holds
some of the GPUs, the PodGroup turns Unschedulable, the policy reads that as demand, moves the example
service to the burst node and reserves the home pool, and the scheduler admits the gang whole. When
the Job is done, the policy brings the service home step by step. Each stage is waited for on the
cluster's own objects and timed; the load generator counts failed requests throughout.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from vk_devtools.devcluster import cluster, gangs, traffic
from vk_provider.kit.kube import KubeApi, KubeApiError, RawObject, resource_path
from vk_provider.kit.timestamps import parse_timestamp
from vk_provider.offload.names import offload_path
from vk_provider.policy.podgroups import API_VERSION

JOB_NAME = "pretrain"
POLICY_NAME = "training-first"
STAGE_TIMEOUT_SECONDS = 300.0
POLL_SECONDS = 0.5
JOBS = "/apis/batch/v1/namespaces/default/jobs"
POD_GROUP = resource_path(API_VERSION, "podgroups", namespace="default", name=JOB_NAME)
"""The training Job's gang (manifests/examples/training-job.yaml names it after the Job)."""
PLURALS = {"Job": "jobs", "PodGroup": "podgroups"}
"""The kinds a training manifest may hold, by their REST names."""


class StageTimeout(Exception):
    """A stage of the story did not happen in time; the message says which and what was seen."""


@dataclass
class Timeline:
    """Seconds since the Job's creation at which each stage was seen."""

    created: float = 0.0
    marks: dict[str, float] = field(default_factory=dict)
    job_created_at: datetime | None = None
    """The Job's creationTimestamp as the API wrote it (whole seconds), to set its pods' times against."""

    def mark(self, stage: str) -> float:
        self.marks[stage] = time.monotonic() - self.created
        return self.marks[stage]


async def _until(
    probe: Callable[[], Awaitable[Any]], what: str, *, timeout_seconds: float = STAGE_TIMEOUT_SECONDS
) -> Any:
    """Poll `probe` until it returns something truthy; StageTimeout after `timeout_seconds`."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        result = await probe()
        if result:
            return result
        if time.monotonic() > deadline:
            raise StageTimeout(f"timed out after {timeout_seconds:.0f}s waiting for {what}")
        await asyncio.sleep(POLL_SECONDS)  # polling the API, the demo's own pace (noqa: sleep-ok)


def _phase(offload: RawObject) -> tuple[str, str]:
    status = offload.get("status") or {}
    return str(status.get("targetPlacement") or ""), str(status.get("phase") or "")


async def _settled(api: KubeApi, placement: str) -> bool:
    offload = await api.get(offload_path("default", traffic.EXAMPLE_NAME))
    return _phase(offload) == (placement, "Succeeded")


async def _job_pods(api: KubeApi) -> list[RawObject]:
    listing = await api.get(
        "/api/v1/namespaces/default/pods", query={"labelSelector": f"job-name={JOB_NAME}"}
    )
    items: list[RawObject] = listing.get("items") or []
    return items


async def _all_bound(api: KubeApi, count: int) -> bool:
    pods = await _job_pods(api)
    return len([pod for pod in pods if (pod.get("spec") or {}).get("nodeName")]) >= count


async def _job_done(api: KubeApi) -> str:
    job = await api.get(f"{JOBS}/{JOB_NAME}")
    for condition in (job.get("status") or {}).get("conditions") or ():
        if condition.get("status") == "True" and condition.get("type") in ("Complete", "Failed"):
            return str(condition["type"])
    return ""


def _path(obj: RawObject, *, name: bool = False) -> str:
    """The collection of a manifest's object in namespace default, or with `name`, the object."""
    kind = str(obj.get("kind"))
    if kind not in PLURALS:
        raise ValueError(f"a training manifest holds Jobs and PodGroups, not {kind}")
    return resource_path(
        str(obj["apiVersion"]),
        PLURALS[kind],
        namespace="default",
        name=str(obj["metadata"]["name"]) if name else None,
    )


async def _remove_earlier(api: KubeApi, objects: list[RawObject]) -> None:
    """A Job left by an earlier demo run would be demand from the start, and its PodGroup, already
    scheduled, would let the new pods in one by one: delete them and the Job's pods first."""
    for obj in objects:
        try:
            await api.delete(_path(obj, name=True), body={"propagationPolicy": "Foreground"})
        except KubeApiError as error:
            if not error.not_found:
                raise

    async def gone() -> bool:
        for obj in objects:
            try:
                await api.get(_path(obj, name=True))
            except KubeApiError as error:
                if error.not_found:
                    continue
                raise
            return False
        return not await _job_pods(api)

    names = ", ".join(f"{obj['kind']} {obj['metadata']['name']}" for obj in objects)
    await _until(gone, f"the {names} of an earlier run to be deleted")


async def create_training_job(api: KubeApi, manifest: Path, out: TextIO) -> tuple[int, Timeline]:
    """Create the objects of `manifest` in its order (once an earlier run's are gone) and echo the
    `kubectl apply` a person would type; returns the Job's parallelism and a timeline that starts as
    the first object (the PodGroup, if any, then the Job) is created."""
    objects = traffic.load_manifests(manifest)
    jobs = [obj for obj in objects if obj.get("kind") == "Job"]
    if len(jobs) != 1:
        raise ValueError(f"{manifest} holds {len(jobs)} Jobs, not one")
    await _remove_earlier(api, objects)
    print(f"\n$ kubectl apply -f {manifest.relative_to(traffic.SOURCE_TREE)}", file=out)
    timeline = Timeline(created=time.monotonic())
    for obj in objects:
        created = await api.create(_path(obj), obj)
        if obj is jobs[0]:
            timeline.job_created_at = parse_timestamp(created["metadata"].get("creationTimestamp"))
    return int(jobs[0]["spec"]["parallelism"]), timeline


async def _pod_group(api: KubeApi) -> RawObject:
    return await api.get(POD_GROUP)


async def _follow_gang(api: KubeApi, timeline: Timeline, parallelism: int, out: TextIO) -> None:
    """The gang waits whole (none of its pods bound), is admitted whole, and its pods are all bound."""
    message = await _until(
        lambda: _waiting_message(api), f"the PodGroup {JOB_NAME} to wait for room (Unschedulable)"
    )
    bound = len([pod for pod in await _job_pods(api) if gangs.bound_at(pod)])
    print(
        f"[{timeline.mark('gang waiting'):6.1f}s] the gang waits, {bound} of {parallelism} pods bound: "
        f"{message}",
        file=out,
        flush=True,
    )
    await _until(lambda: _admitted(api), f"the scheduler to admit the gang (PodGroup {JOB_NAME} scheduled)")
    print(f"[{timeline.mark('gang admitted'):6.1f}s] the scheduler admits the gang", file=out, flush=True)
    await _until(lambda: _all_bound(api, parallelism), f"all {parallelism} training pods bound")
    print(
        f"[{timeline.mark('training bound'):6.1f}s] all {parallelism} training pods are bound",
        file=out,
        flush=True,
    )


async def _waiting_message(api: KubeApi) -> str | None:
    return gangs.waiting(await _pod_group(api))


async def _admitted(api: KubeApi) -> bool:
    return gangs.admitted(await _pod_group(api))


async def _follow_flip_out(api: KubeApi, timeline: Timeline, out: TextIO) -> None:
    await _until(lambda: _started_moving(api, "away"), "the policy to move the service away (FlipOutStarted)")
    print(f"[{timeline.mark('flip out started'):6.1f}s] the policy moves the service away", file=out)
    await _until(lambda: _settled(api, "away"), "the service to be served away (Succeeded)")
    print(f"[{timeline.mark('served away'):6.1f}s] the service is served away", file=out, flush=True)


async def training_story(state: cluster.ClusterState, out: TextIO) -> Timeline:
    """Create the training gang and follow the policy's moves to the end; returns the timeline."""
    api = await KubeApi.from_kubeconfig(str(state.kubeconfig))
    try:
        parallelism, timeline = await create_training_job(api, traffic.TRAINING_JOB, out)
        print(
            f"training Job {JOB_NAME} created: {parallelism} pods x 1 GPU at priority `training`, one gang "
            f"(PodGroup {JOB_NAME}, all {parallelism} or none); the home node has 8 GPUs and the service "
            "holds some of them",
            file=out,
            flush=True,
        )
        # The gang and the policy move at once (the scheduler may admit the gang before the Offload
        # reports Succeeded): follow both, each stage timed as it is seen.
        try:
            async with asyncio.TaskGroup() as following:
                following.create_task(_follow_gang(api, timeline, parallelism, out))
                following.create_task(_follow_flip_out(api, timeline, out))
        except BaseExceptionGroup as failed:
            if len(failed.exceptions) == 1:  # the one that stopped the others, as a caller expects it
                raise failed.exceptions[0] from None
            raise
        if timeline.job_created_at is not None:
            bound = gangs.bindings(await _job_pods(api), timeline.job_created_at)
            print(f"         {bound.describe()}", file=out, flush=True)
        outcome = await _until(lambda: _job_done(api), f"the Job {JOB_NAME} to finish")
        print(f"[{timeline.mark('training done'):6.1f}s] the Job finished: {outcome}", file=out, flush=True)
        await _until(lambda: _started_moving(api, "home"), "the policy to bring the service home")
        print(f"[{timeline.mark('flip back started'):6.1f}s] the policy brings the service home", file=out)
        await _until(lambda: _settled(api, "home"), "the service to be served home again (Succeeded)")
        print(f"[{timeline.mark('served home'):6.1f}s] the service is home again", file=out, flush=True)
        return timeline
    finally:
        await api.close()


async def _started_moving(api: KubeApi, placement: str) -> bool:
    offload = await api.get(offload_path("default", traffic.EXAMPLE_NAME))
    return _phase(offload)[0] == placement
