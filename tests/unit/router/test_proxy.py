"""The proxy end to end, against real local backends: routing, weights, streaming, retries, drains."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from tests.unit.local import closed_port_url, until
from vk_provider.router import Balancer, EjectionPolicy, Endpoint, ProxySettings, Router

from . import RouterClient, admin_client, backends, route, router_client, seeded, table


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_requests_route_by_host_and_by_path_prefix() -> None:
    async with backends("chat", "api", "rest") as (chat, api, rest):
        router = Router(
            table(
                route(name="chat", hosts=("chat.example.com",), home=(chat.endpoint(),)),
                route(name="api", prefix="/api", home=(api.endpoint(),)),
                route(name="rest", prefix="/", home=(rest.endpoint(),)),
            )
        )
        async with router_client(router) as client:
            for host, path, expected in [
                ("chat.example.com:80", "/api/x?q=1", "chat GET /api/x?q=1"),
                ("other", "/api/x?q=1", "api GET /api/x?q=1"),
                ("other", "/apix", "rest GET /apix"),
            ]:
                async with client.get(path, headers={"Host": host}) as response:
                    assert response.status == 200
                    assert await response.text() == expected


async def test_an_unknown_host_gets_404_with_a_message() -> None:
    async with backends("chat") as (chat,):
        router = Router(table(route(hosts=("chat.example.com",), home=(chat.endpoint(),))))
        async with (
            router_client(router) as client,
            client.get("/v1", headers={"Host": "nope.example.com"}) as response,
        ):
            assert response.status == 404
            assert "no route for host 'nope.example.com'" in await response.text()
        assert chat.hits == 0


async def _spray(client: RouterClient, count: int) -> None:
    semaphore = asyncio.Semaphore(50)

    async def one() -> None:
        async with semaphore, client.get("/") as response:
            assert response.status == 200
            await response.read()

    await asyncio.gather(*(one() for _ in range(count)))


async def test_the_away_share_tracks_the_weight_through_the_proxy() -> None:
    async with backends("home", "away") as (home, away):
        router = Router(
            table(route(weight=30, home=(home.endpoint(),), away=(away.endpoint(),))),
            balancer=Balancer(rng=seeded(7)),
        )
        async with router_client(router) as client:
            await _spray(client, 2000)
            assert home.hits + away.hits == 2000
            assert abs(away.hits / 2000 * 100 - 30) < 5
            for weight, expected_home in ((0, 200), (100, 0)):
                home.hits = away.hits = 0
                router.update(table(route(weight=weight, home=(home.endpoint(),), away=(away.endpoint(),))))
                await _spray(client, 200)
                assert (home.hits, away.hits) == (expected_home, 200 - expected_home)


async def test_new_requests_go_to_the_endpoint_with_fewer_outstanding_requests() -> None:
    async with backends("slow", "idle") as (slow, idle):
        slow.hold()
        router = Router(
            table(route(home=(slow.endpoint(), idle.endpoint()))), balancer=Balancer(rng=seeded(1))
        )
        async with router_client(router) as client:
            held: asyncio.Task[aiohttp.ClientResponse] | None = None
            while held is None:  # the first pick is a tie, broken at random: send until one is held
                task = asyncio.create_task(client.get("/"))
                await until(lambda task=task: slow.in_flight > 0 or task.done())  # type: ignore[misc]
                if slow.in_flight:
                    held = task
                else:
                    (await task).release()
            idle.hits = 0
            for _ in range(20):
                async with client.get("/") as response:
                    assert await response.text() == "idle GET /"
            assert (slow.hits, idle.hits) == (1, 20)
            slow.release()
            response = await held
            assert await response.text() == "slow GET /"
            response.release()


async def test_sse_chunks_reach_the_client_as_they_are_sent() -> None:
    second = asyncio.Event()

    async def sse(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b"data: one\n\n")
        await second.wait()
        await response.write(b"data: two\n\n")
        await response.write_eof()
        return response

    async with (
        backends("llm", handler=sse) as (llm,),
        router_client(Router(table(route(home=(llm.endpoint(),))))) as client,
        asyncio.timeout(5),
        client.get("/stream") as response,
    ):
        assert response.headers["Content-Type"] == "text/event-stream"
        received = b""
        while received != b"data: one\n\n":
            received += await response.content.readany()
        assert not second.is_set()  # the first chunk came before the second existed
        second.set()
        assert await response.content.read() == b"data: two\n\n"


async def test_request_bodies_stream_upstream() -> None:
    first_arrived = asyncio.Event()

    async def upload(request: web.Request) -> web.Response:
        received = b""
        while b"first" not in received:
            received += await request.content.readany()
        first_arrived.set()
        received += await request.content.read()
        return web.Response(body=received)

    async def body() -> AsyncIterator[bytes]:
        yield b"first"
        await first_arrived.wait()  # only sent once the backend has the first part: no buffering
        yield b"-second"

    async with (
        backends("sink", handler=upload) as (sink,),
        router_client(Router(table(route(home=(sink.endpoint(),))))) as client,
        asyncio.timeout(5),
        client.post("/upload", data=body()) as response,
    ):
        assert response.status == 200
        assert await response.read() == b"first-second"


async def test_a_refused_connection_is_retried_on_anotherEndpoint() -> None:
    async with backends("good") as (good,):
        refusing = closed_port_url()
        balancer = Balancer(rng=seeded(2))
        router = Router(table(route(home=(Endpoint(refusing), good.endpoint()))), balancer=balancer)
        balancer.acquire(good.url)  # makes the refusing endpoint the first choice
        async with router_client(router) as client, client.get("/") as response:
            assert response.status == 200
            assert await response.text() == "good GET /"
        assert balancer.is_ejected(refusing)
        assert good.hits == 1


async def test_retries_stop_after_the_attempt_limit() -> None:
    refusing = [closed_port_url() for _ in range(4)]
    router = Router(
        table(route(home=tuple(Endpoint(url) for url in refusing))),
        settings=ProxySettings(max_attempts=3),
    )
    async with router_client(router) as client, client.get("/") as response:
        assert response.status == 503
        assert "no usable endpoint for ml/web: tried 3" in await response.text()
    assert sum(router.balancer.is_ejected(url) for url in refusing) == 3


async def test_a_failure_after_the_request_was_sent_is_not_retried() -> None:
    connections = 0

    async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await reader.readuntil(b"\r\n\r\n")
        writer.transport.abort()

    server = await asyncio.start_server(reset, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with backends("good") as (good,):
            balancer = Balancer(rng=seeded(3))
            resetting = f"http://127.0.0.1:{port}"
            router = Router(table(route(home=(Endpoint(resetting), good.endpoint()))), balancer=balancer)
            balancer.acquire(good.url)
            async with router_client(router) as client, client.post("/generate", data=b"prompt") as response:
                assert response.status == 502
                assert "failed before answering" in await response.text()
            assert (connections, good.hits) == (1, 0)
            assert not balancer.is_ejected(resetting)
    finally:
        server.close()
        await server.wait_closed()


async def test_an_upstream_that_breaks_mid_response_breaks_the_clients_response() -> None:
    async def broken(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b"partial")
        assert request.transport is not None
        request.transport.abort()
        return response

    async with backends("bad", handler=broken) as (bad,):
        router = Router(table(route(home=(bad.endpoint(),))))
        async with router_client(router) as client, client.get("/") as response:
            assert response.status == 200
            try:
                await response.read()
            except aiohttp.ClientPayloadError:
                pass
            else:
                raise AssertionError("a broken upstream must not look like a complete response")
        assert bad.hits == 1
        assert 'reason="upstream_broken"' in router.metrics.exposition().decode()


async def test_a_refusing_endpoint_is_skipped_while_ejected_then_tried_again() -> None:
    clock = Clock()
    async with backends("away") as (away,):
        refusing = closed_port_url()
        balancer = Balancer(rng=seeded(4), clock=clock, ejection=EjectionPolicy(5.0, 60.0))
        router = Router(
            table(route(weight=0, home=(Endpoint(refusing),), away=(away.endpoint(),))), balancer=balancer
        )

        def connect_errors() -> float:
            value = router.metrics.registry.get_sample_value(
                "vk_provider_router_errors_total",
                {"namespace": "ml", "name": "web", "side": "home", "reason": "connect"},
            )
            return value or 0.0

        async with router_client(router) as client:
            for _ in range(5):
                async with client.get("/") as response:
                    assert response.status == 200  # by fallback to the away side
            assert connect_errors() == 1  # ejected after the first refusal, not tried again
            clock.now += 5.1
            async with client.get("/") as response:
                assert response.status == 200
            assert connect_errors() == 2  # tried again after the period, and ejected for longer
            clock.now += 5.1
            async with client.get("/") as response:
                assert response.status == 200
            assert connect_errors() == 2
        assert away.hits == 7
        exposition = router.metrics.exposition().decode()
        assert (
            'vk_provider_router_fallbacks_total{drawn_side="home",name="web",namespace="ml"} 7.0'
            in exposition
        )
        assert 'vk_provider_router_ejections_total{name="web",namespace="ml",side="home"} 2.0' in exposition


async def test_terminating_endpoints_finish_in_flight_requests_but_get_no_new_ones() -> None:
    async with backends("old", "new") as (old, new):
        old.hold()
        router = Router(table(route(home=(old.endpoint(),))))
        async with router_client(router) as client:
            held = asyncio.create_task(client.get("/"))
            await until(lambda: old.in_flight > 0)
            router.update(table(route(home=(old.endpoint(terminating=True), new.endpoint()))))
            for _ in range(10):
                async with client.get("/") as response:
                    assert await response.text() == "new GET /"
            assert router.status()["routes"][0]["endpoints"]["home"]["terminating"] == 1
            old.release()
            async with await held as response:
                assert response.status == 200
                assert await response.text() == "old GET /"
        assert (old.hits, new.hits) == (1, 10)


async def test_a_table_swap_leaves_in_flight_requests_on_theirEndpoint() -> None:
    async with backends("v1", "v2") as (v1, v2):
        v1.hold()
        router = Router(table(route(generation=1, home=(v1.endpoint(),))))
        async with router_client(router) as client:
            held = [asyncio.create_task(client.get("/")) for _ in range(3)]
            await until(lambda: v1.in_flight == 3)
            router.update(table(route(generation=2, weight=100, away=(v2.endpoint(),))))
            assert router.balancer.outstanding(v1.url) == 3  # kept though v1 left the table
            async with client.get("/") as response:
                assert await response.text() == "v2 GET /"
            v1.release()
            for task in held:
                async with await task as response:
                    assert await response.text() == "v1 GET /"
            assert router.balancer.outstanding(v1.url) == 0
        assert (v1.hits, v2.hits) == (3, 1)


ENDPOINT_CONNECTIONS = pytest.mark.parametrize(
    "pooled",
    [False, True],
    ids=["new endpoint connection", "pooled endpoint connection"],
)
"""A request on a new endpoint connection is answered from a task; one on a pooled connection from
the callbacks alone (core's fast path): a client leaving must end both the same way."""


async def warm_up(client: RouterClient, pooled: bool) -> None:
    """With `pooled`, leave a connection to the endpoint in the router's pool."""
    if pooled:
        async with client.get("/warm") as response:
            assert response.status == 200


@ENDPOINT_CONNECTIONS
async def test_a_client_that_disconnects_cancels_the_upstream_request(pooled: bool) -> None:
    cancelled = asyncio.Event()

    async def wait_forever(request: web.Request) -> web.Response:
        if request.path == "/warm":
            return web.Response(text="warm")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return web.Response()  # pragma: no cover - never reached

    async with (
        backends("llm", handler=wait_forever) as (llm,),
        router_client(Router(table(route(home=(llm.endpoint(),))))) as client,
    ):
        await warm_up(client, pooled)
        task = asyncio.create_task(client.get("/"))
        await until(lambda: llm.in_flight > 0)
        task.cancel()
        async with asyncio.timeout(5):
            await cancelled.wait()
        await until(lambda: llm.in_flight == 0)


@ENDPOINT_CONNECTIONS
async def test_a_client_leaving_mid_stream_is_counted_not_logged_as_an_error(
    caplog: pytest.LogCaptureFixture, pooled: bool
) -> None:
    async def endless(request: web.Request) -> web.StreamResponse:
        if request.path == "/warm":
            return web.Response(text="warm")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for _ in range(5000):  # a long generation, token after token
            await response.write(b"data: token\n\n")
            await asyncio.sleep(0.005)  # the backend's pace between tokens (noqa: sleep-ok)
        return response

    async with backends("llm", handler=endless) as (llm,):
        router = Router(table(route(home=(llm.endpoint(),))))
        async with router_client(router) as client:
            await warm_up(client, pooled)
            response = await client.get("/stream")
            await response.content.readany()
            response.close()  # the user cancels the generation

            def disconnects() -> float:
                sample = router.metrics.registry.get_sample_value(
                    "vk_provider_router_client_disconnects_total",
                    {"namespace": "ml", "name": "web", "side": "home"},
                )
                return sample or 0.0

            await until(lambda: disconnects() == 1, within=10)
            await until(lambda: llm.in_flight == 0, within=10)  # the upstream was let go too
    errors = [record for record in caplog.records if record.levelno >= logging.ERROR]
    assert not errors, [record.getMessage() for record in errors]
    errors_total = router.metrics.registry.get_sample_value(
        "vk_provider_router_errors_total",
        {"namespace": "ml", "name": "web", "side": "home", "reason": "upstream_broken"},
    )
    assert not errors_total


async def test_headers_are_forwarded_without_hop_by_hop_ones() -> None:
    async def echo(request: web.Request) -> web.Response:
        response = web.json_response({name.lower(): value for name, value in request.headers.items()})
        response.headers.add("Set-Cookie", "a=1")
        response.headers.add("Set-Cookie", "b=2")
        response.headers["X-Backend"] = "yes"
        return response

    async with (
        backends("echo", handler=echo) as (backend,),
        router_client(Router(table(route(home=(backend.endpoint(),))))) as client,
    ):
        headers = {
            "Host": "chat.example.com",
            "Connection": "keep-alive, X-Private",
            "X-Private": "secret",
            "Keep-Alive": "timeout=5",
            "X-Request-Id": "r1",
            "X-Forwarded-For": "10.0.0.1",
        }
        async with client.get("/h", headers=headers) as response:
            seen = await response.json()
            assert response.headers.getall("Set-Cookie") == ["a=1", "b=2"]
            assert response.headers["X-Backend"] == "yes"
    assert seen["x-request-id"] == "r1"
    assert seen["host"] == "chat.example.com"
    assert seen["x-forwarded-host"] == "chat.example.com"
    assert seen["x-forwarded-for"] == "10.0.0.1, 127.0.0.1"
    assert seen["x-forwarded-proto"] == "http"
    assert "x-private" not in seen
    assert "keep-alive" not in seen


async def test_an_away_endpoint_gets_its_own_host_and_home_the_clients() -> None:
    async def echo(request: web.Request) -> web.Response:
        return web.json_response({name.lower(): value for name, value in request.headers.items()})

    async with backends("home", "away", handler=echo) as (home, away):
        seen: dict[str, dict[str, str]] = {}
        away_host = away.endpoint().url.removeprefix("http://")
        for weight, side in ((0, "home"), (100, "away")):
            routes = table(route(home=(home.endpoint(),), away=(away.endpoint(),), weight=weight))
            async with (
                router_client(Router(routes)) as client,
                client.get("/h", headers={"Host": "chat.example.com"}) as response,
            ):
                seen[side] = await response.json()
    assert seen["home"]["host"] == "chat.example.com"
    assert seen["away"]["host"] == away_host  # a provider's front finds the deployment by Host
    assert seen["away"]["x-forwarded-host"] == "chat.example.com"


async def test_status_metrics_and_healthz() -> None:
    async with backends("home", "away") as (home, away):
        router = Router(
            table(
                route(
                    generation=4,
                    weight=25,
                    home=(home.endpoint(), home.endpoint(terminating=True)),
                    away=(away.endpoint(),),
                )
            ),
            balancer=Balancer(rng=seeded(5)),
        )
        async with router_client(router) as client, admin_client(router) as admin:
            await _spray(client, 40)
            async with admin.get("/-/healthz") as response:
                assert await response.text() == "ok\n"
            async with admin.get("/-/status") as response:
                status = await response.json()
            async with admin.get("/-/metrics") as response:
                assert response.content_type == "text/plain"
                metrics = await response.text()
    assert status == {
        "routes": [
            {
                "namespace": "ml",
                "name": "web",
                "generation": 4,
                "away_weight": 25,
                "match": {"hosts": [], "path_prefix": "/"},
                "endpoints": {
                    "home": {"total": 2, "usable": 1, "terminating": 1, "ejected": 0, "outstanding": 0},
                    "away": {"total": 1, "usable": 1, "terminating": 0, "ejected": 0, "outstanding": 0},
                },
                "away_kept_on_active_checks": [],
            }
        ],
        "active_checks": {},
    }
    assert 'vk_provider_router_endpoints_kept_on_active_checks{name="web",namespace="ml"} 0.0' in metrics
    assert (
        f'vk_provider_router_requests_total{{code="2xx",name="web",namespace="ml",side="home"}} {home.hits}.0'
        in metrics
    )
    assert (
        f'vk_provider_router_requests_total{{code="2xx",name="web",namespace="ml",side="away"}} {away.hits}.0'
        in metrics
    )
    assert 'router_response_header_seconds_count{name="web",namespace="ml",side="home"}' in metrics
    assert home.hits + away.hits == 40
