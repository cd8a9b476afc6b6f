"""The one HTTPRoute rule whose weights an Offload owns: find it, write a weight, read what applies.

Pure: raw HTTPRoute JSON in, raw JSON out, no API calls. The `gatewayapi` data plane
(`vk_provider.controller.gatewayapi`) does the reading and writing around these.

The rule is the one named by `spec.traffic.httpRoute.rule`, else the one rule whose backendRefs name
the home Service. Its backendRefs become exactly two: the home Service (its port and any filters
kept) with weight `100 - w`, and the away Service with weight `w`. Another backend in that rule is
refused rather than dropped: it is somebody else's traffic.

Each weight written is numbered (the route's `WEIGHTS_ANNOTATION`: `<number>:<away weight>`), and the
rule gains a `ResponseHeaderModifier` that sets `WEIGHT_HEADER` to that number on every response it
routes. A gateway replica that answers a probe with the current number serves the current weights:
that is how "every replica applies it" is checked beyond the route's `Accepted` condition, which
only says that the implementation's controller took the route (Knative's prober does the same with
a hash of its configuration).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from vk_provider.controller.routers import RouterUnreachable
from vk_provider.offload.spec import GatewayRoute

GROUP = "gateway.networking.k8s.io"
VERSION = "v1"
WEIGHTS_ANNOTATION = "offload.vk-provider.dev/weights"
WEIGHT_HEADER = "X-Vk-Offload-Weights"
"""Set by the owned rule on its responses: the number of the weights it serves."""

RawObject = dict[str, Any]


class RouteProblem(RouterUnreachable):
    """The HTTPRoute cannot carry the Offload's weights as it stands: a condition and an Event before
    a migration; mid-migration, a wait like any other data plane's (within the progress deadline)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclasses.dataclass(frozen=True)
class Written:
    """The weights the route carries, as last written by a controller."""

    number: int
    away_weight: int


def route_path(namespace: str, name: str) -> str:
    return f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/httproutes/{name}"


def written(route: Mapping[str, Any]) -> Written | None:
    """The weights the annotation says were written last, or None (never, or unreadable)."""
    value = ((route.get("metadata") or {}).get("annotations") or {}).get(WEIGHTS_ANNOTATION)
    number, _, weight = str(value or "").partition(":")
    if not (number.isdigit() and weight.isdigit() and 0 <= int(weight) <= 100):
        return None
    return Written(int(number), int(weight))


def _is_service(ref: Mapping[str, Any], name: str, namespace: str, route_namespace: str) -> bool:
    return (
        ref.get("group", "") in ("", "core")
        and ref.get("kind", "Service") == "Service"
        and ref.get("name") == name
        and (ref.get("namespace") or route_namespace) == (namespace or route_namespace)
    )


def owned_rule(route: Mapping[str, Any], target: GatewayRoute, home_service: str) -> int:
    """The index of the rule the Offload owns, or RouteProblem saying why there is none."""
    metadata = route.get("metadata") or {}
    namespace = str(metadata.get("namespace") or "")
    name = metadata.get("name")
    rules: Sequence[Mapping[str, Any]] = (route.get("spec") or {}).get("rules") or ()
    if target.rule:
        named = [index for index, rule in enumerate(rules) if rule.get("name") == target.rule]
        if not named:
            raise RouteProblem(
                "HTTPRouteRuleNotFound", f'HTTPRoute "{name}" has no rule named "{target.rule}"'
            )
        index = named[0]
    else:
        sending_home = [
            index
            for index, rule in enumerate(rules)
            if any(_is_service(ref, home_service, "", namespace) for ref in rule.get("backendRefs") or ())
        ]
        if len(sending_home) != 1:
            how_many = "no rule" if not sending_home else f"{len(sending_home)} rules"
            raise RouteProblem(
                "HTTPRouteRuleNotFound",
                f'HTTPRoute "{name}" has {how_many} sending to the home Service "{home_service}"; '
                "name the rule with spec.traffic.httpRoute.rule",
            )
        index = sending_home[0]
    foreign = [
        str(ref.get("name"))
        for ref in rules[index].get("backendRefs") or ()
        if not _is_service(ref, home_service, "", namespace)
        and not _is_service(ref, target.away_service, target.away_namespace, namespace)
    ]
    if foreign:
        raise RouteProblem(
            "HTTPRouteRuleNotOwned",
            f'the rule of HTTPRoute "{name}" also sends to {", ".join(foreign)}: the Offload owns the '
            "weights of a rule with only the home and away Services",
        )
    return index


def weights_of(
    rule: Mapping[str, Any], target: GatewayRoute, home_service: str, namespace: str
) -> int | None:
    """The away weight the rule's backendRefs give (as a percentage), or None if not ours to read."""
    home = away = None
    for ref in rule.get("backendRefs") or ():
        weight = ref.get("weight", 1)
        if _is_service(ref, home_service, "", namespace):
            home = weight
        elif _is_service(ref, target.away_service, target.away_namespace, namespace):
            away = weight
    if not isinstance(home, int) or not isinstance(away, int) or home + away != 100:
        return None
    return away


def with_weight(
    route: Mapping[str, Any], index: int, *, target: GatewayRoute, home_service: str, weight: int, number: int
) -> RawObject:
    """A copy of `route` whose owned rule gives `weight` percent to the away Service, numbered `number`."""
    updated: RawObject = copy.deepcopy(dict(route))
    namespace = str(updated["metadata"].get("namespace") or "")
    rule = updated["spec"]["rules"][index]
    refs = rule.get("backendRefs") or []
    home = next((ref for ref in refs if _is_service(ref, home_service, "", namespace)), None)
    if home is None:
        raise RouteProblem(
            "HTTPRouteRuleNotOwned",
            f'the owned rule of HTTPRoute "{updated["metadata"].get("name")}" no longer sends to the home '
            f'Service "{home_service}"',
        )
    away: RawObject = {"name": target.away_service, "port": target.away_port}
    if target.away_namespace and target.away_namespace != namespace:
        away["namespace"] = target.away_namespace
    rule["backendRefs"] = [{**home, "weight": 100 - weight}, {**away, "weight": weight}]
    rule["filters"] = _with_weight_header(rule.get("filters") or [], number)
    annotations = updated["metadata"].setdefault("annotations", {})
    annotations[WEIGHTS_ANNOTATION] = f"{number}:{weight}"
    return updated


def _with_weight_header(filters: list[RawObject], number: int) -> list[RawObject]:
    """The rule's filters with our header set on responses (merged into an existing
    ResponseHeaderModifier: a rule may hold only one)."""
    header = {"name": WEIGHT_HEADER, "value": str(number)}
    for item in filters:
        if item.get("type") == "ResponseHeaderModifier":
            modifier = item.setdefault("responseHeaderModifier", {})
            ours = WEIGHT_HEADER.lower()
            others = [h for h in modifier.get("set") or () if str(h.get("name", "")).lower() != ours]
            modifier["set"] = [*others, header]
            return filters
    return [*filters, {"type": "ResponseHeaderModifier", "responseHeaderModifier": {"set": [header]}}]


def parent_name(ref: Mapping[str, Any], route_namespace: str) -> str:
    section = f"/{ref['sectionName']}" if ref.get("sectionName") else ""
    namespace = ref.get("namespace") or route_namespace
    return f"{ref.get('kind', 'Gateway')} {namespace}/{ref.get('name')}{section}"


def _same_parent(status_ref: Mapping[str, Any], ref: Mapping[str, Any], route_namespace: str) -> bool:
    def key(item: Mapping[str, Any]) -> tuple[Any, ...]:
        return (
            item.get("group", GROUP),
            item.get("kind", "Gateway"),
            item.get("namespace") or route_namespace,
            item.get("name"),
            item.get("sectionName", ""),
            item.get("port"),
        )

    return key(status_ref) == key(ref)


def parent_verdicts(route: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(parent, why it is behind) for each parent of the route; why is '' for a parent that has
    accepted the route's current generation."""
    metadata = route.get("metadata") or {}
    namespace = str(metadata.get("namespace") or "")
    generation = int(metadata.get("generation") or 0)
    statuses: Sequence[Mapping[str, Any]] = (route.get("status") or {}).get("parents") or ()
    refs: Sequence[Mapping[str, Any]] = (route.get("spec") or {}).get("parentRefs") or ()
    if not refs:
        return [("the HTTPRoute", "it has no parentRefs: no gateway serves it")]
    verdicts = []
    for ref in refs:
        accepted = [
            condition
            for entry in statuses
            if _same_parent(entry.get("parentRef") or {}, ref, namespace)
            for condition in entry.get("conditions") or ()
            if condition.get("type") == "Accepted"
        ]
        verdicts.append((parent_name(ref, namespace), _why_behind(accepted, generation)))
    return verdicts


def _why_behind(accepted: Sequence[Mapping[str, Any]], generation: int) -> str:
    if not accepted:
        return "it has not reported on the route"
    latest = max(accepted, key=lambda condition: int(condition.get("observedGeneration") or 0))
    seen = int(latest.get("observedGeneration") or 0)
    if latest.get("status") != "True":
        return f"it does not accept the route: {latest.get('reason')}: {latest.get('message', '')}"
    if seen < generation:
        return f"it accepted generation {seen}, not {generation} yet"
    return ""
