"""AWS event-stream frames for tests (botocore only decodes), and an SSE parser to read what clients get.

The layout: a prelude (total length, headers length, CRC32 of both), headers, payload, CRC32 of it all.
`test_eventstream` checks `frame` against a frame from AWS's own documentation of the format.
"""

from __future__ import annotations

import json
import struct
import zlib

STRING_HEADER = 7
"""The header value type of a UTF-8 string."""


def frame(headers: dict[str, str], payload: bytes = b"") -> bytes:
    encoded_headers = b"".join(header(name, value) for name, value in headers.items())
    total_length = 12 + len(encoded_headers) + len(payload) + 4
    prelude = struct.pack("!II", total_length, len(encoded_headers))
    prelude += struct.pack("!I", zlib.crc32(prelude))
    message = prelude + encoded_headers + payload
    return message + struct.pack("!I", zlib.crc32(message))


def header(name: str, value: str) -> bytes:
    name_bytes, value_bytes = name.encode(), value.encode()
    return (
        struct.pack("!B", len(name_bytes))
        + name_bytes
        + struct.pack("!BH", STRING_HEADER, len(value_bytes))
        + value_bytes
    )


def part(payload: bytes) -> bytes:
    """A `PayloadPart` event: the next slice of the model's answer."""
    return frame(
        {":message-type": "event", ":event-type": "PayloadPart", ":content-type": "application/octet-stream"},
        payload,
    )


def exception(exception_type: str, body: dict[str, str] | bytes) -> bytes:
    """A modelled exception event (`ModelStreamError`, `InternalStreamFailure`) with a JSON payload."""
    payload = body if isinstance(body, bytes) else json.dumps(body).encode()
    return frame(
        {
            ":message-type": "exception",
            ":exception-type": exception_type,
            ":content-type": "application/json",
        },
        payload,
    )


def model_stream_error(error_code: str = "ModelInvocationTimeExceeded") -> bytes:
    return exception("ModelStreamError", {"Message": "the model took too long", "ErrorCode": error_code})


def sse_events(stream: bytes) -> list[tuple[str, str]]:
    """(event type, data) of each event dispatched, as an SSE client parses them (WHATWG rules)."""
    events: list[tuple[str, str]] = []
    event_type = ""
    data: list[str] = []
    for line in stream.decode().split("\n"):
        if line == "":
            if data:
                events.append((event_type or "message", "\n".join(data)))
            event_type, data = "", []
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            event_type = value
        elif name == "data":
            data.append(value)
    return events
