"""What the virtual Node looks like: labels, taints, capacity, conditions, addresses. Pure, no I/O."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from datetime import datetime
from fractions import Fraction
from typing import Any

from vk_provider import __version__
from vk_provider.kit.quantity import InvalidQuantityError, parse_quantity
from vk_provider.kubelet.certificates.state import CONDITION_TYPE, CertificateState
from vk_provider.node.settings import NodeSettings, Taint
from vk_provider.offload.names import (
    GENERIC_VIRTUAL_NODE_LABEL,
    LEGACY_VIRTUAL_NODE_TAINT,
    VIRTUAL_NODE_LABEL,
    VIRTUAL_NODE_LABEL_VALUE,
)

PROVIDER_UNAVAILABLE_TAINT_KEY = "virtual-kubelet.io/provider-unavailable"
PROVIDER_AVAILABLE_CONDITION = "ProviderAvailable"
# Conditions a healthy kubelet reports; the node-lifecycle controller reads Ready, and
# NetworkUnavailable=True would make it taint the node.
PRESSURE_CONDITIONS = ("MemoryPressure", "DiskPressure", "PIDPressure")


def kubelet_version() -> str:
    """Our version in the semver shape `kubectl get nodes` and version parsers expect."""
    match = re.match(r"(\d+)\.(\d+)\.(\d+)(.*)", __version__)
    if match is None:
        return f"v0.0.0-{__version__}"
    major, minor, patch, rest = match.groups()
    suffix = re.sub(r"[^0-9A-Za-z.]", "", rest.lstrip("."))
    return f"v{major}.{minor}.{patch}" + (f"-{suffix}" if suffix else "") + "+vk-provider"


@dataclasses.dataclass(frozen=True, slots=True)
class Health:
    """What the daemon knows right now that changes the node's conditions and taints."""

    ready: bool
    provider_available: bool = True
    provider_message: str = ""
    """Why the provider is unavailable; while it is available, what it notes (`SupportsHealthNote`)."""
    provider_reason: str = ""
    """The ProviderAvailable condition's reason while unavailable; empty: ProviderUnavailable (its
    health check fails). `providerstart` says why a provider could not even be built."""


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def labels(settings: NodeSettings) -> dict[str, str]:
    generic_key, generic_value = GENERIC_VIRTUAL_NODE_LABEL
    return {
        generic_key: generic_value,
        "kubernetes.io/role": "agent",
        "kubernetes.io/hostname": settings.node_name,
        "kubernetes.io/os": settings.operating_system,
        "node.kubernetes.io/exclude-from-external-load-balancers": "true",
        **settings.labels,
        # Last, so no `labels` setting can drop it: the away pods and the routers find our nodes by it.
        VIRTUAL_NODE_LABEL: VIRTUAL_NODE_LABEL_VALUE,
    }


def our_taints(settings: NodeSettings, health: Health) -> list[Taint]:
    taints = []
    if settings.effective_taint is not None:
        taints.append(settings.effective_taint)
    if not health.provider_available:
        taints.append(Taint(PROVIDER_UNAVAILABLE_TAINT_KEY, settings.provider, "NoSchedule"))
    return taints


def merged_taints(
    current: list[dict[str, Any]], settings: NodeSettings, health: Health
) -> list[dict[str, Any]]:
    """Our taints, plus every taint someone else put there (node-lifecycle's, an operator's)."""
    ours = our_taints(settings, health)
    # The generic taint is the one earlier versions put on the Node: left there, it would keep the away
    # pods (which tolerate only ours now) off the node after an upgrade.
    managed_keys = {PROVIDER_UNAVAILABLE_TAINT_KEY, LEGACY_VIRTUAL_NODE_TAINT}
    if settings.effective_taint is not None:
        managed_keys.add(settings.effective_taint.key)
    foreign = [taint for taint in current if taint.get("key") not in managed_keys]
    return [*foreign, *(taint.to_json() for taint in ours)]


def capacity(settings: NodeSettings, provider_capacity: Mapping[str, str]) -> dict[str, str]:
    return {**settings.capacity, **provider_capacity}


def allocatable(settings: NodeSettings, resources: Mapping[str, str]) -> dict[str, str]:
    """The capacity, with `pods` no more than the node's ceiling of pods at its provider: the scheduler
    then leaves the pods beyond it Pending, instead of binding pods the node must refuse."""
    result = dict(resources)
    ceiling = settings.max_provider_pods
    if ceiling is not None:
        try:
            advertised = parse_quantity(str(result.get("pods", ceiling)).strip())
        except InvalidQuantityError:
            advertised = Fraction(ceiling)
        result["pods"] = str(min(ceiling, math.floor(advertised)))
    return result


def conditions(
    health: Health,
    now: datetime,
    previous: list[dict[str, Any]] | None = None,
    *,
    certificate: CertificateState | None = None,
) -> list[dict[str, Any]]:
    """Our conditions with a fresh heartbeat; a transition time changes only when the status does.

    With `certificate`, also ServingCertificate: True while the kubelet API serves a certificate no
    client has refused, its reason and message saying which and why."""
    before = {condition.get("type"): condition for condition in previous or []}

    def condition(kind: str, status: bool, reason: str, message: str) -> dict[str, Any]:
        word = "True" if status else "False"
        earlier = before.get(kind)
        changed = earlier is None or earlier.get("status") != word
        transition = iso(now) if changed or earlier is None else earlier.get("lastTransitionTime", iso(now))
        return {
            "type": kind,
            "status": word,
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": iso(now),
            "lastTransitionTime": transition,
        }

    result = [
        condition(
            "Ready",
            health.ready,
            "KubeletReady" if health.ready else "KubeletNotReady",
            "vk-provider is ready" if health.ready else _not_ready_message(health),
        ),
        condition("NetworkUnavailable", False, "RouteCreated", "the provider manages pod networking"),
        condition(
            PROVIDER_AVAILABLE_CONDITION,
            health.provider_available,
            "ProviderHealthy"
            if health.provider_available
            else health.provider_reason or "ProviderUnavailable",
            _available_message(health) if health.provider_available else health.provider_message,
        ),
    ]
    result += [condition(kind, False, f"KubeletHasNo{kind}", f"no {kind}") for kind in PRESSURE_CONDITIONS]
    if certificate is not None:
        result.append(condition(CONDITION_TYPE, certificate.working, certificate.reason, certificate.message))
    return result


def _available_message(health: Health) -> str:
    """ProviderAvailable=True's message, with what the provider notes (`SupportsHealthNote`)."""
    answers = "the provider answers its health check"
    return f"{answers}; {health.provider_message}" if health.provider_message else answers


def _not_ready_message(health: Health) -> str:
    if health.provider_reason:
        return f"the provider cannot start ({health.provider_reason}): {health.provider_message}"
    return "vk-provider is starting"


DECLARED_FEATURES = ("ExtendWebSocketsToKubelet",)


def status(
    settings: NodeSettings,
    health: Health,
    now: datetime,
    *,
    provider_capacity: Mapping[str, str],
    previous_conditions: list[dict[str, Any]] | None = None,
    certificate: CertificateState | None = None,
) -> dict[str, Any]:
    resources = capacity(settings, provider_capacity)
    return {
        "capacity": resources,
        "allocatable": allocatable(settings, resources),
        "conditions": conditions(health, now, previous_conditions, certificate=certificate),
        "addresses": [
            *({"type": "InternalIP", "address": address} for address in settings.addresses),
            {"type": "Hostname", "address": settings.node_name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": settings.kubelet_port}},
        # The kubelet API serves exec, attach and port-forward over WebSocket too (kubelet.websocket): an
        # apiserver with ExtendWebSocketsToKubelet (1.36+) then passes kubectl's WebSocket straight
        # through instead of translating it to SPDY. Ignored by apiservers without NodeDeclaredFeatures.
        "declaredFeatures": list(DECLARED_FEATURES) if settings.kubelet_websocket else [],
        "nodeInfo": {
            "kubeletVersion": kubelet_version(),
            "kubeProxyVersion": "",
            "operatingSystem": settings.operating_system,
            "architecture": "amd64",
            "containerRuntimeVersion": f"vk-provider://{settings.provider}",
            "osImage": f"vk-provider {__version__} ({settings.provider} provider)",
            "kernelVersion": "",
            "machineID": "",
            "systemUUID": "",
            "bootID": "",
        },
    }


def new_node(
    settings: NodeSettings, health: Health, now: datetime, provider_capacity: Mapping[str, str]
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": settings.node_name, "labels": labels(settings)},
        "spec": {"taints": merged_taints([], settings, health)},
        "status": status(settings, health, now, provider_capacity=provider_capacity),
    }
