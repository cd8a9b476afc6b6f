"""Token streams through a signed SageMaker endpoint, end to end through a served router.

The stand-in for the SageMaker runtime is a raw asyncio server, so each test decides the framing of
its answer (chunked, delimited by the connection's end) and where it breaks. It checks each request's
SigV4 signature (`test_signing.verify`) and records the path it was sent to. An answer's head goes out
at once, as SageMaker sends it before the model produces anything; each piece of its body waits until
the test releases it, so a test can prove the client holds payload N while frame N+1 is still unsent.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Literal

import aiohttp
import pytest

from vk_provider.router import Endpoint, ProxySettings, Router

from . import local_tls, route, router_client, table
from .eventframes import exception, model_stream_error, part, sse_events
from .test_signing import AUTH, BODY, GOOD, INVOCATIONS, signing, verify

STREAM_PATH = INVOCATIONS + "-response-stream"
EVENT_STREAM = "application/vnd.amazon.eventstream"
SSE = "text/event-stream; charset=utf-8"
TOKENS = (b'data: {"token": "Hel"}\n\n', b'data: {"token": "lo"}\n\n', b"data: [DONE]\n\n")
JSON_TOKENS = (b'{"token": "Hel"}\n', b'{"token": "lo"}\n')
STREAM_BODY = b'{"messages": [{"role": "user", "content": "Hi"}], "stream": true}'
WHOLE_BODY = b'{"messages": [{"role": "user", "content": "Hi"}], "stream": false}'
JSON_REQUEST = {"Content-Type": "application/json"}
"""aiohttp would call a bytes body application/octet-stream, whose `"stream": true` asks for nothing."""
WITHIN = 5.0
"""Seconds a step may take; a router that held the stream back instead of relaying it waits forever."""

Framing = Literal["chunked", "length", "close"]


@dataclasses.dataclass(frozen=True)
class Script:
    """How the stand-in answers a path: the head at once, then each piece as the test releases it."""

    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    pieces: tuple[bytes, ...] = ()
    framing: Framing = "chunked"
    """chunked; length (Content-Length); close (the body ends with the connection)."""
    gated: bool = True
    """Each piece waits for `Runtime.release`; False: the whole answer goes at once."""
    cut: bool = False
    """After the last piece, abort the connection instead of ending the body."""


def stream_of(
    *pieces: bytes, model_type: str | None = SSE, framing: Framing = "chunked", cut: bool = False
) -> Script:
    """An InvokeEndpointWithResponseStream answer carrying the model's content type."""
    headers = [("Content-Type", EVENT_STREAM), ("x-amzn-RequestId", "stand-in")]
    if model_type is not None:
        headers.append(("X-Amzn-SageMaker-Content-Type", model_type))
    return Script(headers=tuple(headers), pieces=pieces, framing=framing, cut=cut)


def whole(status: int, body: bytes, content_type: str = "application/json") -> Script:
    return Script(status, (("Content-Type", content_type),), (body,), framing="length", gated=False)


@dataclasses.dataclass(frozen=True)
class Invocation:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    verdict: str | None
    """Why the signature is wrong, or None."""


class Runtime:
    """A stand-in for runtime.sagemaker.<region>.amazonaws.com answering each path with its script."""

    def __init__(self, scripts: dict[str, Script], *, tls: ssl.SSLContext | None = None) -> None:
        self.scripts = scripts
        self.tls = tls
        self.received: list[Invocation] = []
        self.sent = 0
        """Gated pieces written so far (counted before the write)."""
        self.released = 0
        self.port = 0
        self._moved = asyncio.Event()
        """Set when `released` grows or the stand-in stops."""
        self._stopping = False
        self._connections: dict[asyncio.StreamWriter, asyncio.Task[None]] = {}
        self._server: asyncio.Server | None = None

    def endpoint(self) -> Endpoint:
        scheme = "https" if self.tls is not None else "http"
        return Endpoint(f"{scheme}://127.0.0.1:{self.port}{INVOCATIONS}", auth=AUTH)

    def release(self, pieces: int = 1) -> None:
        self.released += pieces
        self._moved.set()

    def only_invocation(self) -> Invocation:
        (invocation,) = self.received
        assert invocation.verdict is None, invocation.verdict
        return invocation

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.tls)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        """Stop listening, break open connections and let their handlers end (none is cancelled)."""
        self._stopping = True
        self._moved.set()
        if self._server is not None:
            self._server.close()
        for writer in self._connections:
            writer.transport.abort()
        async with asyncio.timeout(WITHIN):
            await asyncio.gather(*self._connections.values())

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections[writer] = task
        try:
            while not self._stopping and await self._answer(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass  # the router closed the connection (it does after a stream failed)
        finally:
            del self._connections[writer]
            writer.transport.abort()

    async def _released(self) -> bool:
        """Wait until the next gated piece may go; False when the stand-in stops first."""
        while self.sent >= self.released and not self._stopping:
            self._moved.clear()
            await self._moved.wait()
        return not self._stopping

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; whether the connection serves another."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False  # closed between requests
        start, *lines = head[:-4].decode("latin-1").split("\r\n")
        method, target, _version = start.split(" ")
        headers: dict[str, str] = {}
        for line in lines:
            name, _, value = line.partition(":")
            assert name.lower() not in headers, f"{name} sent twice"
            headers[name.lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        scheme = "https" if self.tls is not None else "http"
        verdict = verify(method, f"{scheme}://{headers.get('host', '')}{target}", headers, body)
        self.received.append(Invocation(method, target, headers, body, verdict))
        if verdict is not None:
            script = whole(403, json.dumps({"message": verdict}).encode())
        else:
            script = self.scripts.get(target, whole(404, b'{"message": "no such operation"}'))
        return await self._play(script, writer)

    async def _play(self, script: Script, writer: asyncio.StreamWriter) -> bool:
        head = [f"HTTP/1.1 {script.status} Stand-in", *(f"{name}: {value}" for name, value in script.headers)]
        if script.framing == "chunked":
            head.append("Transfer-Encoding: chunked")
        elif script.framing == "length":
            head.append(f"Content-Length: {sum(len(piece) for piece in script.pieces)}")
        else:
            head.append("Connection: close")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        await writer.drain()
        for piece in script.pieces:
            if script.gated:
                if not await self._released():
                    return False
                self.sent += 1
            writer.write(b"%x\r\n%b\r\n" % (len(piece), piece) if script.framing == "chunked" else piece)
            await writer.drain()
        if script.cut:
            writer.transport.abort()
            return False
        if script.framing == "chunked":
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        return script.framing != "close"


@contextlib.asynccontextmanager
async def runtime(scripts: dict[str, Script], *, tls: ssl.SSLContext | None = None) -> AsyncIterator[Runtime]:
    stand_in = Runtime(scripts, tls=tls)
    await stand_in.start()
    try:
        yield stand_in
    finally:
        await stand_in.stop()


def router_for(stand_in: Runtime, settings: ProxySettings | None = None) -> Router:
    return Router(
        table(route(weight=100, away=(stand_in.endpoint(),))), settings=settings, signing=signing(GOOD)
    )


async def receive(response: aiohttp.ClientResponse, expected: bytes) -> None:
    """The next bytes of the response's body are `expected`; they must come without more being sent."""
    async with asyncio.timeout(WITHIN):
        assert await response.content.readexactly(len(expected)) == expected


async def receive_one_by_one(
    stand_in: Runtime, response: aiohttp.ClientResponse, payloads: tuple[bytes, ...]
) -> None:
    """Release one frame per payload: each payload reaches the client while the next frame is held."""
    for number, payload in enumerate(payloads, 1):
        stand_in.release()
        await receive(response, payload)
        assert stand_in.sent == number


def signed_names(invocation: Invocation) -> set[str]:
    return set(invocation.headers["authorization"].split("SignedHeaders=")[1].split(",")[0].split(";"))


def error_event(code: str, message: str, error_code: str | None = None) -> tuple[str, str]:
    error = {"code": code, "message": message}
    if error_code is not None:
        error["error_code"] = error_code
    return ("error", json.dumps({"error": error}))


# --- Which operation a request goes to ----------------------------------------------------------------


async def test_an_sse_request_streams_token_by_token_with_the_models_content_type() -> None:
    accept = "text/event-stream, application/json;q=0.5"
    async with (
        runtime({STREAM_PATH: stream_of(*(part(token) for token in TOKENS))}) as stand_in,
        router_client(router_for(stand_in)) as client,
        client.post(
            "/v1/chat/completions",
            data=BODY,
            headers={"Accept": accept, "Content-Type": "application/json"},
        ) as response,
    ):
        assert response.status == 200
        # The model's type, not the framing's.
        assert response.headers["Content-Type"] == SSE
        assert response.headers["Transfer-Encoding"] == "chunked"
        await receive_one_by_one(stand_in, response, TOKENS)
        async with asyncio.timeout(WITHIN):
            assert await response.read() == b""  # ended properly, nothing after the last payload
    invocation = stand_in.only_invocation()
    assert (invocation.method, invocation.path, invocation.body) == ("POST", STREAM_PATH, BODY)
    # InvokeEndpointWithResponseStream reads the wanted type from X-Amzn-SageMaker-Accept, signed.
    assert invocation.headers["x-amzn-sagemaker-accept"] == accept
    assert invocation.headers["accept"] == accept
    assert {"x-amzn-sagemaker-accept", "accept", "content-type"} <= signed_names(invocation)


async def test_a_json_body_asking_for_a_stream_is_streamed_without_an_accept_header() -> None:
    async with (
        runtime({STREAM_PATH: stream_of(*(part(token) for token in TOKENS))}) as stand_in,
        router_client(router_for(stand_in)) as client,
        client.post("/v1/chat/completions", data=STREAM_BODY, headers=JSON_REQUEST) as response,
    ):
        assert response.status == 200
        assert response.headers["Content-Type"] == SSE
        await receive_one_by_one(stand_in, response, TOKENS)
        async with asyncio.timeout(WITHIN):
            assert await response.read() == b""
    invocation = stand_in.only_invocation()
    assert (invocation.path, invocation.body) == (STREAM_PATH, STREAM_BODY)
    assert "x-amzn-sagemaker-accept" not in invocation.headers  # the client named no type


async def test_a_json_body_with_stream_false_is_invoked_and_answered_whole() -> None:
    answer = b'{"choices": [{"message": {"content": "Hello"}}]}'
    scripts = {INVOCATIONS: whole(200, answer), STREAM_PATH: stream_of(part(b"wrong operation"))}
    async with (
        runtime(scripts) as stand_in,
        router_client(router_for(stand_in)) as client,
        client.post(
            "/v1/chat/completions", data=WHOLE_BODY, headers={"Content-Type": "application/json"}
        ) as response,
    ):
        assert response.status == 200
        assert response.headers["Content-Type"] == "application/json"
        assert response.headers["Content-Length"] == str(len(answer))
        assert await response.read() == answer
    invocation = stand_in.only_invocation()
    assert (invocation.path, invocation.body) == (INVOCATIONS, WHOLE_BODY)
    assert "x-amzn-sagemaker-accept" not in invocation.headers


async def test_frames_split_anywhere_by_the_network_come_out_as_whole_payloads_over_tls(
    tmp_path: Path,
) -> None:
    """The one TLS test: the CA of the stand-in's certificate is given by `upstream_ca_file`."""
    ca_file, server_tls = local_tls(tmp_path)
    first, second = part(TOKENS[0]), part(TOKENS[1])
    pieces = (first[:9], first[9:] + second[:3], second[3:])
    async with runtime({STREAM_PATH: stream_of(*pieces)}, tls=server_tls) as stand_in:
        # Without the CA the stand-in's certificate is not trusted: the endpoint is never reached.
        async with (
            router_client(router_for(stand_in)) as client,
            client.post("/", data=BODY, headers={"Accept": "text/event-stream"}) as refused,
        ):
            assert refused.status == 503
        assert stand_in.received == []
        settings = ProxySettings(upstream_ca_file=str(ca_file))
        async with (
            router_client(router_for(stand_in, settings)) as client,
            client.post("/", data=BODY, headers={"Accept": "text/event-stream"}) as response,
        ):
            assert response.status == 200
            assert response.headers["Content-Type"] == SSE
            stand_in.release(2)  # half of the first frame, then its rest with the second's start
            await receive(response, TOKENS[0])
            stand_in.release()
            await receive(response, TOKENS[1])
            async with asyncio.timeout(WITHIN):
                assert await response.read() == b""
        assert stand_in.only_invocation().path == STREAM_PATH


async def test_a_stream_whose_model_names_no_content_type_is_relayed_without_one() -> None:
    async with (
        runtime({STREAM_PATH: stream_of(part(b"raw bytes"), model_type=None)}) as stand_in,
        router_client(router_for(stand_in)) as client,
        client.post("/", data=STREAM_BODY, headers=JSON_REQUEST) as response,
    ):
        assert response.status == 200
        # Not the framing's type: better no claim than a wrong one.
        assert "Content-Type" not in response.headers
        stand_in.release()
        async with asyncio.timeout(WITHIN):
            assert await response.read() == b"raw bytes"


# --- Answers that are not a stream ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (424, b'{"ErrorCode": "CLIENT_ERROR_FROM_MODEL", "Message": "Received client error (400)"}'),
        (400, b'{"message": "Endpoint vk-x of account 123 not found."}'),
        (200, b'{"note": "a 200 that is not event-stream framed is not decoded"}'),
    ],
    ids=["424-model-error", "400-validation", "200-json"],
)
async def test_an_answer_to_a_stream_request_that_is_not_a_stream_passes_through_unchanged(
    status: int, body: bytes
) -> None:
    async with (
        runtime({STREAM_PATH: whole(status, body)}) as stand_in,
        router_client(router_for(stand_in)) as client,
        client.post("/", data=BODY, headers={"Accept": "text/event-stream"}) as response,
    ):
        assert response.status == status
        assert response.headers["Content-Type"] == "application/json"
        assert await response.read() == body
    assert stand_in.only_invocation().path == STREAM_PATH


# --- Failures mid-stream ------------------------------------------------------------------------------


async def test_a_model_stream_error_ends_an_sse_stream_with_an_error_event_and_is_counted() -> None:
    pieces = (part(TOKENS[0]), part(TOKENS[1]), model_stream_error("StreamBroken"), part(b"never relayed"))
    async with runtime({STREAM_PATH: stream_of(*pieces)}) as stand_in:
        router = router_for(stand_in)
        async with (
            router_client(router) as client,
            client.post("/", data=BODY, headers={"Accept": "text/event-stream"}) as response,
        ):
            assert response.status == 200
            await receive_one_by_one(stand_in, response, TOKENS[:2])
            stand_in.release(2)
            async with asyncio.timeout(WITHIN):
                rest = await response.read()  # a complete chunked body: no ClientPayloadError
        assert sse_events(TOKENS[0] + TOKENS[1] + rest) == [
            ("message", '{"token": "Hel"}'),
            ("message", '{"token": "lo"}'),
            error_event("ModelStreamError", "the model took too long", "StreamBroken"),
        ]
        exposition = router.metrics.exposition().decode()
    assert (
        'vk_provider_router_errors_total{name="web",namespace="ml",reason="upstream_stream_error",'
        'side="away"} 1.0' in exposition
    )


async def test_a_model_stream_error_in_a_json_stream_aborts_the_clients_connection() -> None:
    pieces = (
        *(part(token) for token in JSON_TOKENS),
        exception("InternalStreamFailure", {"Message": "gone"}),
    )
    async with runtime({STREAM_PATH: stream_of(*pieces, model_type="application/json")}) as stand_in:
        router = router_for(stand_in)
        async with (
            router_client(router) as client,
            client.post("/", data=STREAM_BODY, headers=JSON_REQUEST) as response,
        ):
            assert response.status == 200
            assert response.headers["Content-Type"] == "application/json"
            await receive_one_by_one(stand_in, response, JSON_TOKENS)
            stand_in.release()
            # Cut short, so it cannot pass for a complete (short) answer.
            with pytest.raises(aiohttp.ClientPayloadError):
                async with asyncio.timeout(WITHIN):
                    await response.read()
    assert errors(router) == {"upstream_stream_error": 1.0}


def errors(router: Router) -> dict[str, float]:
    """The router's error counts by reason (of the one route, away side)."""
    prefix = 'vk_provider_router_errors_total{name="web",namespace="ml",reason="'
    counts: dict[str, float] = {}
    for line in router.metrics.exposition().decode().splitlines():
        if line.startswith(prefix):
            reason, _, rest = line.removeprefix(prefix).partition('"')
            assert rest.startswith(',side="away"} '), line
            counts[reason] = float(rest.rpartition(" ")[2])
    return counts


@pytest.mark.parametrize("framing", ["close", "chunked"], ids=["close-delimited", "chunked"])
async def test_a_json_stream_cut_inside_a_frame_aborts_the_clients_connection(framing: Framing) -> None:
    pieces = (part(JSON_TOKENS[0]), part(JSON_TOKENS[1])[:10])
    script = stream_of(*pieces, model_type="application/json", framing=framing, cut=True)
    async with runtime({STREAM_PATH: script}) as stand_in:
        router = router_for(stand_in)
        async with (
            router_client(router) as client,
            client.post("/", data=STREAM_BODY, headers=JSON_REQUEST) as response,
        ):
            assert response.status == 200
            await receive_one_by_one(stand_in, response, JSON_TOKENS[:1])
            stand_in.release()
            with pytest.raises(aiohttp.ClientPayloadError):
                async with asyncio.timeout(WITHIN):
                    await response.read()
    # The body ended inside a frame (close-delimited) or the connection broke: both a failed stream.
    assert errors(router) == {"upstream_stream_error": 1.0}


@pytest.mark.parametrize("framing", ["close", "chunked"], ids=["close-delimited", "chunked"])
async def test_an_sse_stream_cut_inside_a_frame_ends_with_an_error_event(framing: Framing) -> None:
    pieces = (part(TOKENS[0]), part(TOKENS[1])[:10])
    async with runtime({STREAM_PATH: stream_of(*pieces, framing=framing, cut=True)}) as stand_in:
        router = router_for(stand_in)
        async with (
            router_client(router) as client,
            client.post("/", data=BODY, headers={"Accept": "text/event-stream"}) as response,
        ):
            assert response.status == 200
            await receive_one_by_one(stand_in, response, TOKENS[:1])
            stand_in.release()
            async with asyncio.timeout(WITHIN):
                rest = await response.read()  # a complete chunked body: no ClientPayloadError
    (message, (event_type, data)) = sse_events(TOKENS[0] + rest)
    assert message == ("message", '{"token": "Hel"}')
    assert event_type == "error"
    assert json.loads(data)["error"]["code"] == "TruncatedEventStream"
    assert errors(router) == {"upstream_stream_error": 1.0}
