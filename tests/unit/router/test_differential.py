"""The router against no router: the same randomized requests go through it and straight to the backend.

The backend is a raw asyncio server (no HTTP library but httptools' parser) that records exactly what
it receives (method, target, headers in order, the body de-chunked) and answers from a reply drawn for
each request: a status, headers (repeated, mixed case, long), a body sized, chunked or ended by closing
the connection, possibly empty, possibly about a megabyte, written in many small pieces. The client
writes its own bytes, so it controls the framing (Content-Length, chunked with random chunk splits,
none), splits its writes at random, sends several requests on one connection and sometimes reads
slowly. What a proxy may change is left out of the comparison: hop-by-hop headers, the framing
(bodies are compared decoded) and X-Forwarded-*. Everything else must arrive as it does without the
router, in the same order.

The raw server, request reader and response reader are in `rawhttp`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import string

from hypothesis import given, settings
from hypothesis import strategies as st

from vk_provider.router import Router

from . import route, served_router, table
from .rawhttp import (
    REPLY_FRAMINGS,
    REQUEST_FRAMINGS,
    TIMEOUT,
    Headers,
    Pace,
    Received,
    RecordingBackend,
    Reply,
    Request,
    RequestFraming,
    Response,
    connect,
    cut_points,
    end_to_end,
    generator,
    header_value,
    read_response,
    write_in_pieces,
)

UNRESERVED = string.ascii_letters + string.digits + "-._~"
SUB_DELIMS = "!$&'()*+,;=:@"
VISIBLE = st.characters(min_codepoint=0x21, max_codepoint=0x7E)

percent_encoded = st.integers(0, 255).flatmap(lambda byte: st.sampled_from([f"%{byte:02X}", f"%{byte:02x}"]))
path_chars = st.one_of(st.sampled_from(UNRESERVED + SUB_DELIMS), percent_encoded)
segments = st.lists(path_chars, max_size=12).map("".join)
paths = st.lists(segments, min_size=1, max_size=5).map(lambda parts: "/" + "/".join(parts))
query_parts = st.lists(st.one_of(path_chars, st.sampled_from("/?")), max_size=10).map("".join)
queries = st.one_of(
    st.none(),
    st.just(""),
    st.lists(st.tuples(query_parts, query_parts), min_size=1, max_size=5).map(
        lambda pairs: "&".join(f"{key}={value}" for key, value in pairs)
    ),
)


@st.composite
def targets(draw: st.DrawFn) -> bytes:
    path = draw(paths)
    query = draw(queries)
    return (path if query is None else f"{path}?{query}").encode()


@st.composite
def cased(draw: st.DrawFn, name: str) -> bytes:
    """`name` as written, lower, upper or in a random mix of cases."""
    style = draw(st.sampled_from(["as is", "lower", "upper", "mixed"]))
    if style == "lower":
        name = name.lower()
    elif style == "upper":
        name = name.upper()
    elif style == "mixed":
        flips = draw(st.lists(st.booleans(), min_size=len(name), max_size=len(name)))
        name = "".join(c.upper() if flip else c.lower() for c, flip in zip(name, flips, strict=True))
    return name.encode()


short_values = st.text(st.one_of(VISIBLE, st.just(" ")), max_size=60).map(str.strip)
long_values = st.builds(
    lambda unit, size: (unit * size)[:size], st.text(VISIBLE, min_size=1, max_size=8), st.integers(500, 6000)
)
values = st.one_of(short_values, short_values, long_values).map(str.encode)
custom_names = st.text(string.ascii_letters + string.digits, min_size=1, max_size=16).map(lambda s: "X-" + s)
STANDARD_REQUEST = ["Accept", "Accept-Encoding", "Accept-Language", "Authorization", "Cache-Control"]
STANDARD_REQUEST += ["Content-Type", "Cookie", "If-None-Match", "User-Agent", "Origin"]
STANDARD_RESPONSE = ["Cache-Control", "Content-Type", "ETag", "Set-Cookie", "Vary", "Content-Encoding"]
STANDARD_RESPONSE += ["Last-Modified", "Location", "Retry-After", "WWW-Authenticate"]


@st.composite
def header_lists(draw: st.DrawFn, standard: list[str]) -> Headers:
    """End-to-end headers: custom and standard, some repeated with another value."""
    names = st.one_of(custom_names, st.sampled_from(standard))
    headers = [
        (draw(cased(name)), draw(values))
        for name in draw(st.lists(names, max_size=10))
        if name.lower() not in ("x-forwarded-for", "x-forwarded-host", "x-forwarded-proto", "x-case")
    ]
    for _ in range(draw(st.integers(0, 3)) if headers else 0):
        name, _value = headers[draw(st.integers(0, len(headers) - 1))]
        headers.insert(draw(st.integers(0, len(headers))), (name, draw(values)))
    return headers


def drawn_bytes(size: int, seed: int) -> bytes:
    return generator(seed).randbytes(size)


# Each range as likely as the others: big bodies are where buffering and flow control show.
sizes = st.sampled_from([(0, 0), (1, 300), (300, 70_000), (250_000, 320_000)]).flatmap(
    lambda bounds: st.integers(*bounds)
)
reply_sizes = st.sampled_from([(0, 0), (1, 2000), (2000, 100_000), (900_000, 1_100_000)]).flatmap(
    lambda bounds: st.integers(*bounds)
)
METHODS = [b"GET", b"POST", b"PUT", b"DELETE", b"PATCH", b"OPTIONS", b"HEAD"]


@st.composite
def request_specs(draw: st.DrawFn, index: int, *, last: bool) -> Request:
    method = draw(st.sampled_from(METHODS))
    headers = draw(header_lists(STANDARD_REQUEST))
    host = draw(st.sampled_from([b"svc.example", b"Svc.Example:8080", b"10.1.2.3", b"chat.example.com."]))
    headers.insert(draw(st.integers(0, len(headers))), (draw(cased("Host")), host))
    headers.insert(0, (b"X-Case", b"%d" % index))
    hop: Headers = []
    if draw(st.booleans()):
        hop.append((draw(cased("Connection")), b"keep-alive, X-Drop-Me"))
        hop.append((b"X-Drop-Me", b"meant for the next hop only"))
    if draw(st.booleans()):
        hop.append((draw(cased("Keep-Alive")), b"timeout=5, max=100"))
    if draw(st.booleans()):
        hop.append((b"TE", b"trailers"))
    if draw(st.booleans()):
        hop.append((b"Proxy-Connection", b"keep-alive"))
    close = last and draw(st.booleans())
    if close:
        hop.append((draw(cased("Connection")), b"close"))
    for header in hop:
        headers.insert(draw(st.integers(0, len(headers))), header)
    framing: RequestFraming = "none" if method == b"HEAD" else draw(st.sampled_from(REQUEST_FRAMINGS))
    size = 0 if framing == "none" else draw(sizes)
    body = drawn_bytes(size, draw(st.integers(0, 2**32)))
    request = Request(
        method=method,
        target=draw(targets()),
        headers=headers,
        body=body,
        framing=framing,
        framing_name=draw(cased("Transfer-Encoding" if framing == "chunked" else "Content-Length")),
        chunk_cuts=cut_points(draw(st.lists(st.integers(0, 2**30), max_size=30)), size),
        chunk_extensions=draw(st.booleans()),
        write_cuts=(),
        close=close,
    )
    length = len(request.encode())
    return dataclasses.replace(
        request, write_cuts=cut_points(draw(st.lists(st.integers(0, 2**30), max_size=20)), length)
    )


@st.composite
def replies(draw: st.DrawFn) -> Reply:
    headers = draw(header_lists(STANDARD_RESPONSE))
    framing = draw(st.sampled_from(REPLY_FRAMINGS))
    if framing != "close" and draw(st.booleans()):
        headers.insert(draw(st.integers(0, len(headers))), (b"Connection", b"keep-alive, X-Backend-Hop"))
        headers.insert(draw(st.integers(0, len(headers))), (b"X-Backend-Hop", b"for the router only"))
        headers.insert(draw(st.integers(0, len(headers))), (b"Keep-Alive", b"timeout=30"))
    return Reply(
        status=draw(st.sampled_from([200, 200, 201, 204, 206, 301, 304, 400, 404, 418, 500, 503])),
        reason=draw(st.sampled_from([b"OK", b"", b"Whatever The Backend Likes"])),
        headers=headers,
        framing=framing,
        size=draw(reply_sizes),
        pieces=draw(st.integers(1, 64)),
        seed=draw(st.integers(0, 2**32)),
    )


@dataclasses.dataclass(frozen=True)
class Scenario:
    exchanges: list[tuple[Request, Reply]]
    pace: Pace | None
    """How the client reads the router's responses (None: as fast as it can)."""


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    count = draw(st.integers(1, 4))
    exchanges = [
        (draw(request_specs(index, last=index == count - 1)), draw(replies())) for index in range(count)
    ]
    pace = draw(st.builds(Pace, st.integers(512, 16384), st.integers(4, 32))) if draw(st.booleans()) else None
    return Scenario(exchanges, pace)


# --- The comparison ------------------------------------------------------------------------------


@dataclasses.dataclass
class Client:
    """Sends a scenario's requests in order, reusing its connection until a response closes it."""

    port: int
    pace: Pace | None = None
    router: bool = False
    """Whether `port` is the router's: then a request it answers itself (an upgrade, which it
    refuses) follows the last request."""
    connections: int = 0

    async def run(self, scenario: Scenario) -> list[Response]:
        responses: list[Response] = []
        async with contextlib.AsyncExitStack() as stack:
            connection: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
            for request, _reply in scenario.exchanges:
                if connection is None:
                    connection = await connect(self.port)
                    stack.push_async_callback(_closed, connection[1])
                    self.connections += 1
                reader, writer = connection
                await write_in_pieces(writer, request.encode(), request.write_cuts)
                response = await read_response(reader, method=request.method, pace=self.pace)
                responses.append(response)
                if response.closes:
                    assert await reader.read() == b"", "bytes after a response that closes its connection"
                    connection = None
            if connection is not None and self.router:
                # The connection is still in step: a last request (an upgrade, which the router
                # refuses itself) is answered as the first thing after the last response.
                reader, writer = connection
                writer.write(
                    b"GET / HTTP/1.1\r\nHost: router\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
                )
                last = await read_response(reader)
                assert last.status == 501, last
                assert b"does not pass upgrades" in last.body, last
        return responses


async def _closed(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(ConnectionError):
        await writer.wait_closed()


async def compare(scenario: Scenario) -> None:
    by_case = {b"%d" % index: reply for index, (_request, reply) in enumerate(scenario.exchanges)}

    def reply(received: Received) -> Reply:
        case = header_value(received.headers, b"x-case")
        assert case is not None
        return by_case[case]

    async with RecordingBackend(reply) as backend:
        direct = await Client(backend.port).run(scenario)
        straight = list(backend.received)
        backend.received.clear()
        async with served_router(Router(table(route(home=(backend.endpoint(),))))) as server:
            client = Client(server.port, scenario.pace, router=True)
            relayed = await client.run(scenario)
        via_router = list(backend.received)

    requests = [request for request, _reply in scenario.exchanges]
    assert len(straight) == len(via_router) == len(requests)
    for index, (request, plain, proxied) in enumerate(zip(requests, straight, via_router, strict=True)):
        expected = end_to_end(request.headers, drop_named=True)
        # The harness itself: the backend read what the client wrote.
        assert (plain.method, plain.target, plain.body) == (request.method, request.target, request.body)
        assert end_to_end(plain.headers, drop_named=True) == expected
        # Through the router: the same method, target, body, and end-to-end headers in their order.
        assert proxied.method == request.method, index
        assert proxied.target == request.target, index
        assert proxied.body == request.body, (index, len(proxied.body), len(request.body))
        assert end_to_end(proxied.headers, drop_named=False) == expected, index

    for index, (request, answered, relayed_answer) in enumerate(zip(requests, direct, relayed, strict=True)):
        assert relayed_answer.status == answered.status, index
        assert end_to_end(relayed_answer.headers, drop_named=False) == end_to_end(
            answered.headers, drop_named=True
        ), index
        assert relayed_answer.body == answered.body, (index, len(relayed_answer.body), len(answered.body))
        # The router keeps the client's connection unless the client asked to close it.
        assert relayed_answer.closes == request.close, index
    assert client.connections == 1


@settings(max_examples=50, deadline=None)
@given(scenarios())
def test_the_router_relays_what_the_backend_would_get_without_it(scenario: Scenario) -> None:
    async def bounded() -> None:
        async with asyncio.timeout(TIMEOUT):
            await compare(scenario)

    asyncio.run(bounded())
