"""The blast-radius cap: at most floor(maxNonFatalShare x pool nodes) nodes tainted at once for reasons
that are not fatal.

Operators guard against their own automation: EKS's GPU node repair turns itself off when more than 20%
of the nodes look unhealthy. A driver update that makes every GPU report one Xid, or a heat wave in the
machine room, would otherwise pull half the pool and make training wait for nothing. So a node that a
degrading signal would pull gets the taint only while a slot is free:

- a node tainted by the policy whose judgement now is anything but fatal holds a slot (one still
  showing a degrading signal, and one waiting out healthyForSeconds): its taint is never taken off
  for the cap, the cap only stops further ones;
- fatal nodes neither count nor wait: a GPU fallen off the bus is pulled whatever the share;
- the free slots go to the nodes whose signal has lasted longest (earliest `since`), then by name, so
  every pass and every leader picks the same ones; the others are held back, reported (condition
  HealthCapReached, an Event naming them) and stay in service.

With floor(), a pool of fewer than 5 nodes at the 20% default has no slot: degrading signals are
reported there, never tainted, until the share allows one (0.25 for 1 of 4 nodes).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from datetime import datetime


@dataclasses.dataclass(frozen=True, slots=True)
class CapOutcome:
    share: float
    pool_nodes: int
    slots: int
    """floor(share x pool nodes)."""
    held: tuple[str, ...] = ()
    """Nodes the policy already holds tainted for non-fatal reasons (they take slots first)."""
    granted: tuple[str, ...] = ()
    """Nodes to taint now, within the free slots."""
    held_back: tuple[str, ...] = ()
    """Nodes a degrading signal would pull, beyond the cap: not tainted."""

    @property
    def reached(self) -> bool:
        return bool(self.held_back)


def slots_for(share: float, pool_nodes: int) -> int:
    # An epsilon against floating point: 0.29 x 100 is 28.999999999999996, and 29 slots are meant.
    return max(0, math.floor(share * pool_nodes + 1e-9))


def apply_cap(
    candidates: Mapping[str, datetime], held: Iterable[str], *, share: float, pool_nodes: int
) -> CapOutcome:
    """Which of `candidates` (node -> since when its degrading signal has lasted, none of them tainted
    yet) get the free slots, the longest-lasting first (then by name)."""
    slots = slots_for(share, pool_nodes)
    kept = tuple(sorted(set(held)))
    free = max(0, slots - len(kept))
    ordered = sorted(candidates, key=lambda name: (candidates[name], name))
    return CapOutcome(
        share=share,
        pool_nodes=pool_nodes,
        slots=slots,
        held=kept,
        granted=tuple(ordered[:free]),
        held_back=tuple(ordered[free:]),
    )
