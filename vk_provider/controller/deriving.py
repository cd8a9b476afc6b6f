"""The away Deployment, derived from the home one: same pods, different nodes, separate identity.

The away pods run the home pod template with three changes:

- scheduling: the Offload's node selector replaces the template's (which pins pods to the home GPU
  nodes), node affinity is dropped for the same reason, and the Offload's tolerations are added so the
  pods may land on the virtual node's taint, with `OUTAGE_TOLERATIONS` so a node outage never evicts them;
- labels: every label the home Service or the home Deployment selects on is removed and the Offload
  label added. Otherwise the home Service would pick the away pods up as home endpoints (the router
  would count them on the wrong side) and the home Deployment's selector would overlap ours. A
  spill-over Offload's away pods also carry the label its autoscaler counts both sides' pods by;
- annotations: the Offload's provider placement annotations are added.

The derived template's hash is kept in an annotation on the away Deployment, so the controller can
tell "the home template changed since" from "someone scaled it" without comparing defaulted fields
the apiserver filled in.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from vk_provider.offload.names import OFFLOAD_LABEL, SERVES_LABEL, TEMPLATE_HASH_ANNOTATION
from vk_provider.offload.spec import OffloadSpec

AWAY_SUFFIX = "-away"
SKIPPED_LABELS = frozenset({"pod-template-hash"})
"""Labels the Deployment controller owns; copying one would confuse its ReplicaSet bookkeeping."""


def away_name(spec: OffloadSpec) -> str:
    return f"{spec.name}{AWAY_SUFFIX}"


def away_selector(spec: OffloadSpec) -> dict[str, str]:
    return {OFFLOAD_LABEL: spec.name}


def _selected_keys(home_deployment: Mapping[str, Any], home_service: Mapping[str, Any]) -> set[str]:
    keys = set((home_service.get("spec") or {}).get("selector") or {})
    selector = (home_deployment.get("spec") or {}).get("selector") or {}
    keys.update(selector.get("matchLabels") or {})
    for expression in selector.get("matchExpressions") or ():
        if isinstance(expression, Mapping) and isinstance(expression.get("key"), str):
            keys.add(expression["key"])
    return keys


OUTAGE_TOLERATIONS: tuple[Mapping[str, str], ...] = tuple(
    {"key": key, "operator": "Exists", "effect": "NoExecute"}
    for key in ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")
)
"""Away pods tolerate their virtual node going Unknown or NotReady, forever (no tolerationSeconds).

That happens when the node daemon is down (both replicas), while the workloads run on at the
provider. The router keeps serving them on its own active checks (`vk_provider.routetable.health`); an
eviction after the default 300 s (30 s on the test plane) would delete a healthy away side, and with
the daemon down nothing could even stop the workloads."""
_OUTAGE_TAINT_KEYS = frozenset(toleration["key"] for toleration in OUTAGE_TOLERATIONS)


def away_pod_template(
    spec: OffloadSpec, home_deployment: Mapping[str, Any], home_service: Mapping[str, Any]
) -> dict[str, Any]:
    """The away pods' template (pure)."""
    template = copy.deepcopy(dict((home_deployment.get("spec") or {}).get("template") or {}))
    metadata = dict(template.get("metadata") or {})
    dropped = _selected_keys(home_deployment, home_service) | SKIPPED_LABELS
    labels = {key: value for key, value in (metadata.get("labels") or {}).items() if key not in dropped}
    labels.update(away_selector(spec))
    if spec.spill_over is not None:  # an autoscaler counts these with the home pods (`status.selector`)
        labels[SERVES_LABEL] = spec.name
    metadata["labels"] = labels
    annotations = dict(metadata.get("annotations") or {})
    annotations.update(spec.away.annotations)
    if annotations:
        metadata["annotations"] = annotations
    template["metadata"] = metadata
    pod_spec = dict(template.get("spec") or {})
    pod_spec["nodeSelector"] = dict(spec.away.node_selector)
    affinity = dict(pod_spec.get("affinity") or {})
    affinity.pop("nodeAffinity", None)
    if affinity:
        pod_spec["affinity"] = affinity
    else:
        pod_spec.pop("affinity", None)
    # A home toleration of the node-outage taints would bound ours (the shortest tolerationSeconds
    # wins), so ours replace them.
    tolerations = [
        toleration
        for toleration in pod_spec.get("tolerations") or []
        if toleration.get("key") not in _OUTAGE_TAINT_KEYS
    ]
    tolerations.extend(
        dict(toleration) for toleration in spec.away.tolerations if toleration not in tolerations
    )
    tolerations.extend(dict(toleration) for toleration in OUTAGE_TOLERATIONS if toleration not in tolerations)
    pod_spec["tolerations"] = tolerations
    template["spec"] = pod_spec
    return template


def template_hash(template: Mapping[str, Any]) -> str:
    encoded = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(encoded).hexdigest()[:16]


def away_deployment(
    spec: OffloadSpec,
    home_deployment: Mapping[str, Any],
    home_service: Mapping[str, Any],
    replicas: int,
) -> dict[str, Any]:
    """The whole away Deployment.

    Deliberately without an ownerReference to the Offload: the garbage collector would delete the
    away side, serving or not, when the Offload (or its CRD) is deleted. The controller deletes it
    itself, once traffic is home (see the Offload's finalizer).
    """
    template = away_pod_template(spec, home_deployment, home_service)
    home_spec = home_deployment.get("spec") or {}
    deployment_spec: dict[str, Any] = {
        "replicas": replicas,
        "selector": {"matchLabels": away_selector(spec)},
        "template": template,
    }
    for field in ("minReadySeconds", "strategy", "revisionHistoryLimit"):
        if field in home_spec:
            deployment_spec[field] = copy.deepcopy(home_spec[field])
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": away_name(spec),
            "namespace": spec.namespace,
            "labels": away_selector(spec),
            "annotations": {TEMPLATE_HASH_ANNOTATION: template_hash(template)},
        },
        "spec": deployment_spec,
    }
