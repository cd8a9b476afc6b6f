"""Which EndpointSlices speak for a home Service: those its endpoint controller wrote.

The label `kubernetes.io/service-name` ties an EndpointSlice to a Service, but anyone who may write
EndpointSlices in the namespace can set it, with any address in the slice: taking home endpoints from
every labelled slice would let them point home traffic anywhere (the pattern of CVE-2021-25740, where
Endpoints were the vehicle). Kubernetes' EndpointSlice controller marks the slices it writes from the
Service's selector with `endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io`;
those, and those of a manager the operator names (`vk-provider router --endpoint-slice-manager NAME`,
e.g. a service mesh's or a cloud's controller that writes a selector-less Service's slices), are the
home endpoints. Slices mirrored from hand-written Endpoints (`endpointslicemirroring-controller.k8s.io`)
are not trusted by default, since whoever wrote the Endpoints chose their addresses.

A label is not proof in itself: anyone who can write a slice can write this label too. It narrows who
can be believed to those the operator trusts to manage slices, and RBAC must keep `endpointslices`
write access to them, as Kubernetes' own hardening guide says for CVE-2021-25740.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, Final

MANAGED_BY_LABEL: Final = "endpointslice.kubernetes.io/managed-by"
"""The label naming the controller that manages an EndpointSlice."""
ENDPOINTSLICE_CONTROLLER: Final = "endpointslice-controller.k8s.io"
"""Kubernetes' EndpointSlice controller (in kube-controller-manager): slices from a Service's selector."""


@dataclasses.dataclass(frozen=True)
class SliceManagers:
    """The managers whose EndpointSlices are home endpoints: Kubernetes' controller and `extra`."""

    extra: frozenset[str] = frozenset()

    @classmethod
    def with_extra(cls, names: Iterable[str]) -> SliceManagers:
        return cls(frozenset(name.strip() for name in names if name.strip()))

    @property
    def names(self) -> frozenset[str]:
        return self.extra | {ENDPOINTSLICE_CONTROLLER}

    def trusts(self, endpoint_slice: Mapping[str, Any]) -> bool:
        return manager_of(endpoint_slice) in self.names


def manager_of(endpoint_slice: Mapping[str, Any]) -> str:
    """The slice's `endpointslice.kubernetes.io/managed-by` label ("" when it has none)."""
    metadata = endpoint_slice.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    manager = labels.get(MANAGED_BY_LABEL) if isinstance(labels, Mapping) else None
    return manager if isinstance(manager, str) else ""
