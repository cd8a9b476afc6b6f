"""The home side's gate numbers from Prometheus: the queries sent, the answers read, the errors named.

Prometheus is stood in for by its HTTP API's documented answers (`/api/v1/query`, instant vectors);
the queries are checked as sent, with every placeholder filled.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from vk_provider.controller.homemetrics import ENVOY_GATEWAY, HomeMetrics, HomeQueries, PrometheusQueryError
from vk_provider.offload.spec import parse_offload

pytestmark = pytest.mark.unit

SPEC = parse_offload(
    {
        "metadata": {"namespace": "ml", "name": "chat"},
        "spec": {
            "home": {"deployment": "chat", "service": "chat-svc"},
            "placement": "home",
            "traffic": {
                "dataPlane": "gatewayapi",
                "httpRoute": {"name": "public-chat"},
                "awayService": {"name": "vk-provider-router"},
            },
        },
    }
)


class Prometheus:
    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.queries: list[str] = []

    async def query(self, request: web.Request) -> web.Response:
        query = request.query["query"]
        self.queries.append(query)
        for needle, answer in self.answers.items():
            if needle in query:
                return web.json_response(answer)
        return web.json_response(
            {"status": "error", "errorType": "bad_data", "error": "parse error"}, status=400
        )


def vector(*items: tuple[dict[str, str], str]) -> dict[str, Any]:
    return {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [{"metric": m, "value": [1733360000.0, v]} for m, v in items],
        },
    }


@pytest.fixture
async def served() -> AsyncIterator[tuple[Prometheus, str]]:
    prometheus = Prometheus({})
    app = web.Application()
    app.router.add_get("/api/v1/query", prometheus.query)
    async with TestServer(app) as server:
        yield prometheus, str(server.make_url("")).rstrip("/")


async def test_the_envoy_gateway_templates_read_the_rule_less_the_away_share(
    served: tuple[Prometheus, str],
) -> None:
    prometheus, url = served
    prometheus.answers = {
        'envoy_response_code_class="5"': vector(({}, "3")),
        "le)": vector(({"le": "5"}, "40"), ({"le": "+Inf"}, "90"), ({"le": "250"}, "80")),
        "envoy_cluster_upstream_rq_xx": vector(({}, "120")),
    }
    metrics = HomeMetrics(url, ENVOY_GATEWAY)
    try:
        sample = await metrics.sample(SPEC, 2)
    finally:
        await metrics.close()
    assert (sample.responses, sample.server_errors, sample.proxy_errors) == (120.0, 3.0, 0.0)
    assert sample.buckets == ((0.005, 40.0), (0.25, 80.0), (float("inf"), 90.0))  # ms -> s, sorted
    assert all(
        'envoy_cluster_name="httproute/ml/public-chat/rule/2"' in query for query in prometheus.queries
    )
    assert (
        'vk_provider_router_requests_total{namespace="ml",name="chat",side="away"}' in prometheus.queries[0]
    )
    assert not [query for query in prometheus.queries if "$" in query]  # every placeholder filled


async def test_4xx_are_read_only_for_an_offload_that_counts_them(served: tuple[Prometheus, str]) -> None:
    prometheus, url = served
    prometheus.answers = {
        'envoy_response_code_class="5"': vector(({}, "3")),
        'envoy_response_code_class="4"': vector(({}, "7")),
        "envoy_cluster_upstream_rq_xx": vector(({}, "120")),
        "le)": vector(({"le": "+Inf"}, "120")),
    }
    counting_4xx = dataclasses.replace(
        SPEC,
        strategy=dataclasses.replace(
            SPEC.strategy, gates=dataclasses.replace(SPEC.strategy.gates, error_statuses=("4xx", "5xx"))
        ),
    )
    metrics = HomeMetrics(url, ENVOY_GATEWAY)
    try:
        assert (await metrics.sample(SPEC, 0)).of_class("4xx") == 0.0
        assert not [query for query in prometheus.queries if 'code="4xx"' in query]
        sample = await metrics.sample(counting_4xx, 0)
    finally:
        await metrics.close()
    assert (sample.of_class("4xx"), sample.failures(["4xx", "5xx"])) == (7.0, 10.0)
    assert [query for query in prometheus.queries if 'code="4xx"' in query]  # less the routers' away 4xx


async def test_a_template_with_an_unknown_placeholder_is_named() -> None:
    metrics = HomeMetrics("http://127.0.0.1:9", HomeQueries(responses="up{job='$pod'}", server_errors="x"))
    try:
        with pytest.raises(PrometheusQueryError, match="bad placeholder: 'pod'"):
            await metrics.sample(SPEC, 0)
    finally:
        await metrics.close()


async def test_a_query_prometheus_refuses_is_named_with_its_error(served: tuple[Prometheus, str]) -> None:
    _, url = served
    metrics = HomeMetrics(url, HomeQueries(responses="up{job='$service'}", server_errors="x"))
    try:
        with pytest.raises(
            PrometheusQueryError, match=re.escape("Prometheus refused \"up{job='chat-svc'}\": parse error")
        ):
            await metrics.sample(SPEC, 0)
    finally:
        await metrics.close()


async def test_an_answer_that_is_not_a_vector_and_an_unreachable_prometheus_are_named(
    served: tuple[Prometheus, str],
) -> None:
    prometheus, url = served
    prometheus.answers = {"x": {"status": "success", "data": {"resultType": "matrix", "result": []}}}
    metrics = HomeMetrics(url, HomeQueries(responses="x", server_errors="x"))
    unreachable = HomeMetrics("http://127.0.0.1:9", HomeQueries(responses="x", server_errors="x"))
    try:
        with pytest.raises(PrometheusQueryError, match="with a matrix, not a vector"):
            await metrics.sample(SPEC, 0)
        with pytest.raises(PrometheusQueryError, match=r"Prometheus http://127.0.0.1:9/api/v1/query"):
            await unreachable.sample(SPEC, 0)
    finally:
        await metrics.close()
        await unreachable.close()
