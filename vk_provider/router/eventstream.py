"""Token streams from SageMaker endpoints: which requests want one, and unwrapping what comes back.

A SageMaker endpoint answers `POST .../endpoints/<name>/invocations` (InvokeEndpoint) only once the
model has finished, so a client that asked for a token stream would get the whole answer at once.
Streaming is a different operation, InvokeEndpointWithResponseStream, at `.../invocations-response-
stream` (same signing, same body). The router switches to it when the client asks for a stream
(`wants_stream`: `Accept: text/event-stream`, or a JSON body with `"stream": true`, the OpenAI-style
convention the model servers follow) and rewrites the URL (`stream_url`).

Its answer is not the model's bytes but AWS's binary event-stream framing, `application/vnd.amazon.
eventstream`: a sequence of frames, each a prelude (total length, headers length, CRC32 of both),
typed headers (`:message-type`, `:event-type`, ...), a payload and a CRC32 of the whole frame. The
model's output arrives as `PayloadPart` events whose payload is the next slice of the model's bytes
(its `Bytes` member), cut wherever the container flushed. `ResponseStreamDecoder` takes the framing
off, so the client receives the model's own stream (an SSE stream, say) as if it had asked the
container directly, with the model's content type from `X-Amzn-SageMaker-Content-Type`
(`relayed_content_type`). The frames are parsed by botocore's `EventStreamBuffer`; only the meaning of
the messages is decided here.

The HTTP status (200) and headers were sent before the model produced anything, so a failure while
streaming comes as a frame too: an `exception` message (`:exception-type` `ModelStreamError`, with an
`ErrorCode` such as `ModelInvocationTimeExceeded` or `StreamBroken`, or `InternalStreamFailure`; a JSON
payload with the `Message`) or a generic `error` message (`:error-code`, `:error-message`). The stream
ends after it. A frame whose CRC does not match, or a body that ends inside a frame, is a failure
as well: continuing would hand the client bytes nobody vouches for. Every failure raises
`StreamFailureError`, carrying the payloads that preceded it in the same `feed`, so the client gets
everything the model produced before the failure. The client's response has already begun too, so
`stream_failure_ending` ends it the way its protocol can express: an SSE stream gets a final
`event: error`; any other body can only be cut short (the caller aborts the connection), so that the
client sees a truncated response rather than a complete-looking short one.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Iterator, Mapping
from typing import cast
from urllib.parse import urlsplit, urlunsplit

from botocore.eventstream import EventStreamBuffer, EventStreamMessage, MessagePrelude, ParserError

EVENT_STREAM_MEDIA_TYPE = "application/vnd.amazon.eventstream"
"""The content type of an InvokeEndpointWithResponseStream answer (the framing, not the model's)."""

SSE_MEDIA_TYPE = "text/event-stream"

MODEL_CONTENT_TYPE_HEADER = "X-Amzn-SageMaker-Content-Type"
"""Where the stream's answer gives the model's own content type."""

JSON_SNIFF_LIMIT = 1024 * 1024
"""Bodies larger than this are not parsed for `"stream": true`.

The parse runs on the event loop and stalls every other request while it does: about 1.5 ms per MiB of
text-heavy JSON (chat messages) and 15 ms per MiB of number-heavy JSON (embedding inputs). 1 MiB holds
a long chat (some 250k tokens of text) and caps the stall at a few milliseconds. A larger body that
asks for a stream only in its JSON (base64 images) gets the whole answer at once, as before streaming
existed; `Accept: text/event-stream` still streams it.
"""

INVOCATION_PATH = re.compile(r"/endpoints/[^/]+/invocations\Z")
"""The end of an invocation URL's path (a custom runtime URL may put a prefix before it)."""

STREAM_PATH_SUFFIX = "-response-stream"

PAYLOAD_PART = "PayloadPart"
"""The event carrying a slice of the model's answer in its payload."""

INVALID_STREAM = "InvalidEventStream"
"""The code of a failure the router found in the framing itself (a CRC mismatch, a bad header)."""

TRUNCATED_STREAM = "TruncatedEventStream"
"""The code of a stream whose body ended inside a frame."""

MESSAGE_LIMIT = 1024
"""Characters of an error's message kept: it goes into a client's response and the logs."""

_CORRUPTION = (ParserError, struct.error, KeyError, IndexError, UnicodeDecodeError)
"""What botocore's parser raises on bytes that are not event-stream frames: its own checks (CRC,
lengths, duplicate headers), and, for garbage whose CRC happens to pass, short reads, unknown header
types and non-UTF-8 header names."""

_MEDIA_TYPE = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+/[!#$%&'*+.^_`|~0-9A-Za-z-]+\s*(;.*)?\Z")
"""A media type (RFC 9110 tokens), parameters allowed."""


class StreamFailureError(Exception):
    """The response stream failed after it had begun: an error event, or framing that cannot be trusted.

    `payloads` are the model's bytes that arrived before the failure in the same `feed`, in order;
    send them to the client before ending its response.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        error_code: str | None = None,
        payloads: tuple[bytes, ...] = (),
    ) -> None:
        detail = f" ({error_code})" if error_code else ""
        super().__init__(f"{code}{detail}: {message}")
        self.code = code
        """`ModelStreamError`, `InternalStreamFailure`, an `error` message's `:error-code`, or the
        router's own `InvalidEventStream` / `TruncatedEventStream`."""
        self.message = message
        self.error_code = error_code
        """A `ModelStreamError`'s own `ErrorCode` (`ModelInvocationTimeExceeded`, `StreamBroken`)."""
        self.payloads = payloads

    def with_payloads(self, payloads: tuple[bytes, ...]) -> StreamFailureError:
        return StreamFailureError(self.code, self.message, error_code=self.error_code, payloads=payloads)


def wants_stream(accept: str | None, content_type: str | None, body: bytes) -> bool:
    """Whether the request asks for its answer as a stream.

    Yes when `Accept` names `text/event-stream` (not with `q=0`; `*/*` does not count), or when the
    body is a JSON object with `"stream": true` (the boolean: the string "true" is no) and the content
    type is JSON (`application/json`, `...+json`) or absent. Bad JSON, non-JSON and bodies over
    `JSON_SNIFF_LIMIT` are simply not asking.
    """
    if accept is not None and _accepts_event_stream(accept):
        return True
    return _json_body_asks_for_stream(content_type, body)


def _accepts_event_stream(accept: str) -> bool:
    for media_range in accept.split(","):
        media_type, *parameters = media_range.split(";")
        if media_type.strip().lower() == SSE_MEDIA_TYPE and not _refused(parameters):
            return True
    return False


def _refused(parameters: list[str]) -> bool:
    """Whether a media range's parameters give it quality 0, i.e. "not this"."""
    for parameter in parameters:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "q":
            try:
                return float(value.strip()) == 0
            except ValueError:
                return False
    return False


def _json_body_asks_for_stream(content_type: str | None, body: bytes) -> bool:
    media_type = _media_type(content_type)
    if media_type is not None and not _is_json(media_type):
        return False
    # Cheap filters first: most bodies are not parsed at all. (JSON over HTTP is UTF-8, so the key's
    # bytes are there unless it was written with \u escapes, which no client does.)
    if len(body) > JSON_SNIFF_LIMIT or b'"stream"' not in body:
        return False
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested too deep to parse
        return False
    return isinstance(document, dict) and document.get("stream") is True


def _media_type(value: str | None) -> str | None:
    """`type/subtype` of a Content-Type value, lowercased and without parameters; None when absent."""
    if value is None:
        return None
    media_type = value.split(";", 1)[0].strip().lower()
    return media_type or None


def _is_json(media_type: str) -> bool:
    subtype = media_type.partition("/")[2]
    return subtype == "json" or subtype.endswith("+json")


def stream_url(url: str) -> str:
    """The InvokeEndpointWithResponseStream URL for an invocation URL, query string kept.

    `https://runtime.sagemaker.<region>.amazonaws.com/endpoints/<name>/invocations` becomes
    `.../endpoints/<name>/invocations-response-stream`. ValueError for any other URL.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or not INVOCATION_PATH.search(parts.path):
        raise ValueError(f"not a SageMaker invocation URL (…/endpoints/<name>/invocations): {url!r}")
    return urlunsplit(parts._replace(path=parts.path + STREAM_PATH_SUFFIX))


def relayed_content_type(header_value: str | None) -> str | None:
    """The Content-Type the client should see, given the stream answer's `X-Amzn-SageMaker-Content-Type`.

    That header is the model's own content type (e.g. `text/event-stream`), which is what the client
    receives once the framing is off; the answer's own Content-Type is the framing's and must not be
    relayed. None (send no Content-Type) when the model gave none or something that is not a media
    type: better no claim than a wrong one.
    """
    if header_value is None:
        return None
    value = header_value.strip()
    return value if _MEDIA_TYPE.match(value) else None


def is_event_stream(content_type: str | None) -> bool:
    """Whether an answer is event-stream framed (a stream request's error answers are plain JSON)."""
    return _media_type(content_type) == EVENT_STREAM_MEDIA_TYPE


def stream_failure_ending(content_type: str | None, failure: StreamFailureError) -> bytes | None:
    """The bytes that end the client's response after `failure`, or None: abort the connection.

    `content_type` is what the client's response declared (`relayed_content_type`). An SSE stream can
    say what happened: a final `event: error` whose data is `{"error": {"code", "message"[,
    "error_code"]}}` (the shape OpenAI-style clients raise from), after which the response ends
    normally. It starts with two blank lines, which end whatever event the failure may have cut short
    (harmless after a complete one), so the error event parses on its own. Any other body has no way
    to say it; it must end without its proper end (no final chunk), so the client sees a truncated
    response instead of a complete-looking short one.
    """
    if _media_type(content_type) != SSE_MEDIA_TYPE:
        return None
    error: dict[str, str] = {"code": failure.code, "message": failure.message}
    if failure.error_code:
        error["error_code"] = failure.error_code
    # json.dumps escapes newlines inside strings, so the data stays on one line as SSE needs.
    return b"\n\nevent: error\ndata: " + json.dumps({"error": error}).encode() + b"\n\n"


class ResponseStreamDecoder:
    """The model's bytes from an InvokeEndpointWithResponseStream body, fed as it arrives.

    `feed` returns the `PayloadPart` payloads completed so far (empty ones are dropped: an empty write
    would end a chunked response). Other events are ignored, as botocore ignores events its model does
    not know. An error event or corrupt framing raises StreamFailureError carrying the payloads that
    came before it in that `feed`; the stream is over then, and every later `feed` or `finish` raises
    it again (without payloads). Call `finish` when the body ends: a body that ends inside a frame was
    cut short.
    """

    def __init__(self) -> None:
        self._buffer = EventStreamBuffer()
        self._unparsed = 0
        """Bytes fed that no complete frame has consumed yet."""
        self._failure: StreamFailureError | None = None

    def feed(self, data: bytes) -> list[bytes]:
        """The payloads that `data` completes, in order."""
        self._raise_if_failed()
        self._buffer.add_data(data)
        self._unparsed += len(data)
        payloads: list[bytes] = []
        try:
            for message in self._complete_messages():
                payload = _payload_of(message)
                if payload:
                    payloads.append(payload)
        except StreamFailureError as failure:
            self._failure = failure
            raise failure.with_payloads(tuple(payloads)) from None
        return payloads

    def finish(self) -> None:
        """The body has ended: StreamFailureError if it ended inside a frame, or the stream had failed."""
        self._raise_if_failed()
        if self._unparsed:
            self._failure = StreamFailureError(
                TRUNCATED_STREAM, f"the stream ended inside a frame ({self._unparsed} bytes of it arrived)"
            )
            raise self._failure

    def _raise_if_failed(self) -> None:
        if self._failure is not None:
            raise self._failure

    def _complete_messages(self) -> Iterator[EventStreamMessage]:
        while True:
            try:
                message = next(self._buffer)
            except StopIteration:
                return
            except _CORRUPTION as error:
                raise StreamFailureError(INVALID_STREAM, f"corrupt event-stream frame: {error}") from None
            # botocore's stubs type the prelude as int; it is the parsed MessagePrelude.
            self._unparsed -= cast(MessagePrelude, message.prelude).total_length
            yield message


def _payload_of(message: EventStreamMessage) -> bytes | None:
    """A PayloadPart's bytes; None for other events; StreamFailureError for error messages."""
    # botocore's stubs type the headers as int; they are the parsed name -> value mapping.
    headers = cast(Mapping[str, object], message.headers)
    message_type = _text(headers, ":message-type")
    if message_type == "exception":
        raise _exception_failure(headers, message.payload)
    if message_type == "error":
        code = _text(headers, ":error-code") or "UnknownError"
        raise StreamFailureError(code, _clipped(_text(headers, ":error-message") or "no message"))
    if message_type == "event" and _text(headers, ":event-type") == PAYLOAD_PART:
        return message.payload
    return None


def _exception_failure(headers: Mapping[str, object], payload: bytes) -> StreamFailureError:
    """A modelled exception event: its type names it; its JSON payload has `Message` (and `ErrorCode`)."""
    code = _text(headers, ":exception-type") or "UnknownException"
    try:
        body = json.loads(payload)
    except (ValueError, RecursionError):
        body = None
    if not isinstance(body, dict):
        text = payload.decode("utf-8", errors="replace").strip()
        return StreamFailureError(code, _clipped(text or "no message"))
    message = body.get("Message", body.get("message"))
    error_code = body.get("ErrorCode")
    return StreamFailureError(
        code,
        _clipped(message if isinstance(message, str) and message else "no message"),
        error_code=error_code if isinstance(error_code, str) and error_code else None,
    )


def _text(headers: Mapping[str, object], name: str) -> str | None:
    value = headers.get(name)
    return value if isinstance(value, str) else None


def _clipped(message: str) -> str:
    return message if len(message) <= MESSAGE_LIMIT else message[:MESSAGE_LIMIT] + "…"
