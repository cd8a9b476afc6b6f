"""Capped exponential backoff with jitter: the one formula every retry loop of the project uses.

Jitter draws each delay from the upper half of its step, so many pods (or nodes) that failed together
do not retry in lockstep, while no delay is ever shorter than half its step.
"""

from __future__ import annotations

import random

_RANDOM = random.SystemRandom()


def jittered_backoff_seconds(failures: int, *, initial_seconds: float, max_seconds: float) -> float:
    """The delay after the `failures`-th failure in a row (1 for the first): initial x 2^(failures-1)."""
    step = min(max_seconds, initial_seconds * 2.0 ** min(max(failures - 1, 0), 32))
    return step * _RANDOM.uniform(0.5, 1.0)
