"""The account's refusals of a create: 403 for a GPU pool it may not use, 402 for a balance too low.

RunPod answers both with problem documents (docs.runpod.io/api-reference-v2/pods/create-a-pod, "Which
failures are worth retrying": 402 insufficient balance, stop, no candidate will succeed; 403 the
account cannot access the requested pool, skip this candidate). How low a balance is too low is not
documented; here it is a balance that does not cover the pod's first hour (`Profile.balance_dollars`).
"""

from __future__ import annotations

from vk_devtools.standins.runpod.catalog import FakeGpuType
from vk_devtools.standins.runpod.profile import Profile


def account_refusal(profile: Profile, gpu: FakeGpuType, count: int, cloud: str) -> tuple[int, str] | None:
    """(status, detail) of the account's refusal of this create, or None."""
    if gpu.pool is not None and gpu.pool in profile.denied_pools:
        return 403, f"access denied: this account cannot deploy to the {gpu.pool} pool ({gpu.id})"
    hourly = (gpu.price_secure if cloud == "SECURE" else gpu.price_community) * count
    if profile.balance_dollars is not None and profile.balance_dollars < hourly:
        return (
            402,
            f"insufficient balance: ${profile.balance_dollars:.2f} does not cover one hour of "
            f"{count} x {gpu.id} at ${hourly:.2f}/hr",
        )
    return None
