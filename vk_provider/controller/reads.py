"""What the controller and its policy read from watch caches instead of the apiserver.

Every type either reads on every pass, or on every Offload's resync: the Offloads themselves, their
Deployments and Services, pods (home and away pods, router pods, training pods), nodes (the pool and
the nodes of home pods), namespaces (a policy's namespace selector), Jobs and native PodGroups
(training demand), and Kueue's AdmissionChecks, Workloads and queues. Mirrored once per leader term
(`vk_provider._kube.informers`), they cost the apiserver one watch each, not a request per pass per
object. Types a process never reads (Kueue on a cluster without it) are never watched: a mirror starts
on its first read. HTTPRoutes, EndpointSlices and Leases are read rarely or written as read: direct.
"""

from __future__ import annotations

from vk_provider._kube.informers import CachedApi, Informers, Watched
from vk_provider.kit.kube import KubeApi, resource_path
from vk_provider.offload.names import offloads_path
from vk_provider.policy.admission.names import KUEUE_API_VERSION
from vk_provider.policy.names import policies_path
from vk_provider.policy.podgroups import API_VERSION as PODGROUP_API_VERSION

WATCHED = [
    Watched(offloads_path(None)),
    Watched(policies_path(), namespaced=False),
    Watched(resource_path("apps/v1", "deployments")),
    Watched(resource_path("v1", "services")),
    Watched(resource_path("v1", "pods")),
    Watched(resource_path("v1", "nodes"), namespaced=False),
    Watched(resource_path("v1", "namespaces"), namespaced=False),
    Watched(resource_path("batch/v1", "jobs")),
    Watched(resource_path(PODGROUP_API_VERSION, "podgroups")),
    Watched(resource_path(KUEUE_API_VERSION, "admissionchecks"), namespaced=False),
    Watched(resource_path(KUEUE_API_VERSION, "workloads")),
    Watched(resource_path(KUEUE_API_VERSION, "clusterqueues"), namespaced=False),
    Watched(resource_path(KUEUE_API_VERSION, "localqueues")),
]


def cached_reads(api: KubeApi, *, namespace: str | None) -> CachedApi:
    """A client whose reads of `WATCHED` come from mirrors: those of `namespace` only when the
    controller reconciles one (its RBAC may stop there), the policy's cluster-wide reads of other
    namespaces then going to the apiserver as before."""
    return CachedApi(api, Informers(api, WATCHED, namespace=namespace))
