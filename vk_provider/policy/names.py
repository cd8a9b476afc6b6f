"""The OffloadPolicy's API names, and the annotations and taints the policy, the CLI and people share.

Part of the wire contract between the policy, the CLI and the manifests: renaming any of it is a
breaking change for a running cluster.
"""

from __future__ import annotations

from vk_provider.kit.kube import resource_path
from vk_provider.offload.names import API_VERSION, GROUP

POLICY_KIND = "OffloadPolicy"
POLICY_PLURAL = "offloadpolicies"
POLICY_SHORT_NAME = "ofp"
POLICY_FIELD_MANAGER = "vk-provider-offload-policy"
"""The field manager of every write the policy makes (placements, taints, its own status)."""

HOLD_UNTIL_ANNOTATION = f"{GROUP}/hold-until"
"""On an Offload, set by a person's `kubectl offload flip`: the policy leaves the Offload alone until
this RFC 3339 time, or, with the value `HOLD_UNTIL_NEXT_FLIP`, until a person flips it again."""
HOLD_UNTIL_NEXT_FLIP = "next-flip"
AUTO_ANNOTATION = f"{GROUP}/auto"
"""On an Offload: "off" keeps every policy away from it (`kubectl offload auto off`); absent or "on"
lets a policy that selects it move it."""
FLIPPED_BY_ANNOTATION = f"{GROUP}/flipped-by"
"""On an Offload: who set `spec.placement` last, `FLIPPED_BY_PERSON` or `policy/<policy name>`."""
FLIPPED_BY_PERSON = "person"
FLIP_ORDER_ANNOTATION = f"{GROUP}/flip-order"
"""On an Offload: an integer, lower moves out first (default 0; ties by namespace/name)."""
POLICY_TAINTS_ANNOTATION = f"{GROUP}/policy-taints"
"""On a node: the JSON list of taint keys the policy put there; it removes only those."""

RESERVED_TAINT_KEY = "gpu.vk-provider.dev/reserved"
RESERVED_TAINT_VALUE = "training"
UNHEALTHY_TAINT_KEY = "gpu.vk-provider.dev/unhealthy"
"""The default unhealthy taint; its value is the reason (Temperature, Xid, ...)."""
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"


def flipped_by_policy(policy_name: str) -> str:
    """The `FLIPPED_BY_ANNOTATION` value of a flip made by the policy `policy_name`."""
    return f"policy/{policy_name}"


def policies_path(name: str | None = None, *, status: bool = False) -> str:
    """The OffloadPolicy collection, one policy, or its status subresource (cluster-scoped)."""
    return resource_path(API_VERSION, POLICY_PLURAL, name=name, subresource="status" if status else None)
