"""Which of the clients connected to the xDS server a weight step waits for: the Envoys the controller
expects, never whoever else connected.

The xDS server reports every node id that holds a stream, and a node id is whatever the client says.
A client that connects and never ACKs (a stray, or anyone holding a client certificate) must not hold
a step until the progress deadline rolls the migration back; an expected Envoy that is not connected
must hold it, since it still serves its last weight. So a step waits for:

- by name: the node ids of the Envoy pods found by label (each Envoy's node id is its pod's name);
- by count (`--envoy-expected-count`, or as many as `--envoy-stats-url`s are given): that many
  connected Envoys, those applying the weight the xDS server serves now first, so that an extra
  client that lags never stands in for an Envoy that keeps up.

Every other connected node id is a stray: left out of the step, and reported (`Selection.strays`).
Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from vk_provider.controller.routers import RouteView


@dataclasses.dataclass(frozen=True)
class Selection:
    views: list[RouteView]
    """One per expected Envoy: its applied weight, or None (not applied, or not connected)."""
    strays: list[str]
    """Connected node ids the step does not wait for, sorted."""


NO_ENDPOINTS = {"home": 0, "away": 0}


def by_name(applied: Mapping[str, int | None], names: Iterable[str], usable: dict[str, int]) -> Selection:
    """`applied`: each connected node id → the route's weight it applies (None: unknown, none yet)."""
    expected = sorted(set(names))
    views = [
        RouteView(f"Envoy {name}", applied[name], usable)
        if name in applied
        else RouteView(f"Envoy {name} (not connected to the xDS server)", None, NO_ENDPOINTS)
        for name in expected
    ]
    return Selection(views, sorted(set(applied) - set(expected)))


def by_count(
    applied: Mapping[str, int | None], count: int, serving_weight: int | None, usable: dict[str, int]
) -> Selection:
    """`serving_weight`: the route's weight in the xDS server's current table (None: no such route)."""
    ranked = sorted(
        applied, key=lambda node: (applied[node] is None or applied[node] != serving_weight, node)
    )
    counted = ranked[:count]
    views = [RouteView(f"Envoy {node}", applied[node], usable) for node in sorted(counted)]
    missing = count - len(counted)
    name = f"an Envoy replica not connected to the xDS server ({len(counted)} of {count} are)"
    views += [RouteView(name, None, NO_ENDPOINTS)] * missing
    return Selection(views, sorted(ranked[count:]))
