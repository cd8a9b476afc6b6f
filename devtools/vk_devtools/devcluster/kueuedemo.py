"""`vk-provider dev demo --kueue`: the automatic story with the training queued through Kueue.

The same story as `policydemo`, told by Kueue's objects: the Job is created suspended in a LocalQueue
whose ClusterQueue uses our AdmissionCheck (manifests/examples/kueue.yaml); Kueue reserves its quota
and waits on the check; the policy moves the example service out; once the home GPUs are free the
check turns Ready, Kueue admits the Workload and all the Job's pods start at once, tolerating the
reservation taint through the check's podSetUpdates. When the Job is done the service comes home.
Kueue is started first when the plane runs without it (`dev up --with-kueue` starts it with the plane).
"""

from __future__ import annotations

from typing import Any, TextIO

from vk_devtools.devcluster import cluster, gangs, kueue, policydemo, traffic
from vk_devtools.devcluster.policydemo import JOB_NAME, Timeline, _all_bound, _job_done, _until
from vk_provider.kit.kube import KubeApi
from vk_provider.policy.admission.names import workloads_path

QUEUE_OBJECTS = traffic.MANIFESTS / "examples" / "kueue.yaml"
KUEUE_JOB = traffic.MANIFESTS / "examples" / "kueue-job.yaml"
CHECK = "gpu-reclaim"


def ensure_kueue(state: cluster.ClusterState, out: TextIO) -> cluster.ClusterState:
    """Kueue running against the plane, the demo's queue wired to our check, `default` managed."""
    state = kueue.add_to_plane(state, out=out)
    traffic.kubectl_apply(state.bin_dir, state.kubeconfig, "apply", "-f", str(QUEUE_OBJECTS))
    labels = [f"{key}={value}" for key, value in kueue.managed_namespace_labels().items()]
    traffic.kubectl_apply(
        state.bin_dir, state.kubeconfig, "label", "--overwrite", "namespace", "default", *labels
    )
    return state


async def _workload(api: KubeApi) -> dict[str, Any]:
    """The Job's Workload ({} until Kueue made it)."""
    listing = await api.get(workloads_path("default"))
    for workload in listing.get("items") or ():
        owners = workload["metadata"].get("ownerReferences") or ()
        if any(owner.get("kind") == "Job" and owner.get("name") == JOB_NAME for owner in owners):
            return dict(workload)
    return {}


async def _check(api: KubeApi) -> dict[str, Any]:
    entries = ((await _workload(api)).get("status") or {}).get("admissionChecks") or ()
    return next((dict(entry) for entry in entries if entry.get("name") == CHECK), {})


async def _admitted(api: KubeApi) -> bool:
    """Kueue admitted the Workload: the Job is unsuspended, its pods created together (Kueue's gang)."""
    conditions = ((await _workload(api)).get("status") or {}).get("conditions") or ()
    return any(item.get("type") == "Admitted" and item.get("status") == "True" for item in conditions)


async def _check_in(api: KubeApi, state: str) -> dict[str, Any] | None:
    entry = await _check(api)
    return entry if entry.get("state") == state else None


async def kueue_story(state: cluster.ClusterState, out: TextIO) -> Timeline:
    api = await KubeApi.from_kubeconfig(str(state.kubeconfig))
    try:
        parallelism, timeline = await policydemo.create_training_job(api, KUEUE_JOB, out)
        print(
            f"training Job {JOB_NAME} queued in LocalQueue training: {parallelism} pods x 1 GPU, suspended "
            "until Kueue admits it",
            file=out,
            flush=True,
        )
        await _until(lambda: _check_in(api, "Pending"), f"Kueue to reserve quota and wait on check {CHECK}")
        print(f"[{timeline.mark('quota reserved'):6.1f}s] quota reserved; check {CHECK} Pending", file=out)
        await _until(lambda: policydemo._started_moving(api, "away"), "the policy to move the service away")
        print(f"[{timeline.mark('flip out started'):6.1f}s] the policy moves the service away", file=out)
        ready = await _until(lambda: _check_in(api, "Ready"), f"check {CHECK} Ready")
        print(f"[{timeline.mark('check ready'):6.1f}s] check {CHECK} Ready: {ready.get('message')}", file=out)
        await _until(lambda: _admitted(api), "Kueue to admit the Workload")
        print(f"[{timeline.mark('gang admitted'):6.1f}s] Kueue admits the Workload", file=out, flush=True)
        await _until(lambda: _all_bound(api, parallelism), f"all {parallelism} training pods bound")
        print(
            f"[{timeline.mark('training bound'):6.1f}s] all {parallelism} training pods are bound", file=out
        )
        if timeline.job_created_at is not None:
            bound = gangs.bindings(await policydemo._job_pods(api), timeline.job_created_at)
            print(f"         {bound.describe()}", file=out, flush=True)
        outcome = await _until(lambda: _job_done(api), f"the Job {JOB_NAME} to finish")
        print(f"[{timeline.mark('training done'):6.1f}s] the Job finished: {outcome}", file=out, flush=True)
        await _until(lambda: policydemo._settled(api, "home"), "the service to be served home again")
        print(f"[{timeline.mark('served home'):6.1f}s] the service is home again", file=out, flush=True)
        return timeline
    finally:
        await api.close()
