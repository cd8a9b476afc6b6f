"""Migrations on the `gatewayapi` data plane, on the real plane with the Gateway API's CRDs.

The controller writes the weights of an HTTPRoute rule (validated by the real CRD's schema and CEL
rules), waits for every parent to accept the route's new generation and for every gateway replica
to answer a probe with the number of the weights written, and refuses a share to a side without a
ready endpoint. No Gateway API implementation runs here (see docs/concepts/data-planes.md): the
test plays the implementation's two halves, a controller that writes the route's status
(`AcceptingGateway`) and a gateway replica that answers probes with the header of the configuration
it last took (`GatewayReplica`); each can be held back. The away share's half of the data path is
real: the router in its away-only role, sent requests as the gateway would send them, serves them
all from the away pods.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from tests.integration.migration_rig import NAME, Rig, RigFor
from tests.integration.waiting import wait_for
from vk_devtools.devcluster import cluster
from vk_devtools.devcluster.ports import PortPicker
from vk_provider.controller.httproutes import WEIGHT_HEADER, WEIGHTS_ANNOTATION, route_path
from vk_provider.kit.kube import MERGE_PATCH, KubeApi, KubeApiError

pytestmark = pytest.mark.usefixtures("traffic_rbac", "gateway_api_crds")

AWAY_SERVICE = "router-away"
"""Stands for the router's Service: selector-less, its EndpointSlice written by the test."""
GATEWAY_CONTROLLER = "example.test/gateway-controller"
STRATEGY: dict[str, Any] = {
    "stepIntervalSeconds": 3,
    "toAwaySteps": [50, 100],
    "gates": {"minRequestsPerInterval": 0},
    "progressDeadlineSeconds": 240,
}


def http_route(name: str, *, service: str = NAME) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name},
        "spec": {
            "parentRefs": [{"name": "public"}],
            "hostnames": ["chat.example"],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                    "backendRefs": [{"name": service, "port": 80}],
                }
            ],
        },
    }


def routes_path(namespace: str) -> str:
    return f"/apis/gateway.networking.k8s.io/v1/namespaces/{namespace}/httproutes"


def traffic(route: str = NAME) -> dict[str, Any]:
    return {"httpRoute": {"name": route}, "awayService": {"name": AWAY_SERVICE, "port": 80}}


async def create_away_service(api: KubeApi, namespace: str, *, ready_endpoints: int) -> None:
    await api.create(
        f"/api/v1/namespaces/{namespace}/services",
        {"metadata": {"name": AWAY_SERVICE}, "spec": {"ports": [{"name": "http", "port": 80}]}},
    )
    await set_away_endpoints(api, namespace, ready_endpoints)


async def set_away_endpoints(api: KubeApi, namespace: str, ready: int) -> None:
    body = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": AWAY_SERVICE, "labels": {"kubernetes.io/service-name": AWAY_SERVICE}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080}],
        "endpoints": [
            {"addresses": [f"198.18.0.{10 + index}"], "conditions": {"ready": True}} for index in range(ready)
        ],
    }
    path = f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices"
    try:
        await api.request("PUT", f"{path}/{AWAY_SERVICE}", body=body)
    except KubeApiError as error:
        if not error.not_found:
            raise
        await api.create(path, body)


class AcceptingGateway:
    """The implementation's controller: accepts each generation of the route on its one parent,
    unless `holding`."""

    def __init__(self, api: KubeApi, namespace: str, name: str) -> None:
        self._api, self._path = api, route_path(namespace, name)
        self.holding = False
        self.accepted: list[int] = []

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        task = asyncio.create_task(self._run())
        try:
            yield
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(KubeApiError):
                route = await self._api.get(self._path)
                generation = int(route["metadata"]["generation"])
                if not self.holding and (not self.accepted or self.accepted[-1] != generation):
                    await self._accept(generation)
                    self.accepted.append(generation)
            await asyncio.sleep(0.2)  # a controller's resync, deliberately polled (noqa: sleep-ok)

    async def _accept(self, generation: int) -> None:
        condition = {
            "type": "Accepted",
            "status": "True",
            "reason": "Accepted",
            "message": "Route is accepted",
            "observedGeneration": generation,
            "lastTransitionTime": "2026-12-05T00:00:00Z",
        }
        parent = {
            "parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "public"},
            "controllerName": GATEWAY_CONTROLLER,
            "conditions": [condition],
        }
        await self._api.patch(
            f"{self._path}/status", {"status": {"parents": [parent]}}, content_type=MERGE_PATCH
        )


class GatewayReplica:
    """A gateway replica: answers every request with the weights' header of the configuration it
    took last (the owned rule's, read from the route), unless `frozen` (it keeps the old one)."""

    def __init__(self, api: KubeApi, namespace: str, name: str) -> None:
        self._api, self._path = api, route_path(namespace, name)
        self.frozen = False
        self.serving = ""
        self.probes = 0

    async def _answer(self, request: web.Request) -> web.Response:
        self.probes += 1
        if not self.frozen:
            route = await self._api.get(self._path)
            headers = [
                header
                for rule in route["spec"]["rules"]
                for item in rule.get("filters") or ()
                for header in (item.get("responseHeaderModifier") or {}).get("set") or ()
                if header["name"] == WEIGHT_HEADER
            ]
            self.serving = headers[0]["value"] if headers else ""
        return web.Response(text="probe\n", headers={WEIGHT_HEADER: self.serving} if self.serving else {})

    @contextlib.asynccontextmanager
    async def serving_at(self) -> AsyncIterator[str]:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._answer)
        runner = web.AppRunner(app)
        await runner.setup()
        port = PortPicker().pick()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            await runner.cleanup()


async def progressing_message(rig: Rig, *needles: str) -> str:
    async def says() -> str | None:
        status = (await rig.offload()).get("status") or {}
        message = str(status.get("message") or "")
        return message if all(needle in message for needle in needles) else None

    return await wait_for(
        says,
        timeout_seconds=120,
        what=f"the Offload to say {needles}; controller:\n{rig.controller.log_tail(20)}",
    )


async def route_weights(api: KubeApi, namespace: str) -> tuple[str, list[int]]:
    route = await api.get(route_path(namespace, NAME))
    refs = route["spec"]["rules"][0]["backendRefs"]
    return route["metadata"].get("annotations", {}).get(WEIGHTS_ANNOTATION, ""), [
        ref.get("weight", 1) for ref in refs
    ]


async def test_weights_move_through_the_httproute_once_every_parent_and_replica_has_them(
    rig_for: RigFor, namespace: str, control_plane: cluster.ClusterState
) -> None:
    api = await KubeApi.from_kubeconfig(str(control_plane.kubeconfig))
    gateway = AcceptingGateway(api, namespace, NAME)
    replica = GatewayReplica(api, namespace, NAME)
    try:
        await api.create(routes_path(namespace), http_route(NAME))
        await create_away_service(api, namespace, ready_endpoints=1)
        async with gateway.running(), replica.serving_at() as replica_url:
            arguments = ("--gateway-api", "--gateway-url", replica_url)
            async with rig_for(
                STRATEGY, data_plane="gatewayapi", traffic=traffic(), controller_arguments=arguments
            ) as rig:
                # Idle at home: the route carries weight 0, numbered 1, both backends in it.
                assert await wait_for(
                    lambda: _equal(route_weights(api, namespace), ("1:0", [100, 0])),
                    timeout_seconds=60,
                    what="the route at weight 0",
                )
                # The replica has taken that configuration (the controller probes it while idle);
                # from now on it keeps it, and the parent accepts nothing new.
                await wait_for(lambda: _is(replica.serving == "1"), timeout_seconds=60, what="a probe")
                replica.frozen = True
                gateway.holding = True
                await rig.patch_offload({"spec": {"placement": "away"}})
                await wait_for(
                    lambda: _equal(route_weights(api, namespace), ("2:50", [50, 50])),
                    timeout_seconds=120,
                    what="the route at weight 50",
                )
                # The parent has not accepted the new generation: the step does not count.
                held = await progressing_message(rig, "Gateway", "/public (it accepted generation", "not")
                assert (await rig.offload())["status"]["phase"] == "Shifting", held
                gateway.holding = False
                held = await progressing_message(rig, f"gateway {replica_url} (answers weights 1, not 2)")
                # The away share, sent to the router as the gateway sends it: all served away.
                served = await _served_by(rig, 20)
                assert {rig.side_of(who) for who in served} == {"away"}, served
                replica.frozen = False
                done = await rig.wait_for_phase("Succeeded", timeout_seconds=180)
                assert done["status"]["awayWeight"] == 100
                assert await route_weights(api, namespace) == ("3:100", [0, 100])
                assert (await rig.deployment(NAME))["spec"]["replicas"] == 0
                assert replica.probes > 0
    finally:
        await api.close()


async def _is(value: bool) -> bool:
    return value


async def _equal(reading: Any, expected: Any) -> bool:
    return bool(await reading == expected)


async def _served_by(rig: Rig, count: int) -> list[str]:
    """Who served `count` requests sent straight to the router with the route's Host."""
    async with aiohttp.ClientSession() as session:
        served = []
        for _ in range(count):
            async with session.post(
                f"{rig.router_url}/v1/completions", headers={"Host": rig.host}, json={"prompt": "hi"}
            ) as response:
                assert response.status == 200, await response.text()
                served.append(response.headers.get("X-Served-By", ""))
        return served


async def test_a_missing_route_a_rule_not_found_and_an_empty_side_move_nothing_and_say_why(
    rig_for: RigFor, namespace: str, control_plane: cluster.ClusterState
) -> None:
    api = await KubeApi.from_kubeconfig(str(control_plane.kubeconfig))
    gateway = AcceptingGateway(api, namespace, NAME)
    try:
        await create_away_service(api, namespace, ready_endpoints=0)
        async with rig_for(
            STRATEGY, data_plane="gatewayapi", traffic=traffic(), controller_arguments=("--gateway-api",)
        ) as rig:
            # No such HTTPRoute: a condition and an Event, nothing moves.
            not_found = await _not_ready(rig, "HTTPRouteNotFound")
            assert f'HTTPRoute "{NAME}" not found' in not_found["message"]
            assert await rig.events("HTTPRouteNotFound")
            # A route whose rule does not send to the home Service: named as such.
            await api.create(routes_path(namespace), http_route(NAME, service="somebody-else"))
            rule = await _not_ready(rig, "HTTPRouteRuleNotFound")
            assert 'has no rule sending to the home Service "chat"' in rule["message"]
            await api.delete(route_path(namespace, NAME))
            await api.create(routes_path(namespace), http_route(NAME))
            async with gateway.running():
                await rig.patch_offload({"spec": {"placement": "away"}})
                # The away Service has no ready endpoint: weight 50 is refused, the route stays home.
                await progressing_message(rig, "would send 50% to the away Service", "no ready endpoint")
                assert await route_weights(api, namespace) == ("1:0", [100, 0])
                await set_away_endpoints(api, namespace, 1)
                await rig.wait_for_phase("Succeeded", timeout_seconds=180)
                assert await route_weights(api, namespace) == ("3:100", [0, 100])
    finally:
        await api.close()


async def _not_ready(rig: Rig, reason: str) -> dict[str, Any]:
    async def reported() -> dict[str, Any] | None:
        conditions = ((await rig.offload()).get("status") or {}).get("conditions") or ()
        return next(
            (c for c in conditions if c.get("type") == "Ready" and c.get("reason") == reason),
            None,
        )

    return await wait_for(reported, timeout_seconds=90, what=f"Ready=False {reason}")
