"""A real Envoy driven by our xDS server: weights, ACKs, streaming, refusals, signing and paths.

Each test starts the xDS server, local backends and one Envoy (about a second), then changes the
route table and sends requests through Envoy's listener.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import re
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.integration.waiting import wait_for
from vk_devtools.devcluster.pki import CertificateAuthority
from vk_provider.controller.dataplanes import ENVOY_STATS_PATH, EnvoyFleet
from vk_provider.controller.envoystats import parse_envoy_side_sample
from vk_provider.controller.gates import SideSample, judge, quantile_seconds
from vk_provider.controller.routers import RouterDirectory, RouteView
from vk_provider.kit.traffic_auth import AwsSigV4
from vk_provider.offload.plan import Verdict
from vk_provider.offload.spec import Gates, OffloadSpec, parse_offload
from vk_provider.routetable.table import Endpoint, RouteTable
from vk_provider.xds.clusters import UpstreamTrust
from vk_provider.xds.names import CLUSTER_TYPE, LISTENER_NAME, type_url
from vk_provider.xds.resources import EnvoySettings, Resources, build_resources, pack
from vk_provider.xds.server import XdsServer
from vk_provider.xds.status import serving_status

from . import route, table
from .running_envoy import RunningEnvoy, requires_envoy, running_envoy
from .sigv4 import signature_problem

pytestmark = requires_envoy

HOST = "chat.example.com"
ACCESS_KEY = "AKIAVKXDSTEST0001"
SECRET_KEY = "xds-test-secret"
INVOCATIONS = "/endpoints/vk-x/invocations"
APPLY_SECONDS = 10.0


class Echo:
    """A local backend that records what it received and answers with its name; HTTPS with `tls`."""

    def __init__(
        self,
        name: str,
        handler: Callable[[web.Request], Awaitable[web.StreamResponse]] | None = None,
        *,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.name = name
        self.seen: list[dict[str, Any]] = []
        self._handler = handler
        self._tls = tls
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self.server = TestServer(app, host="127.0.0.1")

    async def __aenter__(self) -> Echo:
        await self.server.start_server(ssl=self._tls)
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.server.close()

    @property
    def port(self) -> int:
        assert self.server.port is not None
        return self.server.port

    def endpoint(self, host: str = "127.0.0.1", path: str = "") -> Endpoint:
        return Endpoint(f"http://{host}:{self.port}{path}")

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {name.lower(): value for name, value in request.headers.items()}
        self.seen.append({"path": request.path_qs, "host": request.host, "headers": headers, "body": body})
        if self._handler is not None:
            return await self._handler(request)
        return web.Response(text=self.name)


@dataclasses.dataclass
class Plane:
    server: XdsServer
    envoy: RunningEnvoy
    url: str
    session: aiohttp.ClientSession
    xds_port: int

    async def apply(self, routes: RouteTable | Resources) -> tuple[int, float]:
        """Serve `routes`; returns its version once Envoy has ACKed it, and how long that took."""
        started = time.monotonic()
        if isinstance(routes, RouteTable):
            version = self.server.update(routes)
        else:
            version = self.server.publish(routes)
        async with asyncio.timeout(APPLY_SECONDS):
            await self.server.nodes.wait_applied(version)
        return version, time.monotonic() - started

    async def get(self, path: str = "/v1/chat", host: str = HOST, **kwargs: Any) -> tuple[int, str]:
        async with self.session.get(self.url + path, headers={"Host": host}, **kwargs) as response:
            return response.status, await response.text()

    async def spread(self, count: int, concurrency: int = 16) -> dict[str, int]:
        """Send `count` requests, `concurrency` at a time; how many each backend answered."""
        answers: dict[str, int] = {}
        slots = asyncio.Semaphore(concurrency)

        async def one() -> None:
            async with slots:
                status, text = await self.get()
                assert status == 200, text
                answers[text] = answers.get(text, 0) + 1

        await asyncio.gather(*(one() for _ in range(count)))
        return answers


def envoy_offload(name: str) -> OffloadSpec:
    """An Offload of the `default` namespace on the envoy data plane, as the controller reads it."""
    return parse_offload(
        {
            "metadata": {"namespace": "default", "name": name},
            "spec": {
                "home": {"deployment": name, "service": name},
                "placement": "home",
                "traffic": {"dataPlane": "envoy"},
            },
        }
    )


@contextlib.asynccontextmanager
async def plane(
    directory: Path, *backends: Echo, environment: dict[str, str] | None = None, ca_file: Path | None = None
) -> AsyncIterator[Plane]:
    trust = UpstreamTrust(str(ca_file) if ca_file is not None else None)
    server = XdsServer(EnvoySettings(listener_address="127.0.0.1", listener_port=0, trust=trust))
    server.update(RouteTable())  # Envoy gets ready only once it has its first listeners and clusters
    async with contextlib.AsyncExitStack() as stack:
        for backend in backends:
            await stack.enter_async_context(backend)
        xds_port = await server.start("127.0.0.1", 0)
        stack.push_async_callback(server.stop, 0)
        envoy = await stack.enter_async_context(
            running_envoy(directory, node_id="envoy-test-1", xds_port=xds_port, environment=environment)
        )
        port = await envoy.listener_port(LISTENER_NAME)
        session = await stack.enter_async_context(aiohttp.ClientSession())
        yield Plane(server, envoy, f"http://127.0.0.1:{port}", session, xds_port)


async def test_weights_move_with_the_table_and_each_version_is_reported_applied(tmp_path: Path) -> None:
    home, away = Echo("home"), Echo("away")
    async with plane(tmp_path, home, away) as envoy_plane:

        def chat(weight: int) -> RouteTable:
            # The away endpoint by name: Envoy resolves it, and sends it its own Host.
            return table(
                route(away_weight=weight, home=(home.endpoint(),), away=(away.endpoint("localhost"),))
            )

        first, _ = await envoy_plane.apply(chat(0))
        assert await envoy_plane.spread(40) == {"home": 40}
        assert home.seen[-1]["host"] == HOST  # home pods keep the client's Host

        everything, ack_seconds = await envoy_plane.apply(chat(100))
        assert everything > first
        assert envoy_plane.server.acked() == {"envoy-test-1": everything}
        assert envoy_plane.server.not_acked(everything) == []
        assert await envoy_plane.envoy.config_version("dynamic_route_configs") == str(everything)
        assert await envoy_plane.spread(40) == {"away": 40}
        assert away.seen[-1]["host"] == f"localhost:{away.port}"
        assert away.seen[-1]["headers"]["x-forwarded-host"] == HOST

        await envoy_plane.apply(chat(50))
        half = await envoy_plane.spread(400)
        print(f"\nACK of the 100% version after {ack_seconds * 1000:.0f} ms; 50%: {half}")
        assert sum(half.values()) == 400
        assert 150 <= half["away"] <= 250  # ±5 standard deviations of a fair coin over 400 draws

        _, metrics = await envoy_plane.envoy.admin("/stats/prometheus")
        by_side = _requests_by_cluster(metrics)
        assert by_side["default/chat/away"] == 40 + half["away"]
        assert by_side["default/chat/home"] == 40 + half["home"]


def _requests_by_cluster(metrics: str) -> dict[str, int]:
    """2xx responses per cluster, from `envoy_cluster_upstream_rq_xx{...}` (the gates' source)."""
    counts: dict[str, int] = {}
    for labels, value in re.findall(
        r"^envoy_cluster_upstream_rq_xx\{([^}]*)\} (\d+)$", metrics, re.MULTILINE
    ):
        found = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        if found.get("envoy_response_code_class") == "2":
            counts[found["envoy_cluster_name"]] = int(value)
    return counts


async def test_an_event_stream_passes_through_chunk_by_chunk_and_outlives_a_rebuilt_cluster(
    tmp_path: Path,
) -> None:
    released = [asyncio.Event() for _ in range(3)]

    async def events(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for number, release in enumerate(released):
            await response.write(f"data: token {number}\n\n".encode())
            await release.wait()  # the next token only once the client has read this one
        await response.write_eof()
        return response

    stream, other = Echo("stream", events), Echo("other")
    async with plane(tmp_path, stream, other) as envoy_plane:
        await envoy_plane.apply(table(route(away_weight=100, away=(stream.endpoint("localhost"),))))
        async with envoy_plane.session.get(envoy_plane.url + "/v1/chat", headers={"Host": HOST}) as response:
            assert response.headers["Content-Type"] == "text/event-stream"
            for number, release in enumerate(released):
                async with asyncio.timeout(5):
                    assert await response.content.readline() == f"data: token {number}\n".encode()
                    assert await response.content.readline() == b"\n"
                if number == 0:
                    # Mid-stream, the away side changes: its cluster is rebuilt, and the weight moves.
                    await envoy_plane.apply(
                        table(
                            route(
                                away_weight=0, home=(other.endpoint(),), away=(other.endpoint("localhost"),)
                            )
                        )
                    )
                release.set()
            assert await response.content.read() == b""
        assert await envoy_plane.get() == (200, "other")


async def test_a_refused_version_is_reported_with_its_reason_and_the_one_before_stays_applied(
    tmp_path: Path,
) -> None:
    home, away = Echo("home"), Echo("away")
    async with plane(tmp_path, home, away) as envoy_plane:
        at_home = table(route(away_weight=0, home=(home.endpoint(),), away=(away.endpoint(),)))
        good, _ = await envoy_plane.apply(at_home)

        broken = _with_invalid_cluster(build_resources(at_home, envoy_plane.server.settings))
        refused = envoy_plane.server.publish(broken)
        assert refused == good + 1
        async with asyncio.timeout(APPLY_SECONDS):
            while not envoy_plane.server.nacks():
                await envoy_plane.server.nodes.changed()
        (nack,) = envoy_plane.server.nacks()["envoy-test-1"]
        assert (nack.type_url, nack.version) == (CLUSTER_TYPE, refused)
        assert "positive duration" in nack.message
        assert envoy_plane.server.acked() == {"envoy-test-1": good}
        assert envoy_plane.server.not_acked(refused) == ["envoy-test-1"]
        assert await envoy_plane.spread(10) == {"home": 10}  # still the version before

        moved, _ = await envoy_plane.apply(
            table(route(away_weight=100, home=(home.endpoint(),), away=(away.endpoint(),)))
        )
        assert envoy_plane.server.nacks() == {}
        assert envoy_plane.server.acked() == {"envoy-test-1": moved}
        assert await envoy_plane.spread(10) == {"away": 10}


def _with_invalid_cluster(resources: Resources) -> Resources:
    """`resources` plus a cluster Envoy must refuse: its connect timeout is negative."""
    broken = pack(
        {"@type": type_url("envoy.config.cluster.v3.Cluster"), "name": "broken", "connect_timeout": "-1s"}
    )
    clusters = {**resources.of_type(CLUSTER_TYPE), "broken": broken}
    return dataclasses.replace(resources, by_type={**resources.by_type, CLUSTER_TYPE: clusters})


async def test_sagemaker_requests_are_signed_at_their_invocation_path_and_prefixes_are_prepended(
    tmp_path: Path,
) -> None:
    async def check_signature(request: web.Request) -> web.StreamResponse:
        headers = {name.lower(): value for name, value in request.headers.items()}
        problem = signature_problem(
            request.method,
            request.path_qs,
            headers,
            await request.read(),
            access_key=ACCESS_KEY,
            secret_key=SECRET_KEY,
        )
        if problem is None:  # the checker is no rubber stamp: the wrong secret fails it
            assert signature_problem(
                request.method,
                request.path_qs,
                headers,
                await request.read(),
                access_key=ACCESS_KEY,
                secret_key="x",
            )
        return web.json_response({"problem": problem}, status=200 if problem is None else 403)

    runtime, front = Echo("runtime", check_signature), Echo("front")
    environment = {
        **{name: value for name, value in os.environ.items() if not name.startswith("AWS_")},
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    async with plane(tmp_path, runtime, front, environment=environment) as envoy_plane:
        signed = Endpoint(f"http://127.0.0.1:{runtime.port}{INVOCATIONS}", auth=AwsSigV4(region="us-west-2"))
        await envoy_plane.apply(
            table(
                route(away_weight=100, away=(signed,), hosts=("signed.example.com",), name="signed"),
                route(
                    away_weight=100,
                    away=(front.endpoint("localhost", "/pods/p1"),),
                    hosts=("front.example.com",),
                    name="front",
                ),
            )
        )
        body = json.dumps({"messages": [{"role": "user", "content": "hi"}]})
        async with envoy_plane.session.post(
            envoy_plane.url + "/v1/chat/completions?stream=false",
            data=body,
            headers={"Host": "signed.example.com", "Content-Type": "application/json"},
        ) as response:
            assert response.status == 200, await response.text()
        assert runtime.seen[-1]["path"] == INVOCATIONS
        assert runtime.seen[-1]["body"] == body.encode()
        assert runtime.seen[-1]["host"] == f"127.0.0.1:{runtime.port}"
        assert "Credential=AKIAVKXDSTEST0001/" in runtime.seen[-1]["headers"]["authorization"]
        assert "/us-west-2/sagemaker/aws4_request" in runtime.seen[-1]["headers"]["authorization"]

        assert await envoy_plane.get("/v1/models?x=1", host="front.example.com") == (200, "front")
        assert front.seen[-1]["path"] == "/pods/p1/v1/models?x=1"
        assert front.seen[-1]["host"] == f"localhost:{front.port}"
        # Our path headers never reach an endpoint, and a client's own cannot steer the path.
        smuggled = {
            "Host": "front.example.com",
            "X-Vk-Provider-Path-Prefix": "/evil",
            "X-Vk-Provider-Fixed-Path": "/x",
        }
        async with envoy_plane.session.get(envoy_plane.url + "/v1", headers=smuggled) as response:
            assert response.status == 200
        assert front.seen[-1]["path"] == "/pods/p1/v1"
        assert not any(name.startswith("x-vk-provider") for name in front.seen[-1]["headers"])


async def test_https_away_endpoints_get_their_name_as_sni_and_a_certificate_that_names_them(
    tmp_path: Path,
) -> None:
    authority = CertificateAuthority.create(tmp_path / "ca")
    pair = authority.issue_serving(tmp_path, "away", common_name="localhost", dns_names=("localhost",))
    names_asked: list[str | None] = []
    serving = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    serving.load_cert_chain(pair.cert, pair.key)
    serving.sni_callback = lambda _socket, name, _context: names_asked.append(name)
    away = Echo("away", tls=serving)
    async with plane(tmp_path, away, ca_file=authority.paths.cert) as envoy_plane:
        await envoy_plane.apply(
            table(
                route(away_weight=100, away=(Endpoint(f"https://localhost:{away.port}"),), name="named"),
                # The certificate names localhost, not 127.0.0.1: Envoy must refuse the connection.
                route(
                    away_weight=100,
                    away=(Endpoint(f"https://127.0.0.1:{away.port}"),),
                    hosts=("by-ip.example.com",),
                    name="by-ip",
                ),
            )
        )
        assert await envoy_plane.get() == (200, "away")
        assert names_asked == ["localhost"]
        assert away.seen[-1]["host"] == f"localhost:{away.port}"
        status, _ = await envoy_plane.get(host="by-ip.example.com")
        assert status == 503
        assert len(away.seen) == 1


async def test_the_gates_read_each_side_from_envoys_statistics(tmp_path: Path) -> None:
    """What the controller's `envoy` data plane judges: per-side responses, 5xx and time to the head,
    read from this Envoy's `/stats/prometheus` by the name our xDS server gave each cluster."""

    async def failing_slowly(request: web.Request) -> web.Response:
        await asyncio.sleep(0.05)  # the away side's answer time, which its p99 must show (noqa: sleep-ok)
        return web.Response(status=503, text="overloaded")

    home, away = Echo("home"), Echo("away", failing_slowly)
    async with plane(tmp_path, home, away) as envoy_plane:
        await envoy_plane.apply(
            table(route(away_weight=50, home=(home.endpoint(),), away=(away.endpoint(),)))
        )
        statuses = [status for status, _ in await asyncio.gather(*(envoy_plane.get() for _ in range(200)))]

        async def flushed() -> str | None:
            # Histograms reach the statistics at Envoy's next flush (a second): wait for all 200.
            _, text = await envoy_plane.envoy.admin(ENVOY_STATS_PATH)
            sides = [parse_envoy_side_sample(text, "default", "chat", side) for side in ("home", "away")]
            timed = sum(side.buckets[-1][1] for side in sides if side.buckets)
            return text if timed == len(statuses) else None

        text = await wait_for(flushed, timeout_seconds=10, what="Envoy's histograms to count every request")

    served_home, failed_away = statuses.count(200), statuses.count(503)
    assert served_home + failed_away == 200
    assert served_home > 0
    assert failed_away > 0
    home_side = parse_envoy_side_sample(text, "default", "chat", "home")
    away_side = parse_envoy_side_sample(text, "default", "chat", "away")
    assert (home_side.responses, home_side.server_errors) == (served_home, 0)
    assert (away_side.responses, away_side.server_errors) == (failed_away, failed_away)
    assert away_side.buckets[-1] == (float("inf"), failed_away)  # every answer timed, bounds in seconds
    away_p99 = quantile_seconds(away_side.buckets, 0.99)
    assert away_p99 is not None
    assert 0.05 <= away_p99 < 1.0
    assert judge(home_side, Gates(), "home").verdict is Verdict.HEALTHY
    assert judge(away_side, Gates(), "away").verdict is Verdict.SEVERE
    assert parse_envoy_side_sample(text, "default", "other", "home") == SideSample()


async def test_the_controller_learns_each_envoys_weight_from_the_xds_server_and_reads_its_counters(
    tmp_path: Path,
) -> None:
    home, away = Echo("home"), Echo("away")
    async with (
        plane(tmp_path, home, away) as envoy_plane,
        serving_status(envoy_plane.server, "127.0.0.1", 0) as status_port,
    ):
        admin = envoy_plane.envoy.admin_url
        fleet = EnvoyFleet(
            f"http://127.0.0.1:{status_port}",
            RouterDirectory(None, urls=[admin], metrics_path=ENVOY_STATS_PATH, kind="envoy"),
        )
        try:
            await envoy_plane.apply(
                table(route(away_weight=40, home=(home.endpoint(),), away=(away.endpoint(),)))
            )
            assert await fleet.views(envoy_offload("chat")) == [
                RouteView("Envoy envoy-test-1", 40, {"home": 1, "away": 1})
            ]
            # A route the table does not have: seen by the Envoy, applied nowhere.
            assert await fleet.views(envoy_offload("other")) == [
                RouteView("Envoy envoy-test-1", None, {"home": 0, "away": 0})
            ]
            answers = await envoy_plane.spread(50)
            samples = await fleet.samples(envoy_offload("chat"), "away")
            # Two replicas found, one connected: the other holds every step back, as not applying it.
            two = EnvoyFleet(
                f"http://127.0.0.1:{status_port}",
                RouterDirectory(None, urls=[admin, "http://127.0.0.1:9"], kind="envoy"),
            )
            try:
                assert await two.views(envoy_offload("chat")) == [
                    RouteView("Envoy envoy-test-1", 40, {"home": 1, "away": 1}),
                    RouteView(
                        "an Envoy replica not connected to the xDS server (1 of 2 are)",
                        None,
                        {"home": 0, "away": 0},
                    ),
                ]
            finally:
                await two.close()
        finally:
            await fleet.close()
    assert list(samples) == [admin]
    assert samples[admin].responses == answers["away"]
