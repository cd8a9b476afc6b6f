"""What the controller and its policy read from watch caches instead of the apiserver.

Every type either reads on every pass, or on every Offload's resync: the Offloads themselves, their
Deployments and Services, pods (home and away pods, router pods, training pods), nodes (the pool and
the nodes of home pods), namespaces (a policy's namespace selector), Jobs and native PodGroups
(training demand), Kueue's AdmissionChecks, Workloads and queues, and InferencePools (the
`inferencepool` data plane's check). Mirrored once per leader term
(`vk_provider._kube.informers`), they cost the apiserver one watch each, not a request per pass per
object. Types a process never reads (Kueue on a cluster without it) are never watched: a mirror starts
on its first read. HTTPRoutes, EndpointSlices and Leases are read rarely or written as read: direct.
"""

from __future__ import annotations

from vk_provider._kube.informers import CachedApi, Informers, Watched
from vk_provider.kit.kube import KubeApi, RawObject, resource_path
from vk_provider.offload.inferencepools import inference_pools_path
from vk_provider.offload.names import offloads_path
from vk_provider.policy.admission.names import KUEUE_API_VERSION
from vk_provider.policy.names import policies_path
from vk_provider.policy.podgroups import API_VERSION as PODGROUP_API_VERSION

CONTAINER_FIELDS = ("name", "resources", "restartPolicy")
"""What the policy reads of a container: its requests (GPUs), and whether an init container is a
sidecar (`restartPolicy: Always`) that runs beside the others."""
DROPPED_STATUS = ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses")


def pod_as_read(pod: RawObject) -> RawObject:
    """A pod as the controller and the policy read it: its metadata, its placement and scheduling,
    its containers' names and requests, its phase, conditions and addresses. Images, commands,
    environment, probes, volumes and container statuses, most of a pod's size, are left out: a
    cluster's every pod is mirrored, and a whole one takes some 12 KiB in memory, this under half."""
    spec = dict(pod.get("spec") or {})
    spec.pop("volumes", None)
    spec.pop("ephemeralContainers", None)
    for group in ("containers", "initContainers"):
        if group in spec:
            spec[group] = [
                {key: container[key] for key in CONTAINER_FIELDS if key in container}
                for container in spec[group] or ()
            ]
    status = {key: value for key, value in (pod.get("status") or {}).items() if key not in DROPPED_STATUS}
    return {**pod, "spec": spec, "status": status}


WATCHED = [
    Watched(offloads_path(None)),
    Watched(policies_path(), namespaced=False),
    Watched(resource_path("apps/v1", "deployments")),
    Watched(resource_path("v1", "services")),
    Watched(resource_path("v1", "pods"), keep=pod_as_read),
    Watched(resource_path("v1", "nodes"), namespaced=False),
    Watched(resource_path("v1", "namespaces"), namespaced=False),
    Watched(resource_path("batch/v1", "jobs")),
    Watched(resource_path(PODGROUP_API_VERSION, "podgroups")),
    Watched(resource_path(KUEUE_API_VERSION, "admissionchecks"), namespaced=False),
    Watched(resource_path(KUEUE_API_VERSION, "workloads")),
    Watched(resource_path(KUEUE_API_VERSION, "clusterqueues"), namespaced=False),
    Watched(resource_path(KUEUE_API_VERSION, "localqueues")),
    Watched(inference_pools_path()),
]


def cached_reads(api: KubeApi, *, namespace: str | None, policy: bool) -> CachedApi:
    """A client whose reads of `WATCHED` come from mirrors. A controller that reconciles one
    `namespace` mirrors only that namespace (its RBAC may stop there; its reads elsewhere, such as
    the router pods, go to the apiserver), unless it runs the policy: the policy reads pods, Jobs,
    PodGroups and Offloads in every namespace on every pass (training may run anywhere), so it needs
    cluster-wide reads anyway, and they are mirrored cluster-wide rather than listed every pass."""
    return CachedApi(api, Informers(api, WATCHED, namespace=None if policy else namespace))
