"""Admit a pod bound to this node, as a kubelet does, before anything is created at the provider. Pure.

A pod is judged once, when the node first meets it, in this order; the first check it fails is its
`Refusal`, and the pod is Failed with that reason (nothing is created, a Warning event says why):

1. `InvalidPlacement`: a placement annotation cannot be read, or a name under
   `placement.vk-provider.dev/` is none of them (`kit.placement.check_annotations`): on every provider,
   since one without a GPU catalog would otherwise ignore it silently.
2. `OutOfBudget`: the node's ceilings, where money is at stake: at most `max_provider_pods` pods at its
   provider, and at most `max_spend_per_hour` US dollars an hour for all of them. A pod's price is the
   one its placement recorded (the node's own record, else the pod's `Chosen` status condition or the
   `chosen` annotation of older nodes), else the most it may cost (its `max-price-per-hour`), else
   its provider's price for it (`SupportsPodPrice`: SageMaker's instance prices, the remote cluster's
   configured GPU prices), else unknown. Under a spend ceiling a pod of unknown price is refused,
   since nothing would bound what it costs, unless the node allows unpriced pods
   (`allow_unpriced_pods`); those count as 0 and are admitted only while the known spend is below the
   ceiling. A pod with a price is admitted only when the price fits.
   A pod placed by price (any of the catalog annotations) is placed within what is left: the provider
   is handed the pod with its `max-price-per-hour` lowered to the room under the ceiling (`capped`),
   and the pod counts at that price until its placement records the real one.
3. `OutOf<resource>` (`OutOfcpu`, `OutOfnvidia.com/gpu`, `OutOfpods`): the kubelet's check of the pod's
   requests against the node's allocatable less what the pods already admitted here request, in the
   kubelet's words and units (cpu in millicores, everything else whole units, rounded up). As the
   kubelet, a resource the node does not advertise is not checked (an extended resource the node does
   not know, or cpu/memory/pods when the node's capacity leaves them out).

What is "already admitted" is what makes a decision stable across workers and restarts: a pod this
instance admitted, a pod the provider holds (adopted at start-up), or a pod whose status has a
`startTime`, which the node writes on every pod it has acknowledged (the kubelet's meaning of the field),
so a restarted daemon or a new leader counts it too and never judges it again. Terminal pods (Succeeded,
Failed) count for nothing. A decision, made or remembered, is never taken back: `Admissions.decide` holds
no await, so concurrent workers cannot admit two pods against the same free room.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping
from fractions import Fraction
from typing import Any

from vk_provider.kit.placement import (
    CATALOG_ANNOTATIONS,
    MAX_PRICE_ANNOTATION,
    PlacementError,
    check_annotations,
    price_cap,
)
from vk_provider.kit.placement.record import recorded_placement
from vk_provider.kit.quantity import InvalidQuantityError, parse_quantity
from vk_provider.provider import PodRequest

RawObject = Mapping[str, Any]

INVALID_PLACEMENT = "InvalidPlacement"
OUT_OF_BUDGET = "OutOfBudget"
# Which check refused (the metric's `check` label).
PLACEMENT_CHECK = "placement"
PODS_CEILING_CHECK = "pods-ceiling"
SPEND_CEILING_CHECK = "spend-ceiling"
RESOURCES_CHECK = "resources"
FIXED_REFUSALS = (
    (INVALID_PLACEMENT, PLACEMENT_CHECK),
    (OUT_OF_BUDGET, PODS_CEILING_CHECK),
    (OUT_OF_BUDGET, SPEND_CEILING_CHECK),
)
"""(reason, check) of every refusal whose reason does not name a resource (`OutOf<resource>` does)."""
REJECTED_PREFIX = "Pod was rejected: "
"""The kubelet's prefix of a rejected pod's status message (the event carries the message alone)."""
PODS = "pods"
CPU = "cpu"
_NATIVE = frozenset({CPU, "memory", "ephemeral-storage", PODS})
TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclasses.dataclass(frozen=True, slots=True)
class Refusal:
    reason: str
    """`InvalidPlacement`, `OutOfBudget` or `OutOf<resource>`."""
    message: str
    check: str
    """Which check refused, for metrics: "placement", "pods-ceiling", "spend-ceiling" or "resources"."""

    @property
    def status_message(self) -> str:
        return REJECTED_PREFIX + self.message


@dataclasses.dataclass(frozen=True, slots=True)
class Ceilings:
    """Where money is at stake; None: no ceiling."""

    max_pods: int | None = None
    max_spend_per_hour: float | None = None
    allow_unpriced_pods: bool = False
    """Under a spend ceiling, admit a pod whose price nobody can tell (counted as 0) rather than refuse it."""


QuotePrice = Callable[[RawObject], "float | None"]
"""The provider's price per hour for a pod before it is placed, None when it cannot say (see
`node.pricing`)."""


def no_quote(pod: RawObject) -> float | None:
    """For a provider that prices nothing."""
    return None


# -- what a pod asks for -----------------------------------------------------------------------------


def _container_requests(container: RawObject) -> dict[str, Fraction]:
    """The container's requests; a resource with a limit but no request requests its limit (the API's
    defaulting, for objects that did not come through it)."""
    resources = container.get("resources") or {}
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    result: dict[str, Fraction] = {}
    for name, quantity in merged.items():
        try:
            result[name] = parse_quantity(str(quantity).strip())
        except InvalidQuantityError:
            continue  # the API validated it; nothing sensible to count
    return result


def _add(total: dict[str, Fraction], more: Mapping[str, Fraction]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, Fraction(0)) + value


def _maximum(total: dict[str, Fraction], other: Mapping[str, Fraction]) -> None:
    for name, value in other.items():
        total[name] = max(total.get(name, Fraction(0)), value)


def pod_requests(pod: RawObject) -> dict[str, Fraction]:
    """What the pod requests, as the kubelet counts it (`PodRequests`): its containers added up, or its
    largest init container with the sidecars started before it if that is more, plus its overhead;
    `pods` is 1."""
    spec = pod.get("spec") or {}
    total: dict[str, Fraction] = {}
    for container in spec.get("containers") or []:
        _add(total, _container_requests(container))
    sidecars: dict[str, Fraction] = {}
    init_peak: dict[str, Fraction] = {}
    for container in spec.get("initContainers") or []:
        requests = _container_requests(container)
        if container.get("restartPolicy") == "Always":  # a sidecar runs alongside the containers
            _add(total, requests)
            _add(sidecars, requests)
            _maximum(init_peak, sidecars)
        else:
            during = dict(sidecars)
            _add(during, requests)
            _maximum(init_peak, during)
    _maximum(total, init_peak)
    overhead = {name: parse_quantity(str(value)) for name, value in (spec.get("overhead") or {}).items()}
    _add(total, overhead)
    total[PODS] = Fraction(1)
    return total


def _units(resource: str, value: Fraction) -> int:
    """The kubelet's integer for a quantity: millicores for cpu, whole units (rounded up) otherwise."""
    return math.ceil(value * 1000) if resource == CPU else math.ceil(value)


def _checked(resource: str, allocatable: Mapping[str, Fraction]) -> bool:
    """Whether the kubelet would check `resource` here: only what the node advertises."""
    return resource in allocatable and (
        resource in _NATIVE or resource.startswith("hugepages-") or "/" in resource
    )


def pod_units(pod: RawObject) -> dict[str, int]:
    """`pod_requests` in the kubelet's integers (see `_units`), which it adds up pod by pod."""
    return {resource: _units(resource, value) for resource, value in pod_requests(pod).items()}


def check_resources(
    pod: RawObject,
    admitted: Iterable[RawObject],
    allocatable: Mapping[str, str],
    *,
    requests: Callable[[RawObject], Mapping[str, int]] = pod_units,
) -> Refusal | None:
    """`OutOf<resource>` when the pod's requests do not fit in what `admitted` pods leave free.

    `requests`: how a pod's requests are found (`pod_units`, or a cache of it)."""
    free = _parse_all(allocatable)
    used: dict[str, int] = {}
    for other in admitted:
        for resource, value in requests(other).items():
            used[resource] = used.get(resource, 0) + value
    for resource, want in sorted(requests(pod).items()):
        if want <= 0 or not _checked(resource, free):
            continue
        have, cap = used.get(resource, 0), _units(resource, free[resource])
        if want > cap - have:
            return Refusal(
                f"OutOf{resource}",
                f"Node didn't have enough resource: {resource}, "
                f"requested: {want}, used: {have}, capacity: {cap}",
                RESOURCES_CHECK,
            )
    return None


def _parse_all(quantities: Mapping[str, str]) -> dict[str, Fraction]:
    parsed: dict[str, Fraction] = {}
    for name, text in quantities.items():
        try:
            parsed[name] = parse_quantity(str(text).strip())
        except InvalidQuantityError:
            continue
    return parsed


# -- placement and money --------------------------------------------------------------------------


def check_placement(pod: RawObject) -> Refusal | None:
    try:
        check_annotations(_annotations(pod))
    except PlacementError as error:
        return Refusal(INVALID_PLACEMENT, str(error), PLACEMENT_CHECK)
    return None


def _annotations(pod: RawObject) -> Mapping[str, str]:
    return (pod.get("metadata") or {}).get("annotations") or {}


def expected_price(
    pod: RawObject, recorded: float | None = None, *, quote: QuotePrice = no_quote
) -> float | None:
    """US dollars an hour the pod costs or may cost: `recorded` (the node's record of its placement), else
    the price its placement record on the pod says (its `Chosen` status condition, or the `chosen`
    annotation of older nodes), else its `max-price-per-hour`, else its provider's price for it
    (`quote`), unless it is placed by price (its placement, not its provider's defaults, decides what
    it costs); None when nothing says."""
    if recorded is not None:
        return recorded
    annotations = _annotations(pod)
    placement = recorded_placement(pod)
    if placement is not None and placement.price_per_hour is not None:
        return placement.price_per_hour
    try:
        cap = price_cap(annotations)
    except PlacementError:
        cap = None
    if cap is not None or _uses_catalog(pod):
        return cap
    return quote(pod)


def spend_per_hour(
    admitted: Iterable[RawObject], prices: Mapping[str, float], *, quote: QuotePrice = no_quote
) -> float:
    """What the admitted pods cost or may cost an hour, as far as is known (see `expected_price`); a pod
    of unknown price (admitted under `allow_unpriced_pods`, or before the ceiling was set) counts as 0."""
    return sum(expected_price(other, prices.get(_uid(other)), quote=quote) or 0.0 for other in admitted)


def check_ceilings(
    pod: RawObject,
    admitted: Iterable[RawObject],
    ceilings: Ceilings,
    *,
    prices: Mapping[str, float],
    node_name: str,
    quote: QuotePrice = no_quote,
) -> Refusal | None:
    """`OutOfBudget` when one more pod, or its price, would take the node past a ceiling, or when its
    price is unknown under a spend ceiling that does not allow unpriced pods."""
    admitted = list(admitted)
    if ceilings.max_pods is not None and len(admitted) + 1 > ceilings.max_pods:
        return Refusal(
            OUT_OF_BUDGET,
            f"node {node_name} may run at most {ceilings.max_pods} pods at its provider "
            f"(max_provider_pods), and {len(admitted)} run there",
            PODS_CEILING_CHECK,
        )
    ceiling = ceilings.max_spend_per_hour
    if ceiling is None:
        return None
    spend = spend_per_hour(admitted, prices, quote=quote)
    price = expected_price(pod, prices.get(_uid(pod)), quote=quote)
    # A pod placed by price has no price yet but is placed within what is left (`Admissions.decide`).
    if price is None and not ceilings.allow_unpriced_pods and not _uses_catalog(pod):
        return Refusal(
            OUT_OF_BUDGET,
            f"node {node_name} may spend at most ${ceiling:.2f}/h at its provider (max_spend_per_hour), "
            "and this pod's price is not known: give it a placement.vk-provider.dev/max-price-per-hour "
            "annotation, configure its provider's prices (sagemaker: instance_prices; kubernetes: "
            "gpu_prices_usd_per_hour), or set allow_unpriced_pods to admit pods of unknown price",
            SPEND_CEILING_CHECK,
        )
    if price is None and spend >= ceiling:
        return Refusal(
            OUT_OF_BUDGET,
            f"node {node_name} may spend at most ${ceiling:.2f}/h at its provider (max_spend_per_hour); "
            f"its pods cost ${spend:.2f}/h already, and this pod's price is not known before it is placed",
            SPEND_CEILING_CHECK,
        )
    if price is not None and spend + price > ceiling:
        return Refusal(
            OUT_OF_BUDGET,
            f"node {node_name} may spend at most ${ceiling:.2f}/h at its provider (max_spend_per_hour); "
            f"its pods cost ${spend:.2f}/h already, and this pod may cost ${price:.2f}/h",
            SPEND_CEILING_CHECK,
        )
    return None


def capped(request: PodRequest, cap: float | None) -> PodRequest:
    """The pod as the provider must place it: its `max-price-per-hour` lowered to `cap` (None: as is)."""
    if cap is None:
        return request
    annotations = {**request.annotations, MAX_PRICE_ANNOTATION: f"{cap:.6f}"}
    return dataclasses.replace(request, annotations=annotations)


def _uses_catalog(pod: RawObject) -> bool:
    return any(name in _annotations(pod) for name in CATALOG_ANNOTATIONS)


_SMALLEST_CAP = 0.000001
"""Below this (what `capped` can write) there is no room left under the spend ceiling."""


def _uid(pod: RawObject) -> str:
    return str(pod["metadata"]["uid"])


def _active(pod: RawObject) -> bool:
    return (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES


def acknowledged(pod: RawObject) -> bool:
    """A pod some instance of this node admitted before: not terminal, and its status has a startTime."""
    return _active(pod) and bool((pod.get("status") or {}).get("startTime"))


# -- the decisions ---------------------------------------------------------------------------------


class Admissions:
    """This node's admission decisions: each pod judged once, and what is admitted counted.

    No I/O and no await: `decide` runs to its end before any other worker can look, which serialises the
    decisions of concurrent workers.
    """

    def __init__(
        self,
        *,
        node_name: str,
        allocatable: Mapping[str, str],
        ceilings: Ceilings,
        quote: QuotePrice = no_quote,
    ) -> None:
        self._node_name = node_name
        self._allocatable = dict(allocatable)
        self._ceilings = ceilings
        self._quote = quote
        self._quotes: dict[str, tuple[str, float | None]] = {}
        """The provider's price of each pod, by UID, with the resourceVersion it was read at: a decision
        prices every admitted pod, and a pod changes (its annotations may name another instance type)
        far less often than pods are judged."""
        self._admitted: set[str] = set()
        self._refused: dict[str, Refusal] = {}
        self._announced: set[str] = set()
        self._caps: dict[str, float] = {}
        self._requests: dict[str, Mapping[str, int]] = {}
        """Each pod's `pod_units`, by UID: a decision adds up every admitted pod's, and the containers'
        requests of a pod do not change (short of an in-place resize, which this does not follow)."""
        """The price cap each pod placed by price was admitted under, where the spend ceiling lowered it."""

    def decide(
        self,
        pod: RawObject,
        bound: Iterable[RawObject],
        *,
        held: Iterable[str] = (),
        prices: Mapping[str, float] | None = None,
    ) -> Refusal | None:
        """None when the pod may run here (now, or already before); else why not, the same every time.

        `bound`: every pod bound to this node (the watch cache); `held`: the UIDs the provider holds;
        `prices`: the known price per hour of placed pods, by UID.
        """
        uid = _uid(pod)
        held = set(held)
        if uid in self._admitted or uid in held or acknowledged(pod):
            self._admitted.add(uid)
            return None
        if uid in self._refused:
            return self._refused[uid]
        admitted = [
            other
            for other in bound
            if _uid(other) != uid
            and _active(other)
            and (_uid(other) in self._admitted or _uid(other) in held or acknowledged(other))
        ]
        known = {**self._caps, **(prices or {})}  # a recorded price replaces the cap admitted under
        refusal = (
            check_placement(pod)
            or check_ceilings(
                pod, admitted, self._ceilings, prices=known, node_name=self._node_name, quote=self._quote_of
            )
            or check_resources(pod, admitted, self._allocatable, requests=self._requests_of)
        )
        ceiling = self._ceilings.max_spend_per_hour
        if refusal is None and ceiling is not None and _uses_catalog(pod):
            room = ceiling - spend_per_hour(admitted, known, quote=self._quote_of)
            cap = expected_price(pod, quote=self._quote_of)
            if cap is None or cap > room:
                if room < _SMALLEST_CAP:
                    refusal = Refusal(
                        OUT_OF_BUDGET,
                        f"node {self._node_name} may spend at most ${ceiling:.2f}/h at its provider "
                        "(max_spend_per_hour), and nothing is left for this pod",
                        SPEND_CEILING_CHECK,
                    )
                else:
                    self._caps[uid] = room
        if refusal is None:
            self._admitted.add(uid)
        else:
            self._refused[uid] = refusal
        return refusal

    def _requests_of(self, pod: RawObject) -> Mapping[str, int]:
        uid = _uid(pod)
        requests = self._requests.get(uid)
        if requests is None:
            requests = self._requests[uid] = pod_units(pod)
        return requests

    def _quote_of(self, pod: RawObject) -> float | None:
        uid = _uid(pod)
        version = str((pod.get("metadata") or {}).get("resourceVersion", ""))
        cached = self._quotes.get(uid)
        if cached is None or cached[0] != version or not version:
            cached = self._quotes[uid] = (version, self._quote(pod))
        return cached[1]

    def price_cap(self, uid: str) -> float | None:
        """The price cap the provider must place the pod within, when the spend ceiling lowered it."""
        return self._caps.get(uid)

    def announce(self, uid: str) -> bool:
        """True the first time it is asked about a refused pod: its event is posted once, not at every
        pass until the watch shows the pod Failed."""
        if uid not in self._refused or uid in self._announced:
            return False
        self._announced.add(uid)
        return True

    def forget(self, uid: str) -> None:
        """The pod is gone."""
        self._admitted.discard(uid)
        self._refused.pop(uid, None)
        self._announced.discard(uid)
        self._caps.pop(uid, None)
        self._requests.pop(uid, None)
        self._quotes.pop(uid, None)
