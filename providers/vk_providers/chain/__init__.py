"""The `chain` provider: one node backed by an ordered list of providers (its members).

Settings (the provider's section of the node configuration; see `config.ChainSettings`):

    provider: chain
    provider_config:
      members:                      # in the node's order
        - name: runpod              # how pods and events name the member; the provider defaults to it
          config: {api_key_file: /etc/vk-provider/credentials/runpod-api-key}
        - name: burst
          provider: local           # any provider of the vk_provider.providers entry points
          config: {...}
      catalog_timeout_seconds: 20   # per member, for placement by price
      health_timeout_seconds: 8     # per member
      max_offers_per_create: 6      # offers tried in one create before the node's retry

Members are built through the same plugin loading as the node's own provider, each with its own state
folder (`<state_dir>/members/<name>`) and the node's name. Members must be distinct backends (two members
on one account would see one workload twice).

A node configured with a single provider that publishes a GPU catalog (`provider: runpod`) runs it as
the only member of a chain all the same (`wrap_for_node`, the `placement` entry point of the
`vk_provider.node_wrappers` group), so the placement annotations work there too.

Creating a pod (the pod's placement annotations, `vk_provider.kit.placement`):

- With any of `placement.vk-provider.dev/{gpu-types,gpu-count,max-price-per-hour,regions}`: placement by
  price. The members that publish a GPU catalog and can be told which offer to use (`directing`) are
  asked for their offers for the pod's GPU count, at once; the offers that match are tried cheapest first,
  with the tie-breaks of `vk_provider.kit.placement.choice`. Members without a catalog are not used: they
  cannot show that they meet the pod's GPU types, price cap or regions.
- Without them: the members are tried in order, each with its own defaults (RunPod its `gpu_type`, say).

In both, `placement.vk-provider.dev/providers` limits the members to those named, in that order (an
unknown name fails the pod). A member that refuses (no capacity, a quota, any error) passes the pod to
the next: a refusal for good (`InvalidPodError`) by every member fails the pod with all their reasons;
anything else is a `TemporaryProviderError` with all the reasons, and the node tries again later. A
member whose create failed is asked whether it holds the pod after all before the next is tried, so an
answer lost on the way does not place the pod twice.

What was chosen (member, GPU type and count, tier, locations, price per hour) is in
`PodState.placement` of the pod's states, for the node to write on the pod.

Routing: state, update, delete, logs and usage go to the member that holds the pod, learnt from the
members' own lists (see `owners`); the chain itself keeps nothing on disk. Health: available while any
member is. Node capacity: the members' capacities added up, resource by resource (GPUs per type, where
members report per-type resources).

Capabilities: logs (CapabilityMissingError when the owner serves none), usage (NotFoundError when the
owner reports none, so the kubelet's stats leave the pod out quietly), node capacity and pod prices (the
owner's price; before a pod is placed, the dearest member's, unknown if any member cannot say). No status push
(the node polls: a push from some members only would leave the others unpolled), no pod address before
creation (the member is not known yet), no GPU catalog of its own.
"""

from __future__ import annotations

import dataclasses

from vk_provider.provider import PodLifecycle, ProviderContext, SupportsGpuCatalog
from vk_providers.chain.config import ChainSettings, MemberSettings, parse_settings
from vk_providers.chain.owners import Member
from vk_providers.chain.provider import ChainProvider


def create_provider(context: ProviderContext) -> ChainProvider:
    return ChainProvider(context)


def wrap_for_node(name: str, context: ProviderContext, provider: PodLifecycle) -> PodLifecycle:
    """The node's own provider as the node runs it (the `placement` node wrapper, see
    `vk_provider.plugins`): one that publishes a GPU catalog runs as the only member of a chain.

    The chain is where the placement annotations (GPU types, count, price cap, regions) are read and
    matched against catalogs: without it, a node with one provider would ignore them silently. The
    member is the provider the node built, with the node's own context (state folder included), so the
    wrapping changes nothing else; the chain answers for it, and names it by the provider's name.
    """
    if isinstance(provider, ChainProvider) or not isinstance(provider, SupportsGpuCatalog):
        return provider
    config = {"members": [{"name": name, "provider": name}]}
    return ChainProvider(dataclasses.replace(context, config=config), build=lambda _name, _context: provider)


__all__ = [
    "ChainProvider",
    "ChainSettings",
    "Member",
    "MemberSettings",
    "create_provider",
    "parse_settings",
    "wrap_for_node",
]
