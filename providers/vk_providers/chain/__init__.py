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
members' own lists (see `provider`); the chain itself keeps nothing on disk. Health: available while any
member is. Node capacity: the members' capacities added up, resource by resource (GPUs per type, where
members report per-type resources).

Capabilities: logs (CapabilityMissingError when the owner serves none), usage (NotFoundError when the
owner reports none, so the kubelet's stats leave the pod out quietly) and node capacity. No status push
(the node polls: a push from some members only would leave the others unpolled), no pod address before
creation (the member is not known yet), no GPU catalog of its own.
"""

from __future__ import annotations

from vk_provider.node import plugins
from vk_provider.provider import ProviderContext
from vk_providers.chain.config import ChainSettings, MemberSettings, parse_settings
from vk_providers.chain.provider import Builder, ChainProvider, Member


def create_provider(context: ProviderContext, *, build: Builder = plugins.build) -> ChainProvider:
    """`build` makes the members; the node passes one that returns a provider it has built already
    when it runs a single provider as a chain of one (`vk_provider.node.plugins.build_for_node`)."""
    return ChainProvider(context, build=build)


__all__ = ["ChainProvider", "ChainSettings", "Member", "MemberSettings", "create_provider", "parse_settings"]
