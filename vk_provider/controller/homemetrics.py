"""The home side's counters of a `gatewayapi` route, from Prometheus.

The gateway, not our router, carries the home share, and the Gateway API has no standard metric, so
the counters come from PromQL templates per implementation (Flagger's observers do the same). Each
template is an instant query of a CUMULATIVE count, never a rate: the gates subtract the value at a
step's start from the value at its end, as they do with the routers' counters.

- `responses`: responses of the home side;
- `server_errors`: those with a 5xx status;
- `client_errors`: those with a 4xx status, read only for an Offload whose `errorStatuses` count
  them ('' when the implementation has no such count: such an Offload's home side cannot be judged);
- `latency_buckets`: the cumulative histogram of the time to the response head, by `le`, in
  `latency_unit_seconds` (Envoy: milliseconds); '' leaves the latency gate without data.

Placeholders (`string.Template`'s, since PromQL is full of braces): `$namespace`, `$route` (the
HTTPRoute), `$rule` (the owned rule's index), `$service` (the home Service), `$offload`.

The default, `ENVOY_GATEWAY`: Envoy Gateway makes one Envoy cluster per route rule,
`httproute/<namespace>/<route>/rule/<index>`, whose backendRefs are weighted localities, so its
counters hold both sides. The away share is the part our routers count (`vk_provider_router_*`,
which the same Prometheus must scrape), so the home side is the rule's count less theirs.
"""

from __future__ import annotations

import dataclasses
import math
import string
from typing import Any

import aiohttp

from vk_provider.controller.gates import SideSample
from vk_provider.controller.routers import REQUEST_TIMEOUT, RouterUnreachable
from vk_provider.offload.spec import OffloadSpec


@dataclasses.dataclass(frozen=True)
class HomeQueries:
    responses: str
    server_errors: str
    latency_buckets: str = ""
    client_errors: str = ""
    latency_unit_seconds: float = 1.0


_RULE = 'envoy_cluster_name="httproute/$namespace/$route/rule/$rule"'
_AWAY = 'namespace="$namespace",name="$offload",side="away"'
ENVOY_GATEWAY = HomeQueries(
    responses=(
        f"sum(envoy_cluster_upstream_rq_xx{{{_RULE}}})"
        f" - (sum(vk_provider_router_requests_total{{{_AWAY}}}) or vector(0))"
    ),
    server_errors=(
        f'sum(envoy_cluster_upstream_rq_xx{{{_RULE},envoy_response_code_class="5"}})'
        f' - (sum(vk_provider_router_requests_total{{{_AWAY},code="5xx"}}) or vector(0))'
    ),
    # Envoy's buckets are in milliseconds and ours in seconds: the two histograms cannot be
    # subtracted bound by bound, so the latency gate reads the whole rule (both sides).
    latency_buckets=f"sum by (le) (envoy_cluster_upstream_rq_time_bucket{{{_RULE}}})",
    latency_unit_seconds=0.001,
    client_errors=(
        f'sum(envoy_cluster_upstream_rq_xx{{{_RULE},envoy_response_code_class="4"}})'
        f' - (sum(vk_provider_router_requests_total{{{_AWAY},code="4xx"}}) or vector(0))'
    ),
)


class PrometheusQueryError(RouterUnreachable):
    """Prometheus could not answer a gate's query; the step waits, as for an unreachable router."""


class HomeMetrics:
    def __init__(self, url: str, queries: HomeQueries = ENVOY_GATEWAY) -> None:
        self._url = url.rstrip("/")
        self._queries = queries
        self._session: aiohttp.ClientSession | None = None

    async def sample(self, spec: OffloadSpec, rule: int) -> SideSample:
        values = {
            "namespace": spec.namespace,
            "route": spec.gateway_route.http_route if spec.gateway_route else "",
            "rule": rule,
            "service": spec.home_service,
            "offload": spec.name,
        }

        def filled(template: str) -> str:
            try:
                return string.Template(template).substitute(values)
            except (KeyError, ValueError) as error:
                raise PrometheusQueryError(
                    f"the query template {template!r} has a bad placeholder: {error}"
                ) from None

        queries = self._queries
        responses = _total(await self._query(filled(queries.responses)))
        by_class = [("5xx", max(0.0, _total(await self._query(filled(queries.server_errors)))))]
        if "4xx" in spec.strategy.gates.error_statuses:
            if not queries.client_errors:
                raise PrometheusQueryError("4xx count as errors, and no query counts the home side's 4xx")
            by_class.append(("4xx", max(0.0, _total(await self._query(filled(queries.client_errors))))))
        buckets: tuple[tuple[float, float], ...] = ()
        if queries.latency_buckets:
            found = await self._query(filled(queries.latency_buckets))
            buckets = tuple(
                sorted(
                    (float(item["metric"]["le"]) * queries.latency_unit_seconds, _value(item))
                    for item in found
                    if "le" in (item.get("metric") or {})
                )
            )
        return SideSample(max(0.0, responses), tuple(sorted(by_class)), 0.0, buckets)

    async def _query(self, query: str) -> list[dict[str, Any]]:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=REQUEST_TIMEOUT)
        url = f"{self._url}/api/v1/query"
        try:
            async with self._session.get(url, params={"query": query}) as response:
                document = await response.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as error:
            raise PrometheusQueryError(f"Prometheus {url}: {error or type(error).__name__}") from None
        if not isinstance(document, dict) or document.get("status") != "success":
            why = document.get("error") if isinstance(document, dict) else document
            raise PrometheusQueryError(f"Prometheus refused {query!r}: {why}")
        data = document.get("data") or {}
        if data.get("resultType") != "vector":
            kind = data.get("resultType")
            raise PrometheusQueryError(f"Prometheus answered {query!r} with a {kind}, not a vector")
        return list(data.get("result") or ())

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


def _value(item: dict[str, Any]) -> float:
    value = float((item.get("value") or (0, "0"))[1])
    return value if math.isfinite(value) else 0.0


def _total(result: list[dict[str, Any]]) -> float:
    return sum(_value(item) for item in result)
