"""An Offload's spec and status as typed values, read from the raw JSON the apiserver returns.

The CRD's schema already rejects most bad input and fills the defaults; this module still checks what
it relies on, because an object written before a schema change (or by a client that skipped
validation, such as a direct etcd restore) must give a clear condition, not a crash.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from vk_provider.offload.names import (
    FLIP_STRATEGY_ANNOTATION,
    GENERIC_VIRTUAL_NODE_LABEL,
    LEGACY_VIRTUAL_NODE_TAINT,
    OFFLOAD_LABEL,
    PROMOTE_ANNOTATION,
    RETRY_ANNOTATION,
    VIRTUAL_NODE_LABEL,
    VIRTUAL_NODE_LABEL_VALUE,
    VIRTUAL_NODE_TAINT,
    WARM_UNTIL_ANNOTATION,
    WARMED_BY_ANNOTATION,
)
from vk_provider.offload.oneoff import OneOffStrategy, parse_one_off
from vk_provider.offload.plan import (
    DEFAULT_FAILURES_BEFORE_ROLLBACK,
    DEFAULT_TO_AWAY_STEPS,
    DEFAULT_TO_HOME_STEPS,
    Direction,
    validate_steps,
)
from vk_provider.offload.spillover import SpillOver
from vk_provider.offload.status import Phase

# The CRD's defaults (manifests/crds/offload.yaml), applied here too for an Offload read before the
# apiserver filled them in, or written past it.
DEFAULT_STEP_INTERVAL_SECONDS = 30
DEFAULT_READY_THRESHOLD_PERCENT = 100
DEFAULT_MAX_ERROR_RATE_PERCENT = 1.0
DEFAULT_MAX_P99_LATENCY_MS = 2000
DEFAULT_MIN_REQUESTS_PER_INTERVAL = 10
DEFAULT_PROGRESS_DEADLINE_SECONDS = 600
DEFAULT_SEVERE_ERROR_RATE_PERCENT = 50.0
"""An error rate this high on the receiving side rolls back at once, without the tolerated failures."""
DEFAULT_SEVERE_ERROR_RATE_INCREASE_PERCENT = 50.0
"""While both sides serve: the judged side's error rate this many points above the other side's,
over the same window, rolls back at once (see `vk_provider.controller.baseline`)."""
DEFAULT_MAX_ERROR_RATE_INCREASE_PERCENT = 1.0
"""While both sides serve: the most points the judged side's error rate may exceed the other's."""
STATUS_CLASSES = ("4xx", "5xx")
"""The status classes `gates.errorStatuses` may count as errors: the routers count responses by class."""
DEFAULT_ERROR_STATUSES: tuple[str, ...] = ("5xx",)
DEFAULT_SEVERE_MIN_REQUESTS = 20
"""...but only over at least this many requests: two failures out of three say nothing yet."""
DEFAULT_SEVERE_WINDOW_SECONDS = 5
"""How often, within a step's interval, the receiving side is checked for a severe failure."""
DEFAULT_EMERGENCY_GRACE_SECONDS = 30
"""How long the serving side may have lost its endpoints before an emergency migration starts."""
DEFAULT_EMERGENCY_MIN_SERVING_PERCENT = 0
"""Share of the serving side's desired replicas it may fall below before it counts as lost (0: only
when no endpoint is left)."""
MAX_AWAY_REPLICAS = 100
"""The CRD's maximum of `spec.away.replicas`: each away replica is a paid workload at a provider, so a
typo must not start thousands (see manifests/crds/offload.yaml)."""
MAX_TOTAL_REPLICAS = 1000
"""The CRD's maximum of `spec.replicas` and `spec.spillOver.maxHomeReplicas`."""
MAX_WEIGHT_FACTOR = 100.0
"""The CRD's maximum of a spill-over weight factor: one side serving 100 times what the other does."""
MAX_NAME_LENGTH = 63
"""An Offload's name is a label value on its away Deployment and pods (`OFFLOAD_LABEL`), and label
values hold at most 63 characters; the CRD refuses longer names, this catches ones written past it."""
DEFAULT_AWAY_NODE_SELECTOR: Mapping[str, str] = {VIRTUAL_NODE_LABEL: VIRTUAL_NODE_LABEL_VALUE}
"""Our virtual nodes only: not another virtual-kubelet's (an AKS virtual node), which shares the rest."""
DEFAULT_AWAY_TOLERATIONS: tuple[Mapping[str, str], ...] = (
    {"key": VIRTUAL_NODE_TAINT, "operator": "Exists", "effect": "NoSchedule"},
)
LEGACY_AWAY_NODE_SELECTOR: Mapping[str, str] = dict([GENERIC_VIRTUAL_NODE_LABEL])
"""The CRD's default in earlier versions: every virtual-kubelet's label. The apiserver stored it in each
Offload created without a `nodeSelector`, so it is read as today's default (see `_away_placement`)."""
LEGACY_AWAY_TOLERATIONS: tuple[Mapping[str, str], ...] = (
    {"key": LEGACY_VIRTUAL_NODE_TAINT, "operator": "Exists", "effect": "NoSchedule"},
)
"""The CRD's default tolerations in earlier versions, stored like `LEGACY_AWAY_NODE_SELECTOR`."""


DATA_PLANES = ("builtin", "envoy", "gatewayapi", "inferencepool")
"""What can carry an Offload's traffic (`spec.traffic.dataPlane`): our router, Envoys we drive, the
weights of an HTTPRoute that a Gateway API implementation serves, or Envoys we drive whose home side
is an InferencePool (each home request placed by the pool's endpoint picker)."""
DEFAULT_DATA_PLANE = "builtin"


class InvalidSpec(ValueError):
    """The Offload cannot be acted on as written; the message says which field and why."""


@dataclasses.dataclass(frozen=True)
class SevereGate:
    """The fast path: a failure this bad is rolled back within one short window, not after N intervals."""

    enabled: bool = True
    error_rate_percent: float = DEFAULT_SEVERE_ERROR_RATE_PERCENT
    """The absolute threshold, for one-sided steps (weight 0 or 100)."""
    error_rate_increase_percent: float = DEFAULT_SEVERE_ERROR_RATE_INCREASE_PERCENT
    """The threshold over the other side's rate, while both sides serve."""
    min_requests: int = DEFAULT_SEVERE_MIN_REQUESTS
    window_seconds: int = DEFAULT_SEVERE_WINDOW_SECONDS


@dataclasses.dataclass(frozen=True)
class Gates:
    max_error_rate_percent: float = DEFAULT_MAX_ERROR_RATE_PERCENT
    """The absolute limit, for one-sided steps (weight 0 or 100)."""
    max_error_rate_increase_percent: float = DEFAULT_MAX_ERROR_RATE_INCREASE_PERCENT
    """The limit over the other side's rate in the same interval, while both sides serve."""
    compare_with_other_side: bool = True
    """False judges every step by the absolute limits alone (as before the comparison existed)."""
    error_statuses: tuple[str, ...] = DEFAULT_ERROR_STATUSES
    """Status classes that count as errors, besides relays that failed."""
    max_p99_latency_ms: int = DEFAULT_MAX_P99_LATENCY_MS
    min_requests_per_interval: int = DEFAULT_MIN_REQUESTS_PER_INTERVAL
    severe: SevereGate = SevereGate()


@dataclasses.dataclass(frozen=True)
class Emergency:
    """When the serving side counts as lost, so that traffic moves to the other side without a person."""

    enabled: bool = True
    grace_seconds: int = DEFAULT_EMERGENCY_GRACE_SECONDS
    min_serving_percent: int = DEFAULT_EMERGENCY_MIN_SERVING_PERCENT


@dataclasses.dataclass(frozen=True)
class Strategy:
    to_away_steps: tuple[int, ...] = DEFAULT_TO_AWAY_STEPS
    to_home_steps: tuple[int, ...] = DEFAULT_TO_HOME_STEPS
    step_interval_seconds: int = DEFAULT_STEP_INTERVAL_SECONDS
    ready_threshold_percent: int = DEFAULT_READY_THRESHOLD_PERCENT
    gates: Gates = Gates()
    failures_before_rollback: int = DEFAULT_FAILURES_BEFORE_ROLLBACK
    progress_deadline_seconds: int = DEFAULT_PROGRESS_DEADLINE_SECONDS
    emergency: Emergency = Emergency()

    def steps_toward(self, direction: Direction) -> tuple[int, ...]:
        return self.to_away_steps if direction is Direction.TO_AWAY else self.to_home_steps


@dataclasses.dataclass(frozen=True)
class AwayTemplate:
    """How the away Deployment is derived from the home one."""

    replicas: int | None
    node_selector: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...]
    annotations: Mapping[str, str]
    warm_replicas: int = 0
    """The pilot light: away replicas kept running (ready, weight 0) while home serves all traffic."""


@dataclasses.dataclass(frozen=True)
class GatewayRoute:
    """The HTTPRoute rule whose backendRefs weights the controller owns (`gatewayapi` data plane)."""

    http_route: str
    """The HTTPRoute's name, in the Offload's namespace."""
    rule: str
    """The rule's `name`; '' picks the one rule that sends to the home Service."""
    away_service: str
    """Our router in its away-only role: the Service that carries the away share."""
    away_port: int
    away_namespace: str = ""
    """'' for the Offload's namespace; another needs a ReferenceGrant there."""


@dataclasses.dataclass(frozen=True)
class PoolRef:
    """The InferencePool an `inferencepool` Offload's home side is (`spec.traffic.inferencePool`)."""

    name: str
    namespace: str
    """As written, defaulted to the Offload's: the controller refuses any other (its pods would not
    be this Offload's home side)."""


@dataclasses.dataclass(frozen=True)
class RouteSpec:
    """Which requests are the Offload's (`spec.route`), and who else may route under its hosts."""

    hosts: tuple[str, ...] = ()
    path_prefix: str = ""
    allowed_namespaces: tuple[str, ...] = ()
    """Other namespaces whose Offloads may claim paths of the hosts this one owns
    (see `vk_provider.offload.claims`)."""


@dataclasses.dataclass(frozen=True)
class OffloadSpec:
    namespace: str
    name: str
    uid: str
    generation: int
    home_deployment: str
    home_service: str
    away: AwayTemplate
    placement: Direction
    strategy: Strategy
    paused: bool
    promotion: str
    """The promote annotation's value ('' when absent): a new value asks to skip the remaining steps."""
    deleting: bool = False
    """`metadata.deletionTimestamp` is set: the Offload goes home, then lets go of its away side."""
    finalizers: tuple[str, ...] = ()
    resource_version: str = ""
    retry: str = ""
    """The retry annotation's value ('' when absent): a new value after a migration rolled back or
    failed asks to run it again."""
    flip_strategy: OneOffStrategy | None = None
    """The steps and interval a person's flip asked for the migration it starts, and no other."""
    data_plane: str = DEFAULT_DATA_PLANE
    """Which data plane the weights are applied on and the gates read (`DATA_PLANES`)."""
    gateway_route: GatewayRoute | None = None
    """Set exactly when `data_plane` is `gatewayapi`."""
    inference_pool: PoolRef | None = None
    """Set exactly when `data_plane` is `inferencepool`."""
    route: RouteSpec = RouteSpec()
    created: str = ""
    """`metadata.creationTimestamp`: the age of the Offload's route claim."""
    replicas: int | None = None
    """`spec.replicas`: the total replicas of a spill-over Offload, home and away (its `scale`
    subresource); None: `spill_over.max_home_replicas`."""
    spill_over: SpillOver | None = None
    """Set when the Offload spills over: home as far as the home GPUs hold it, the rest away."""
    warm_until: str = ""
    """The warm-until annotation as written ('' when absent): `vk_provider.controller.warming` reads
    it, and a value it cannot read is reported there, never a reason to stop acting on the Offload."""
    warmed_by: str = ""
    """The warmed-by annotation ('' when absent): who asked for the warm-up, for messages."""

    @property
    def total_replicas(self) -> int:
        """The replicas a spill-over Offload runs, home and away (0 for one that does not spill over)."""
        if self.spill_over is None:
            return 0
        return self.spill_over.max_home_replicas if self.replicas is None else self.replicas

    def retry_requested(self, phase: Phase | None, handled: str | None) -> bool:
        """Whether the retry annotation asks for a new attempt of a migration that ended badly."""
        return bool(self.retry) and self.retry != handled and phase in (Phase.ROLLED_BACK, Phase.FAILED)

    def migration_pace(self, direction: Direction, handled_flip: str | None) -> tuple[tuple[int, ...], int]:
        """The steps and step interval of a migration toward `direction` started now by the strategy:
        a person's flip toward it not handled yet brings its own (either), else the spec's."""
        steps, interval = self.strategy.steps_toward(direction), self.strategy.step_interval_seconds
        one_off = self.flip_strategy
        if one_off is not None and one_off.applies(direction, handled_flip):
            steps = one_off.steps or steps
            interval = one_off.step_interval_seconds or interval
        return steps, interval

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _mapping(value: Any, field: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidSpec(f"{field} must be an object")
    return value


def _integer(value: Any, field: str, default: int, *, minimum: int = 0, maximum: int | None = None) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidSpec(f"{field} must be a whole number, not {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        upper = "" if maximum is None else f"..{maximum}"
        raise InvalidSpec(f"{field} {value} is outside {minimum}{upper}")
    return value


def _name(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidSpec(f"{field} must name an object")
    return value


def _strings(value: Any, field: str) -> dict[str, str]:
    mapping = _mapping(value, field)
    if not all(isinstance(item, str) for item in mapping.values()):
        raise InvalidSpec(f"{field} values must be strings")
    return {str(key): str(item) for key, item in mapping.items()}


def _away_placement(away: Mapping[str, Any]) -> tuple[dict[str, str], tuple[dict[str, Any], ...]]:
    """`spec.away`'s nodeSelector and tolerations, defaulted, with earlier versions' defaults upgraded.

    The old defaults (every virtual-kubelet's label and taint) were stored in each Offload when it was
    created: read as written, they would now keep its away pods off our nodes (which have our own
    taint) and let them onto any other virtual-kubelet's. Users who took the default meant our nodes,
    so the stored old default reads as today's. A toleration of the old taint in a list of the user's
    own gains ours beside it, so their away pods still reach our nodes; the rest of the list is theirs.
    """
    raw_selector = away.get("nodeSelector")
    if raw_selector is None:
        node_selector = dict(DEFAULT_AWAY_NODE_SELECTOR)
    else:
        node_selector = _strings(raw_selector, "spec.away.nodeSelector")
        if node_selector == LEGACY_AWAY_NODE_SELECTOR:
            node_selector = dict(DEFAULT_AWAY_NODE_SELECTOR)
    raw_tolerations = away.get("tolerations")
    if raw_tolerations is None:
        raw_tolerations = list(DEFAULT_AWAY_TOLERATIONS)
    if not isinstance(raw_tolerations, list) or not all(
        isinstance(item, Mapping) for item in raw_tolerations
    ):
        raise InvalidSpec("spec.away.tolerations must be a list of tolerations")
    tolerations = [dict(item) for item in raw_tolerations]
    legacy, ours = dict(LEGACY_AWAY_TOLERATIONS[0]), dict(DEFAULT_AWAY_TOLERATIONS[0])
    if tolerations == [legacy]:
        tolerations = [ours]
    elif legacy in tolerations and ours not in tolerations:
        tolerations.append(ours)
    return node_selector, tuple(tolerations)


def _steps(value: Any, field: str, default: tuple[int, ...]) -> tuple[int, ...]:
    if value is None:
        return default
    if not isinstance(value, list):
        raise InvalidSpec(f"{field} must be a list")
    try:
        return validate_steps(value)
    except ValueError as error:
        raise InvalidSpec(f"{field}: {error}") from None


def _number(value: Any, field: str, default: float, *, maximum: float = 100.0) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidSpec(f"{field} must be a number, not {value!r}")
    if not 0 <= value <= maximum:
        raise InvalidSpec(f"{field} {value} is outside 0..{maximum:g}")
    return float(value)


def _flag(value: Any, field: str, *, default: bool) -> bool:
    """An optional boolean field: absent is `default`."""
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InvalidSpec(f"{field} must be true or false, not {value!r}")
    return value


def _gateway_route(traffic: Mapping[str, Any]) -> GatewayRoute:
    route = _mapping(traffic.get("httpRoute"), "spec.traffic.httpRoute")
    away = _mapping(traffic.get("awayService"), "spec.traffic.awayService")
    if not route or not away:
        raise InvalidSpec(
            "spec.traffic.dataPlane gatewayapi needs spec.traffic.httpRoute (the HTTPRoute whose weights "
            "move) and spec.traffic.awayService (the router Service that carries the away share)"
        )
    rule = route.get("rule") or ""
    if not isinstance(rule, str):
        raise InvalidSpec(f"spec.traffic.httpRoute.rule must be a rule's name, not {rule!r}")
    namespace = away.get("namespace") or ""
    if not isinstance(namespace, str):
        raise InvalidSpec(f"spec.traffic.awayService.namespace must be a namespace, not {namespace!r}")
    return GatewayRoute(
        http_route=_name(route.get("name"), "spec.traffic.httpRoute.name"),
        rule=rule,
        away_service=_name(away.get("name"), "spec.traffic.awayService.name"),
        away_port=_integer(away.get("port"), "spec.traffic.awayService.port", 80, minimum=1, maximum=65535),
        away_namespace=namespace,
    )


def _inference_pool(traffic: Mapping[str, Any], namespace: str) -> PoolRef:
    pool = _mapping(traffic.get("inferencePool"), "spec.traffic.inferencePool")
    if not pool:
        raise InvalidSpec(
            "spec.traffic.dataPlane inferencepool needs spec.traffic.inferencePool (the InferencePool "
            "whose pods are the home side)"
        )
    pool_namespace = pool.get("namespace") or namespace
    if not isinstance(pool_namespace, str):
        raise InvalidSpec(f"spec.traffic.inferencePool.namespace must be a namespace, not {pool_namespace!r}")
    return PoolRef(_name(pool.get("name"), "spec.traffic.inferencePool.name"), pool_namespace)


def _names(value: Any, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise InvalidSpec(f"{field} must be a list of non-empty strings")
    return tuple(value)


def _route(spec: Mapping[str, Any]) -> RouteSpec:
    route = _mapping(spec.get("route"), "spec.route")
    prefix = route.get("pathPrefix") or ""
    if not isinstance(prefix, str) or (prefix and not prefix.startswith("/")):
        raise InvalidSpec(f"spec.route.pathPrefix must be a path starting with /, not {prefix!r}")
    return RouteSpec(
        hosts=_names(route.get("hosts"), "spec.route.hosts"),
        path_prefix=prefix,
        allowed_namespaces=_names(route.get("allowedNamespaces"), "spec.route.allowedNamespaces"),
    )


def _severe(gates: Mapping[str, Any]) -> SevereGate:
    severe = _mapping(gates.get("severe"), "spec.strategy.gates.severe")
    return SevereGate(
        enabled=_flag(severe.get("enabled"), "spec.strategy.gates.severe.enabled", default=True),
        error_rate_percent=_number(
            severe.get("errorRatePercent"),
            "spec.strategy.gates.severe.errorRatePercent",
            DEFAULT_SEVERE_ERROR_RATE_PERCENT,
        ),
        error_rate_increase_percent=_number(
            severe.get("errorRateIncreasePercent"),
            "spec.strategy.gates.severe.errorRateIncreasePercent",
            DEFAULT_SEVERE_ERROR_RATE_INCREASE_PERCENT,
        ),
        min_requests=_integer(
            severe.get("minRequests"),
            "spec.strategy.gates.severe.minRequests",
            DEFAULT_SEVERE_MIN_REQUESTS,
            minimum=1,
        ),
        window_seconds=_integer(
            severe.get("windowSeconds"),
            "spec.strategy.gates.severe.windowSeconds",
            DEFAULT_SEVERE_WINDOW_SECONDS,
            minimum=1,
        ),
    )


def _error_statuses(value: Any) -> tuple[str, ...]:
    field = "spec.strategy.gates.errorStatuses"
    if value is None:
        return DEFAULT_ERROR_STATUSES
    if not isinstance(value, list) or not all(item in STATUS_CLASSES for item in value):
        raise InvalidSpec(f"{field} must be a list of {' and '.join(STATUS_CLASSES)}, not {value!r}")
    return tuple(sorted(set(value)))


def _emergency(strategy: Mapping[str, Any]) -> Emergency:
    emergency = _mapping(strategy.get("emergency"), "spec.strategy.emergency")
    return Emergency(
        enabled=_flag(emergency.get("enabled"), "spec.strategy.emergency.enabled", default=True),
        grace_seconds=_integer(
            emergency.get("graceSeconds"),
            "spec.strategy.emergency.graceSeconds",
            DEFAULT_EMERGENCY_GRACE_SECONDS,
            minimum=1,
        ),
        min_serving_percent=_integer(
            emergency.get("minServingPercent"),
            "spec.strategy.emergency.minServingPercent",
            DEFAULT_EMERGENCY_MIN_SERVING_PERCENT,
            maximum=100,
        ),
    )


def _flip_strategy(value: Any) -> OneOffStrategy | None:
    if value is None or value == "":
        return None
    try:
        return parse_one_off(str(value))
    except ValueError as error:
        raise InvalidSpec(
            f"metadata.annotations[{FLIP_STRATEGY_ANNOTATION}]: {error}; remove it, or flip again"
        ) from None


def _factor(value: Any, field: str) -> float:
    if value is None:
        return 1.0
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_WEIGHT_FACTOR:
        raise InvalidSpec(
            f"{field} must be a number above 0 and at most {MAX_WEIGHT_FACTOR:g}, not {value!r}"
        )
    return float(value)


def _spill_over(spec: Mapping[str, Any]) -> tuple[int | None, SpillOver | None]:
    """`spec.replicas` and `spec.spillOver`, checked against each other."""
    raw = spec.get("spillOver")
    replicas = spec.get("replicas")
    if raw is None:
        if replicas is not None:
            raise InvalidSpec(
                "spec.replicas scales a spill-over Offload: set spec.spillOver (maxHomeReplicas at least) "
                "to let an autoscaler scale this one"
            )
        return None, None
    spill = _mapping(raw, "spec.spillOver")
    if spill.get("maxHomeReplicas") is None:
        raise InvalidSpec("spec.spillOver.maxHomeReplicas is required: how many replicas the home GPUs hold")
    parsed = SpillOver(
        max_home_replicas=_integer(
            spill.get("maxHomeReplicas"), "spec.spillOver.maxHomeReplicas", 0, maximum=MAX_TOTAL_REPLICAS
        ),
        min_away_replicas=_integer(
            spill.get("minAwayReplicas"), "spec.spillOver.minAwayReplicas", 0, maximum=MAX_AWAY_REPLICAS
        ),
        max_away_replicas=_integer(
            spill.get("maxAwayReplicas"),
            "spec.spillOver.maxAwayReplicas",
            MAX_AWAY_REPLICAS,
            maximum=MAX_AWAY_REPLICAS,
        ),
        home_weight_factor=_factor(spill.get("homeWeightFactor"), "spec.spillOver.homeWeightFactor"),
        away_weight_factor=_factor(spill.get("awayWeightFactor"), "spec.spillOver.awayWeightFactor"),
    )
    if parsed.min_away_replicas > parsed.max_away_replicas:
        raise InvalidSpec(
            f"spec.spillOver.minAwayReplicas {parsed.min_away_replicas} is above maxAwayReplicas "
            f"{parsed.max_away_replicas}"
        )
    total = None if replicas is None else _integer(replicas, "spec.replicas", 0, maximum=MAX_TOTAL_REPLICAS)
    if total is not None and total > parsed.max_replicas:
        raise InvalidSpec(
            f"spec.replicas {total} is above what the Offload may run: {parsed.max_home_replicas} home "
            f"(maxHomeReplicas) + {parsed.max_away_replicas} away (maxAwayReplicas) = {parsed.max_replicas}"
        )
    return total, parsed


def _warm_replicas(away: Mapping[str, Any], spilling_over: bool) -> int:
    """`spec.away.warmReplicas`, refused beside `spec.spillOver` (whose minAwayReplicas keeps away
    replicas running already, and serving)."""
    warm = _integer(away.get("warmReplicas"), "spec.away.warmReplicas", 0, maximum=MAX_AWAY_REPLICAS)
    if warm and spilling_over:
        raise InvalidSpec(
            "spec.away.warmReplicas does not apply to a spill-over Offload: its away replicas serve "
            "already; keep some running with spec.spillOver.minAwayReplicas instead"
        )
    return warm


def parse_offload(offload: Mapping[str, Any]) -> OffloadSpec:
    """The typed spec, or InvalidSpec saying what is wrong."""
    metadata = _mapping(offload.get("metadata"), "metadata")
    spec = _mapping(offload.get("spec"), "spec")
    home = _mapping(spec.get("home"), "spec.home")
    away = _mapping(spec.get("away"), "spec.away")
    strategy = _mapping(spec.get("strategy"), "spec.strategy")
    gates = _mapping(strategy.get("gates"), "spec.strategy.gates")
    traffic = _mapping(spec.get("traffic"), "spec.traffic")
    data_plane = traffic.get("dataPlane", DEFAULT_DATA_PLANE)
    if data_plane not in DATA_PLANES:
        raise InvalidSpec(
            f"spec.traffic.dataPlane must be one of {', '.join(DATA_PLANES)}, not {data_plane!r}"
        )
    placement = spec.get("placement")
    if placement not in ("home", "away"):
        raise InvalidSpec(f"spec.placement must be home or away, not {placement!r}")
    node_selector, tolerations = _away_placement(away)
    max_error_rate = gates.get("maxErrorRatePercent", DEFAULT_MAX_ERROR_RATE_PERCENT)
    if isinstance(max_error_rate, bool) or not isinstance(max_error_rate, int | float):
        raise InvalidSpec(f"spec.strategy.gates.maxErrorRatePercent must be a number, not {max_error_rate!r}")
    replicas = away.get("replicas")
    total_replicas, spill_over = _spill_over(spec)
    name = _name(metadata.get("name"), "metadata.name")
    annotations = _mapping(metadata.get("annotations"), "metadata.annotations")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidSpec(
            f"metadata.name is {len(name)} characters, more than {MAX_NAME_LENGTH}: it must fit in the "
            f"{OFFLOAD_LABEL} label of the away pods; recreate the Offload with a shorter name"
        )
    namespace = _name(metadata.get("namespace"), "metadata.namespace")
    return OffloadSpec(
        namespace=namespace,
        name=name,
        uid=str(metadata.get("uid") or ""),
        generation=_integer(metadata.get("generation"), "metadata.generation", 0),
        home_deployment=_name(home.get("deployment"), "spec.home.deployment"),
        home_service=_name(home.get("service"), "spec.home.service"),
        away=AwayTemplate(
            replicas=None
            if replicas is None
            else _integer(replicas, "spec.away.replicas", 0, maximum=MAX_AWAY_REPLICAS),
            node_selector=node_selector,
            tolerations=tolerations,
            annotations=_strings(away.get("annotations"), "spec.away.annotations"),
            warm_replicas=_warm_replicas(away, spill_over is not None),
        ),
        placement=Direction(placement),
        strategy=Strategy(
            to_away_steps=_steps(
                strategy.get("toAwaySteps"), "spec.strategy.toAwaySteps", DEFAULT_TO_AWAY_STEPS
            ),
            to_home_steps=_steps(
                strategy.get("toHomeSteps"), "spec.strategy.toHomeSteps", DEFAULT_TO_HOME_STEPS
            ),
            step_interval_seconds=_integer(
                strategy.get("stepIntervalSeconds"),
                "spec.strategy.stepIntervalSeconds",
                DEFAULT_STEP_INTERVAL_SECONDS,
                minimum=1,
            ),
            ready_threshold_percent=_integer(
                strategy.get("readyThresholdPercent"),
                "spec.strategy.readyThresholdPercent",
                DEFAULT_READY_THRESHOLD_PERCENT,
                minimum=1,
                maximum=100,
            ),
            gates=Gates(
                max_error_rate_percent=float(max_error_rate),
                max_error_rate_increase_percent=_number(
                    gates.get("maxErrorRateIncreasePercent"),
                    "spec.strategy.gates.maxErrorRateIncreasePercent",
                    DEFAULT_MAX_ERROR_RATE_INCREASE_PERCENT,
                ),
                compare_with_other_side=_flag(
                    gates.get("compareWithOtherSide"),
                    "spec.strategy.gates.compareWithOtherSide",
                    default=True,
                ),
                error_statuses=_error_statuses(gates.get("errorStatuses")),
                max_p99_latency_ms=_integer(
                    gates.get("maxP99LatencyMilliseconds"),
                    "spec.strategy.gates.maxP99LatencyMilliseconds",
                    DEFAULT_MAX_P99_LATENCY_MS,
                    minimum=1,
                ),
                min_requests_per_interval=_integer(
                    gates.get("minRequestsPerInterval"),
                    "spec.strategy.gates.minRequestsPerInterval",
                    DEFAULT_MIN_REQUESTS_PER_INTERVAL,
                ),
                severe=_severe(gates),
            ),
            failures_before_rollback=_integer(
                strategy.get("failuresBeforeRollback"),
                "spec.strategy.failuresBeforeRollback",
                DEFAULT_FAILURES_BEFORE_ROLLBACK,
                minimum=1,
            ),
            progress_deadline_seconds=_integer(
                strategy.get("progressDeadlineSeconds"),
                "spec.strategy.progressDeadlineSeconds",
                DEFAULT_PROGRESS_DEADLINE_SECONDS,
                minimum=1,
            ),
            emergency=_emergency(strategy),
        ),
        paused=spec.get("paused") is True,
        promotion=str(annotations.get(PROMOTE_ANNOTATION) or ""),
        deleting=metadata.get("deletionTimestamp") is not None,
        finalizers=tuple(str(item) for item in metadata.get("finalizers") or ()),
        resource_version=str(metadata.get("resourceVersion") or ""),
        retry=str(annotations.get(RETRY_ANNOTATION) or ""),
        flip_strategy=_flip_strategy(annotations.get(FLIP_STRATEGY_ANNOTATION)),
        data_plane=data_plane,
        gateway_route=_gateway_route(traffic) if data_plane == "gatewayapi" else None,
        inference_pool=_inference_pool(traffic, namespace) if data_plane == "inferencepool" else None,
        route=_route(spec),
        created=str(metadata.get("creationTimestamp") or ""),
        replicas=total_replicas,
        spill_over=spill_over,
        warm_until=str(annotations.get(WARM_UNTIL_ANNOTATION) or ""),
        warmed_by=str(annotations.get(WARMED_BY_ANNOTATION) or ""),
    )
