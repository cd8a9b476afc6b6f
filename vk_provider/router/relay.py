"""One exchange with an endpoint: the client's request body on, the endpoint's response back to the
client, as bytes arrive, and SageMaker's response streams decoded on the way.

The client's connection (`client`) starts each exchange and answers what it could not (400, 502,
504); the endpoint's connection (`upstream`) calls the relay as its response arrives. The design of
the data path as a whole is `client`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from vk_provider.router import wire
from vk_provider.router.eventstream import (
    TRUNCATED_STREAM,
    ResponseStreamDecoder,
    StreamFailureError,
    is_event_stream,
    relayed_content_type,
    stream_failure_ending,
)
from vk_provider.router.upstream import Origin, UpstreamConnection
from vk_provider.routetable.table import Endpoint, Route, Side

if TYPE_CHECKING:
    from vk_provider.router.client import ClientConnection, Request

logger = logging.getLogger(__name__)


class Outgoing:
    """One attempt's request head, the whole body when it was read (signed), and whether it streams."""

    __slots__ = ("body", "head", "origin", "streaming")

    def __init__(self, origin: Origin, head: bytes, body: bytes | None, *, streaming: bool) -> None:
        self.origin = origin
        self.head = head
        self.body = body
        self.streaming = streaming


class Relay:
    """One exchange with an endpoint: the request body on, the response back, as bytes arrive."""

    def __init__(
        self,
        client: ClientConnection,
        request: Request,
        route: Route,
        side: Side,
        *,
        endpoint: Endpoint,
        connection: UpstreamConnection,
        streaming: bool,
    ) -> None:
        self.client = client
        self.request = request
        self.route = route
        self.side = side
        self.endpoint = endpoint
        self.connection = connection
        self.sent_at = client.last_active  # when the request's last bytes came: precise enough here
        self.outcome: bool | None = None
        """Once over: True when the response went out whole; False when it did not (see below)."""
        self.over: Callable[[Relay], None] = _nothing
        """Called once, when the exchange is over."""
        self.responded = False
        self.failure: str | None = None
        """Why the endpoint failed before its response head (then the client gets 502)."""
        self.timed_out = False
        """The endpoint sent no response head within the response timeout (then 504)."""
        self.bad_body: str | None = None
        """Why the client's body broke HTTP framing before any response (then 400)."""
        self.keep_alive = request.keep_alive
        self.sent_whole_body = not request.has_body
        self._chunked_out = False
        self._close_delimited = False
        self._decoder: ResponseStreamDecoder | None = None
        self._content_type: str | None = None
        self._streaming = streaming
        self._head_only = request.method == b"HEAD"

    @property
    def reusable(self) -> bool:
        return self.outcome is True and self.sent_whole_body

    @property
    def waiting_for_head(self) -> bool:
        return not self.responded and self.outcome is None

    # request body

    def send_body_from(self, head: bytes) -> None:
        """Send the head with what is buffered of the body, then each chunk as the client sends it."""
        request = self.request
        self.client.send_continue(request)
        buffered = b"".join(request.body)
        request.body = []
        data = head
        if buffered:
            data += wire.chunk(buffered) if request.chunked else buffered
        if request.complete:
            if request.chunked:
                data += wire.LAST_CHUNK
            self.sent_whole_body = True
        else:
            request.sink = self._body_chunk
        self.connection.begin(self, data)
        self.client.resume_reading("buffer")

    def _body_chunk(self, data: bytes | None) -> None:
        if data is None:
            self.sent_whole_body = True
            if self.request.chunked:
                self.connection.write(wire.LAST_CHUNK)
        else:
            self.connection.write(wire.chunk(data) if self.request.chunked else data)

    # Exchange: called by the upstream connection

    def on_response_head(self, status: int, reason: bytes, headers: wire.Headers, keep_alive: bool) -> None:
        request = self.request
        metrics = self.client.router.metrics
        metrics.response(
            self.route.namespace,
            self.route.name,
            self.side,
            status,
            self.client.router.timer() - request.started,
        )
        self.client.router.balancer.succeeded(self.endpoint.url)
        out, length, upstream_chunked = wire.end_to_end(headers)
        no_body = self._head_only or status in (204, 304)
        self._close_delimited = length is None and not upstream_chunked and not no_body
        if (
            self._streaming
            and status == 200
            and is_event_stream(wire.text(wire.header_value(headers, b"content-type")))
        ):
            self._decoder = ResponseStreamDecoder()
            out = self._stream_headers(out, headers)
            length = None  # the decoded payloads are shorter than the frames
        if length is not None:
            out.append((b"Content-Length", length))
        elif no_body:
            pass
        elif request.version == "1.1":
            self._chunked_out = True
            out.append((b"Transfer-Encoding", b"chunked"))
        else:
            self.keep_alive = False  # an HTTP/1.0 client reads to the end of the connection
        if not self.keep_alive or not request.keep_alive or self.client.server.draining:
            self.keep_alive = False
            out.append((b"Connection", b"close"))
        self.client.write(
            wire.head(b"HTTP/1.1 %d %b" % (status, reason or wire.REASONS.get(status, b"")), out)
        )
        self.responded = True
        if self._head_only:
            # httptools cannot be told this response has no body, so the connection is not reused.
            self.connection.close()
            self._complete(True)

    def on_response_body(self, data: bytes) -> None:
        if self._decoder is not None:
            self._decode(data)
        elif self._chunked_out:
            self.client.write(wire.chunk(data))
        else:
            self.client.write(data)

    def on_response_complete(self) -> None:
        if self._decoder is not None:
            try:
                self._decoder.finish()
            except StreamFailureError as failure:
                self._decoder = None
                self._stream_failed(failure)
                return
        if self._chunked_out:
            self.client.write(wire.LAST_CHUNK)
        self._complete(True)

    def on_upstream_lost(self, error: Exception | None) -> None:
        if self.outcome is not None:
            return
        if not self.responded:
            self.failure = str(error) if error else "connection closed"
            self._complete(False)
            return
        if self._close_delimited and error is None:
            self.on_response_complete()  # a body delimited by the end of the connection
            return
        if self._decoder is not None:
            # A response stream cut short ends as any failure inside it does (an SSE error event).
            self._decoder = None
            reason = f"the response stream broke: {error or 'connection closed'}"
            self._stream_failed(StreamFailureError(TRUNCATED_STREAM, reason))
            return
        # Headers are out, so no status can say so: break the client's response, so it sees a
        # truncated body rather than a short one that looks complete.
        route = self.route
        self.client.router.metrics.error(route.namespace, route.name, self.side, "upstream_broken")
        logger.warning("upstream of %s broke mid-response: %r", route.key, error)
        self.client.abort()
        self._complete(False)

    def pause_client(self) -> None:
        self.client.pause_for_upstream()

    def resume_client(self) -> None:
        self.client.resume_reading("upstream")

    def hold(self) -> None:
        self.client.hold()

    def flush(self) -> None:
        self.client.flush()

    def client_body_broke(self, reason: str) -> None:
        """The client's body cannot be finished: the endpoint's half-sent request is dropped."""
        self.connection.close()
        if self.responded:
            self.client.abort()  # a response is under way: no status can say it any more
        else:
            self.bad_body = reason
        self._complete(False)

    def time_out(self) -> None:
        """The endpoint took longer than the response timeout to send its head."""
        if self.waiting_for_head:
            self.connection.close()
            self.timed_out = True
            self._complete(False)

    # SageMaker response streams

    def _stream_headers(self, out: wire.Headers, headers: wire.Headers) -> wire.Headers:
        model_type = wire.text(wire.header_value(headers, b"x-amzn-sagemaker-content-type"))
        self._content_type = relayed_content_type(model_type)
        kept = [(name, value) for name, value in out if name.lower() != b"content-type"]
        if self._content_type is not None:
            kept.append((b"Content-Type", self._content_type.encode("latin-1")))
        return kept

    def _decode(self, data: bytes) -> None:
        decoder = self._decoder
        if decoder is None:
            return
        try:
            payloads = decoder.feed(data)
        except StreamFailureError as failure:
            for payload in failure.payloads:
                self._write_payload(payload)
            self._decoder = None
            self._stream_failed(failure)
            return
        for payload in payloads:
            self._write_payload(payload)

    def _write_payload(self, payload: bytes) -> None:
        if payload:
            self.client.write(wire.chunk(payload) if self._chunked_out else payload)

    def _stream_failed(self, failure: StreamFailureError) -> None:
        route = self.route
        self.client.router.metrics.error(route.namespace, route.name, self.side, "upstream_stream_error")
        logger.warning("the response stream of %s failed: %s", route.key, failure)
        self.connection.close()
        ending = stream_failure_ending(self._content_type, failure)
        if ending is None:
            self.client.abort()
            self._complete(False)
            return
        self.keep_alive = False
        self._write_payload(ending)
        self.on_response_complete()

    def _complete(self, completed: bool) -> None:
        if self.outcome is None:
            self.outcome = completed
            self.over(self)

    def abandon(self) -> None:
        """The client left: the exchange is over without an answer, and no one is told."""
        if self.outcome is None:
            self.outcome = False


def _nothing(_relay: Relay) -> None:
    pass
