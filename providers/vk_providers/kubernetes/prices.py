"""What a pod costs an hour on the remote cluster: the operator's price of each GPU (or other extended
resource) it requests, since a cluster has no price list of its own to ask.

`gpu_prices_usd_per_hour` maps resource names to USD per unit-hour, e.g. {"nvidia.com/gpu": 2.0,
"nvidia.com/mig-3g.40gb": 0.9}; the remote node pool (`node_selector`) decides which GPU a unit is. A pod
costs the sum of its requests times their prices. Its price is unknown (None) when no prices are
configured, or when it requests an extended resource (a name with a `/`) that has no price: counting that
as free would let the node's spend ceiling be passed. Native resources (cpu, memory, ...) cost nothing
unless priced.
"""

from __future__ import annotations

from collections.abc import Mapping

from vk_provider.provider import PricedPod


def remote_pod_price(pod: PricedPod, prices: Mapping[str, float]) -> float | None:
    if not prices:
        return None
    total = 0.0
    for resource, quantity in pod.requests.items():
        if quantity <= 0:
            continue
        price = prices.get(resource)
        if price is None:
            if "/" in resource:
                return None
            continue
        total += price * float(quantity)
    return round(total, 6)
