"""Placement: which provider, GPU type and price a pod gets. Pure, no I/O.

A pod says what it needs in annotations (read by `annotations.parse_placement`):

- `placement.vk-provider.dev/gpu-types` (e.g. `H100-80GB,A100-80GB`): the accepted GPU types, most
  preferred first: names of `gpus.GPU_TYPE_NAMES`, or a provider's own ids. Absent: any type.
- `placement.vk-provider.dev/gpu-count` (e.g. `2`): GPUs for the whole pod, 1 to 64. Absent: the pod's
  `nvidia.com/gpu` (each container's limit, else its request), else 1.
- `placement.vk-provider.dev/max-price-per-hour` (e.g. `4.50`): the most the whole pod may cost, in US
  dollars per hour at the provider's list price.
- `placement.vk-provider.dev/regions` (e.g. `EU-RO-1,US-KS-2`): the accepted locations (a provider's data
  center or region ids), most preferred first.
- `placement.vk-provider.dev/providers` (e.g. `runpod,burst`): the providers that may be tried, in this
  order. Absent: all of the node's, in the node's order.

Any of the first four turns on placement by price: the offers of the providers' GPU catalogs that match
are tried cheapest first (`choice` documents the matching and every tie-break), and a refusal (no
capacity, a quota) moves on to the next offer. Without them, the providers are tried in order, each with
its own defaults. A value that cannot be read, or a name under `placement.vk-provider.dev/` that is none
of these, fails the pod with the reason: the node checks them (`check_annotations`) before anything is
created, on every provider, and the pod is Failed with reason `InvalidPlacement` and a Warning event. The
`chain` provider reads these annotations; a node whose single provider publishes a GPU catalog (RunPod)
runs it as a chain of one (the chain's `placement` node wrapper, see `vk_provider.plugins`), so they
work there too. A node whose providers publish no catalog (SageMaker, a remote cluster, `local`) cannot
match valid ones and ignores them.

What was chosen is written back by the node, from `PodState.placement`, as the pod status condition
`placement.vk-provider.dev/Chosen` (JSON in its message, see `record`; older nodes wrote the annotation
`placement.vk-provider.dev/chosen`) and a `Placed` event; `cost.CostMeter` adds up
the cost of each pod from its price while it runs.
"""

from __future__ import annotations

from vk_provider.kit.placement.annotations import (
    CATALOG_ANNOTATIONS,
    CHOSEN_ANNOTATION,
    GPU_COUNT_ANNOTATION,
    GPU_RESOURCE,
    GPU_TYPES_ANNOTATION,
    MAX_PRICE_ANNOTATION,
    PREFIX,
    PROVIDERS_ANNOTATION,
    REGIONS_ANNOTATION,
    PlacementError,
    PlacementRequest,
    check_annotations,
    gpus_of,
    parse_placement,
    price_cap,
)
from vk_provider.kit.placement.choice import Candidate, Catalog, Choice, Rejection, choose, describe_offer
from vk_provider.kit.placement.cost import CostMeter
from vk_provider.kit.placement.gpus import GPU_TYPE_NAMES, gpu_type_matches, names_for
from vk_provider.kit.placement.record import (
    CHOSEN_CONDITION,
    PLACED_EVENT_REASON,
    chosen_annotation,
    parse_chosen_annotation,
    placement_message,
    recorded_placement,
)

__all__ = [
    "CATALOG_ANNOTATIONS",
    "CHOSEN_ANNOTATION",
    "CHOSEN_CONDITION",
    "GPU_COUNT_ANNOTATION",
    "GPU_RESOURCE",
    "GPU_TYPES_ANNOTATION",
    "GPU_TYPE_NAMES",
    "MAX_PRICE_ANNOTATION",
    "PLACED_EVENT_REASON",
    "PREFIX",
    "PROVIDERS_ANNOTATION",
    "REGIONS_ANNOTATION",
    "Candidate",
    "Catalog",
    "Choice",
    "CostMeter",
    "PlacementError",
    "PlacementRequest",
    "Rejection",
    "check_annotations",
    "choose",
    "chosen_annotation",
    "describe_offer",
    "gpu_type_matches",
    "gpus_of",
    "names_for",
    "parse_chosen_annotation",
    "parse_placement",
    "placement_message",
    "price_cap",
    "recorded_placement",
]
