"""The names our AdmissionCheck controller shares with Kueue and with the people who configure it.

Part of the wire contract: an AdmissionCheck names `CONTROLLER_NAME` in `spec.controllerName`, and may
point at its OffloadPolicy through `spec.parameters` (`PARAMETERS_API_GROUP`, `PARAMETERS_KIND`).
"""

from __future__ import annotations

from vk_provider.kit.kube import resource_path
from vk_provider.offload.names import GROUP

CONTROLLER_NAME = f"{GROUP}/gpu-pressure"
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_API_VERSION = f"{KUEUE_GROUP}/v1beta2"
"""The version we read and write (Kueue v0.17 stores v1beta2: no conversion is needed for it)."""
PARAMETERS_API_GROUP = GROUP
PARAMETERS_KIND = "OffloadPolicy"
FIELD_MANAGER = "vk-provider-admission-check"
"""The server-side-apply manager of our entry in a Workload's status.admissionChecks."""

PENDING = "Pending"
READY = "Ready"
RETRY = "Retry"
REJECTED = "Rejected"


def admission_checks_path(name: str | None = None, *, status: bool = False) -> str:
    return resource_path(
        KUEUE_API_VERSION, "admissionchecks", name=name, subresource="status" if status else None
    )


def workloads_path(namespace: str | None = None, name: str | None = None, *, status: bool = False) -> str:
    return resource_path(
        KUEUE_API_VERSION,
        "workloads",
        namespace=namespace,
        name=name,
        subresource="status" if status else None,
    )


def queues_path(kind: str) -> str:
    """Every Kueue `localqueues` (namespaced, listed across namespaces) or `clusterqueues`."""
    return resource_path(KUEUE_API_VERSION, kind)
