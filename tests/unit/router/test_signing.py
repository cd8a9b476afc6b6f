"""Requests to SigV4 endpoints go out signed: checked by a local stand-in for the SageMaker runtime.

The stand-in recomputes each request's signature with botocore's SigV4 primitives from what it
received and a known secret, and answers 403 when it does not match, as AWS would. Its address is
local, so the endpoints name region and service in their marker instead of in their host.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials, ReadOnlyCredentials
from multidict import CIMultiDict

from tests.unit.local import closed_port_url
from vk_provider.kit.traffic_auth import AwsSigV4
from vk_provider.router import Endpoint, ProxySettings, Router
from vk_provider.router.signing import RequestSigning, split_headers

from . import backends, route, router_client, table

ACCESS_KEY = "AKIAVKROUTERTEST0001"
SECRET_KEY = "router-test-secret"
SESSION_TOKEN = "router-session-token"
REGION = "us-west-2"
AUTH = AwsSigV4(region=REGION)
INVOCATIONS = "/endpoints/vk-x/invocations"

_AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/(?P<service>[^/]+)"
    r"/aws4_request, SignedHeaders=(?P<signed>[a-z0-9;-]+), Signature=(?P<signature>[0-9a-f]{64})"
)


def verify(method: str, url: str, headers: dict[str, str], body: bytes) -> str | None:
    """Why the request's signature is wrong for the known secret, or None when it is right."""
    found = _AUTHORIZATION.fullmatch(headers.get("authorization", ""))
    if found is None:
        return "no SigV4 Authorization header"
    if (found["key"], found["region"], found["service"]) != (ACCESS_KEY, REGION, "sagemaker"):
        return f"wrong credential scope {found.group(0)!r}"
    stamp = headers.get("x-amz-date", "")
    sent = datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    if abs(datetime.now(UTC) - sent) > timedelta(minutes=5) or stamp[:8] != found["date"]:
        return "stale or inconsistent X-Amz-Date"
    signed = found["signed"].split(";")
    if not {"host", "x-amz-date"} <= set(signed):
        return f"host and x-amz-date must be signed, not only {signed}"
    request = AWSRequest(method=method, url=url, headers={name: headers[name] for name in signed}, data=body)
    request.context["timestamp"] = stamp
    auth = SigV4Auth(ReadOnlyCredentials(ACCESS_KEY, SECRET_KEY, SESSION_TOKEN), "sagemaker", REGION)
    expected = auth.signature(auth.string_to_sign(request, auth.canonical_request(request)), request)
    return None if hmac.compare_digest(expected, found["signature"]) else "signature mismatch"


class Runtime:
    """A stand-in for runtime.sagemaker.<region>.amazonaws.com: checks signatures, streams answers."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, str], bytes]] = []
        self.verdicts: list[str | None] = []
        self.first_chunk_read = asyncio.Event()
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._invoke)
        self.server = TestServer(app, host="127.0.0.1")

    def endpoint(self) -> Endpoint:
        return Endpoint(f"http://127.0.0.1:{self.server.port}{INVOCATIONS}", auth=AUTH)

    async def _invoke(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {name.lower(): value for name, value in request.headers.items()}
        self.received.append((request.path_qs, headers, body))
        verdict = verify(request.method, f"http://{request.host}{request.path_qs}", headers, body)
        self.verdicts.append(verdict)
        if verdict is not None:
            return web.json_response({"message": verdict}, status=403)
        # Two chunks, the second only once the client has read the first: the answer must stream.
        response = web.StreamResponse(headers={"Content-Type": "application/vnd.amazon.eventstream"})
        await response.prepare(request)
        await response.write(b"event-1:" + body[:16])
        await self.first_chunk_read.wait()
        await response.write(b"|event-2")
        await response.write_eof()
        return response


@contextlib.asynccontextmanager
async def runtime() -> AsyncIterator[Runtime]:
    stand_in = Runtime()
    async with stand_in.server:
        yield stand_in


def signing(credentials: Credentials | None) -> RequestSigning:
    return RequestSigning(lambda: credentials)


GOOD = Credentials(ACCESS_KEY, SECRET_KEY, SESSION_TOKEN)
BODY = b'{"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 8}'


async def chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part
        await asyncio.sleep(0)


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked-upload"])
async def test_a_request_to_a_sigv4_endpoint_arrives_signed_and_its_answer_streams_back(
    chunked: bool,
) -> None:
    async with runtime() as stand_in:
        router = Router(table(route(weight=100, away=(stand_in.endpoint(),))), signing=signing(GOOD))
        async with (
            router_client(router) as client,
            client.post(
                "/v1/chat/completions?stream=true",
                data=chunks(BODY[:10], BODY[10:]) if chunked else BODY,
                headers={
                    "Content-Type": "application/json",
                    "X-Amzn-SageMaker-Custom-Attributes": "accept_eula=true",
                    "Authorization": "Bearer meant-for-the-home-side",
                    "X-Amz-Content-SHA256": "UNSIGNED-PAYLOAD",
                    "Host": "chat.example.com",
                },
            ) as response,
        ):
            assert response.status == 200, await response.text()
            assert response.headers["Content-Type"] == "application/vnd.amazon.eventstream"
            async with asyncio.timeout(5):  # a router that buffered the answer would wait here forever
                first = await response.content.readany()
            stand_in.first_chunk_read.set()
            rest = await response.read()
        assert first + rest == b"event-1:" + BODY[:16] + b"|event-2"
        assert stand_in.verdicts == [None]
        ((path, headers, body),) = stand_in.received
        # The invocation URL is the whole target: the client's path and query are not appended.
        assert path == INVOCATIONS
        assert body == BODY
        assert headers["host"] == f"127.0.0.1:{stand_in.server.port}"
        assert headers["x-forwarded-host"] == "chat.example.com"
        assert headers["x-amz-security-token"] == SESSION_TOKEN
        assert "x-amz-content-sha256" not in headers  # the client's could replace the body's hash
        signed = headers["authorization"].split("SignedHeaders=")[1].split(",")[0].split(";")
        assert {"content-type", "x-amzn-sagemaker-custom-attributes"} <= set(signed)


async def test_the_stand_in_refuses_a_signature_made_with_another_secret() -> None:
    async with runtime() as stand_in:
        wrong = Credentials(ACCESS_KEY, "not-the-secret", SESSION_TOKEN)
        router = Router(table(route(weight=100, away=(stand_in.endpoint(),))), signing=signing(wrong))
        async with router_client(router) as client, client.post("/", data=BODY) as response:
            assert response.status == 403
            assert "signature mismatch" in await response.text()


async def test_without_credentials_the_request_gets_502_and_one_error_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with runtime() as stand_in:
        router = Router(table(route(weight=100, away=(stand_in.endpoint(),))), signing=signing(None))
        with caplog.at_level(logging.ERROR, logger="vk_provider.router.signing"):
            async with router_client(router) as client:
                for _ in range(3):
                    async with client.post("/v1/chat", data=BODY) as response:
                        assert response.status == 502
                        text = await response.text()
                        assert "cannot sign the request" in text
                        assert "the router has no AWS credentials" in text
        assert stand_in.received == []
        assert len(caplog.records) == 1  # once, not once per request
        exposition = router.metrics.exposition().decode()
        assert (
            'vk_provider_router_errors_total{name="web",namespace="ml",reason="signing",side="away"} 3.0'
            in exposition
        )


async def test_credentials_that_appear_later_are_found_and_the_recovery_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    found: list[Credentials | None] = [None, GOOD]
    async with runtime() as stand_in:
        router = Router(
            table(route(weight=100, away=(stand_in.endpoint(),))),
            signing=RequestSigning(lambda: found.pop(0), retry_seconds=0.0),
        )
        stand_in.first_chunk_read.set()
        with caplog.at_level(logging.INFO, logger="vk_provider.router.signing"):
            async with router_client(router) as client:
                statuses = []
                for _ in range(3):
                    async with client.post("/", data=BODY) as response:
                        statuses.append(response.status)
                        await response.read()
        assert statuses == [502, 200, 200]
        assert [record.levelname for record in caplog.records] == ["ERROR", "INFO"]


async def test_a_body_too_large_to_sign_gets_413_and_nothing_is_sent() -> None:
    async with runtime() as stand_in:
        router = Router(
            table(route(weight=100, away=(stand_in.endpoint(),))),
            settings=ProxySettings(signed_body_limit=64),
            signing=signing(GOOD),
        )
        async with router_client(router) as client:
            for data in (b"x" * 65, chunks(b"x" * 40, b"x" * 40)):
                async with client.post("/", data=data) as response:
                    assert response.status == 413
                    assert "larger than the 64 bytes" in await response.text()
        assert stand_in.received == []
        assert (
            'vk_provider_router_rejected_total{name="web",namespace="ml",reason="body_too_large",'
            'side="away"} 2.0' in router.metrics.exposition().decode()
        )


async def test_a_streamed_body_read_for_signing_also_serves_the_retry_elsewhere() -> None:
    """The signed endpoint refuses the connection; the home retry gets the bytes already read."""
    async with backends("home", handler=echo) as (home,):
        dead = Endpoint(f"{closed_port_url()}{INVOCATIONS}", auth=AUTH)
        router = Router(
            table(route(weight=100, home=(home.endpoint(),), away=(dead,))), signing=signing(GOOD)
        )
        async with (
            router_client(router) as client,
            client.post("/v1/chat", data=chunks(b"part one, ", b"part two")) as response,
        ):
            assert response.status == 200
            assert await response.text() == "home got part one, part two at /v1/chat"


async def test_a_plain_attempt_that_could_not_connect_leaves_the_body_for_the_signed_one() -> None:
    async with runtime() as stand_in:
        stand_in.first_chunk_read.set()
        router = Router(
            table(route(weight=0, home=(Endpoint(closed_port_url()),), away=(stand_in.endpoint(),))),
            signing=signing(GOOD),
        )
        async with (
            router_client(router) as client,
            client.post("/v1/chat", data=chunks(BODY[:5], BODY[5:])) as response,
        ):
            assert response.status == 200
            await response.read()
        assert stand_in.verdicts == [None]
        assert stand_in.received[0][2] == BODY


async def echo(request: web.Request) -> web.StreamResponse:
    return web.Response(text=f"home got {(await request.read()).decode()} at {request.path}")


def test_headers_are_split_into_signed_unsigned_and_dropped() -> None:
    forwarded = CIMultiDict(
        [
            ("Accept", "text/event-stream"),
            ("accept", "application/json"),
            ("X-Amzn-SageMaker-Target-Model", "m.tar.gz"),
            ("X-Forwarded-For", "10.0.0.1"),
            ("User-Agent", "curl"),
            ("Host", "chat.example.com"),
            ("Content-Length", "3"),
            ("Authorization", "Bearer x"),
            ("X-Amz-Security-Token", "the client's"),
        ]
    )
    signed, unsigned = split_headers(forwarded)
    # Sent twice, signed (and then sent) once as the comma-joined value the signature covers.
    assert signed == {
        "Accept": "text/event-stream,application/json",
        "X-Amzn-SageMaker-Target-Model": "m.tar.gz",
    }
    assert list(unsigned.items()) == [("X-Forwarded-For", "10.0.0.1"), ("User-Agent", "curl")]
