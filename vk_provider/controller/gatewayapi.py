"""The `gatewayapi` data plane: the weights of one HTTPRoute rule, served by a Gateway API
implementation the cluster already runs (Envoy Gateway, Istio, Cilium, kgateway, ...).

The rule sends to two Services: the home Service, straight from the gateway, and an away Service,
which is our router in an away-only role (`vk_provider.routetable.building`: for a `gatewayapi`
Offload it sends everything it gets away, rewriting Host and signing for SageMaker as a provider
needs, and counting it). Only the away share crosses Python.

- Apply: write the rule's backendRefs weights (`vk_provider.controller.httproutes`), never giving a
  share to a side without a ready endpoint: the Gateway API answers 503 for such a share, with no
  fallback to the other backend. The write carries the route's resourceVersion, so a concurrent
  edit is a conflict (tried again on the next pass), never lost.
- Verify: every parent (Gateway) has `Accepted` the route's current generation, and, when the
  gateway's replicas are known (`--gateway-url`, or its pods by label), each replica answers a probe
  with the number of the weights written (`WEIGHT_HEADER`). Each is a view: one behind holds the step.
- Gates: the away side from the routers' metrics; the home side from Prometheus (`HomeMetrics`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import aiohttp

from vk_provider.controller.dataplanes import BuiltinRouters
from vk_provider.controller.gates import SideSample
from vk_provider.controller.homemetrics import HomeMetrics
from vk_provider.controller.httproutes import (
    WEIGHT_HEADER,
    RouteProblem,
    owned_rule,
    parent_verdicts,
    route_path,
    weights_of,
    with_weight,
    written,
)
from vk_provider.controller.routers import REQUEST_TIMEOUT, RouterDirectory, RouterUnreachable, RouteView
from vk_provider.kit.kube import KubeApi, KubeApiError, resource_path
from vk_provider.offload.spec import GatewayRoute, OffloadSpec

PROBE_HEADER = "X-Vk-Offload-Probe"
"""Sent with each probe, so that a backend's logs can tell probes from users."""


class WeightRefused(RouterUnreachable):
    """The weight would give a share to a side with no ready endpoint; nothing is written."""


class GatewayRoutes:
    name = "gatewayapi"

    def __init__(
        self,
        api: KubeApi,
        routers: RouterDirectory,
        *,
        gateways: RouterDirectory | None = None,
        home_metrics: HomeMetrics | None = None,
    ) -> None:
        self._api = api
        self._routers = routers
        self._away_side = BuiltinRouters(routers)
        self._gateways = gateways
        self._home_metrics = home_metrics
        self._session: aiohttp.ClientSession | None = None

    # -- the route -------------------------------------------------------------------------------

    @staticmethod
    def _target(spec: OffloadSpec) -> GatewayRoute:
        if spec.gateway_route is None:  # parse_offload sets it for every gatewayapi Offload
            raise RouteProblem("InvalidSpec", "spec.traffic.httpRoute is missing")
        return spec.gateway_route

    async def _route(self, spec: OffloadSpec) -> dict[str, Any]:
        name = self._target(spec).http_route
        try:
            return await self._api.get(route_path(spec.namespace, name))
        except KubeApiError as error:
            if error.not_found:
                raise RouteProblem(
                    "HTTPRouteNotFound",
                    f'HTTPRoute "{name}" not found in {spec.namespace} (or the Gateway API CRDs are not '
                    "installed); nothing is moved until it exists",
                ) from None
            raise RouterUnreachable(f'reading HTTPRoute "{name}": {error}') from None

    async def check(self, spec: OffloadSpec) -> None:
        """RouteProblem when the route or its rule cannot carry the Offload's weights."""
        owned_rule(await self._route(spec), self._target(spec), spec.home_service)

    async def apply(self, spec: OffloadSpec, weight: int) -> None:
        target = self._target(spec)
        route = await self._route(spec)
        index = owned_rule(route, target, spec.home_service)
        rule = route["spec"]["rules"][index]
        last = written(route)
        if last is not None and last.away_weight == weight == weights_of(
            rule, target, spec.home_service, spec.namespace
        ):
            return
        await self._guard(spec, target, weight)
        number = (last.number if last else 0) + 1
        updated = with_weight(
            route, index, target=target, home_service=spec.home_service, weight=weight, number=number
        )
        try:
            await self._api.request("PUT", route_path(spec.namespace, target.http_route), body=updated)
        except KubeApiError as error:
            # A conflict: the route changed since it was read; the next pass reads it again.
            raise RouterUnreachable(f'writing HTTPRoute "{target.http_route}": {error}') from None

    async def _guard(self, spec: OffloadSpec, target: GatewayRoute, weight: int) -> None:
        """WeightRefused if `weight` gives a share to a side with no ready endpoint."""
        shares = {"home": 100 - weight, "away": weight}
        services = {
            "home": (spec.namespace, spec.home_service),
            "away": (target.away_namespace or spec.namespace, target.away_service),
        }
        for side, share in shares.items():
            if share == 0:
                continue
            namespace, service = services[side]
            if not await self._ready_endpoints(namespace, service):
                raise WeightRefused(
                    f"away weight {weight} would send {share}% to the {side} Service {namespace}/{service}, "
                    "which has no ready endpoint (the gateway would answer 503 for that share)"
                )
        if weight and not min(view.usable.get("away", 0) for view in await self._router_views(spec)):
            raise WeightRefused(f"away weight {weight}: a router has no usable away endpoint of the route")

    async def _ready_endpoints(self, namespace: str, service: str) -> int:
        listing = await self._api.get(
            resource_path("discovery.k8s.io/v1", "endpointslices", namespace=namespace),
            query={"labelSelector": f"kubernetes.io/service-name={service}"},
        )
        return sum(
            len(endpoint.get("addresses") or ())
            for endpoint_slice in listing.get("items") or ()
            for endpoint in endpoint_slice.get("endpoints") or ()
            if _ready(endpoint.get("conditions") or {})
        )

    async def _router_views(self, spec: OffloadSpec) -> list[RouteView]:
        return await self._routers.views(spec.namespace, spec.name)

    # -- verification ----------------------------------------------------------------------------

    async def views(self, spec: OffloadSpec) -> list[RouteView]:
        target = self._target(spec)
        route = await self._route(spec)
        index = owned_rule(route, target, spec.home_service)
        rule = route["spec"]["rules"][index]
        last = written(route)
        weight = weights_of(rule, target, spec.home_service, spec.namespace)
        carried = weight if last is not None and last.away_weight == weight else None
        routers = await self._router_views(spec)
        usable = {
            "home": await self._ready_endpoints(spec.namespace, spec.home_service),
            "away": min(view.usable.get("away", 0) for view in routers),
        }
        views = [
            RouteView(f"{parent} ({why})" if why else parent, None if why else carried, usable)
            for parent, why in parent_verdicts(route)
        ]
        if self._gateways is not None and carried is not None and last is not None:
            host, path = probe_target(route, index)
            probed = self._probe_all(self._gateways, host, path, number=last.number, carried=carried)
            views.extend(RouteView(name, weight, usable) for name, weight in await probed)
        return views

    async def _probe_all(
        self, gateways: RouterDirectory, host: str, path: str, *, number: int, carried: int
    ) -> list[tuple[str, int | None]]:
        """(replica, the away weight it serves or None) for each gateway replica."""
        urls = await gateways.urls()
        seen = await asyncio.gather(*(self._probe(url, host, path) for url in urls))
        views = []
        for url, answer in zip(urls, seen, strict=True):
            name = f"gateway {url}"
            if answer != str(number):
                name += f" (answers weights {answer or 'without our header'}, not {number})"
            views.append((name, carried if answer == str(number) else None))
        return views

    async def _probe(self, url: str, host: str, path: str) -> str:
        """The weights' number a gateway replica's answer carries ('' when none)."""
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=REQUEST_TIMEOUT)
        headers = {PROBE_HEADER: "1"} | ({"Host": host} if host else {})
        try:
            async with self._session.get(url + path, headers=headers, allow_redirects=False) as response:
                return response.headers.get(WEIGHT_HEADER, "")
        except (aiohttp.ClientError, TimeoutError) as error:
            raise RouterUnreachable(f"gateway {url}: {error or type(error).__name__}") from None

    # -- gates -----------------------------------------------------------------------------------

    def measures(self, side: str) -> bool:
        # The gateway carries the home share; only Prometheus knows what it served.
        return side == "away" or self._home_metrics is not None

    async def samples(self, spec: OffloadSpec, side: str) -> dict[str, SideSample]:
        if side == "away":
            return await self._away_side.samples(spec, side)
        if self._home_metrics is None:
            raise RouterUnreachable(
                "the home side of a gatewayapi route is judged from Prometheus: start the controller "
                "with --gateway-prometheus-url"
            )
        route = await self._route(spec)
        index = owned_rule(route, self._target(spec), spec.home_service)
        return {"prometheus": await self._home_metrics.sample(spec, index)}

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
        await self._away_side.close()
        if self._gateways is not None:
            await self._gateways.close()
        if self._home_metrics is not None:
            await self._home_metrics.close()


def _ready(conditions: Mapping[str, Any]) -> bool:
    """An EndpointSlice endpoint that takes new requests (a missing `ready` reads as true, as the API
    says)."""
    return conditions.get("ready") is not False and conditions.get("terminating") is not True


def probe_target(route: Mapping[str, Any], index: int) -> tuple[str, str]:
    """(Host, path) a probe sends so the owned rule routes it: the route's first exact hostname (a
    wildcard's suffix otherwise) and the rule's first path match (else `/`)."""
    hostnames = [str(name) for name in (route.get("spec") or {}).get("hostnames") or ()]
    host = next((name for name in hostnames if not name.startswith("*")), "")
    if not host and hostnames:
        host = "probe" + hostnames[0][1:]
    path = "/"
    rule = route["spec"]["rules"][index]
    for match in rule.get("matches") or ():
        value = (match.get("path") or {}).get("value")
        if isinstance(value, str) and value.startswith("/"):
            path = value
            break
    return host, path
