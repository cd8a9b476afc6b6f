"""HTTP/1.1 as bytes: the header rules of a proxy and the few messages the router writes itself.

The data path (`client`, `relay`, `upstream`) keeps headers as the parser gave them, a list of (name, value)
byte pairs in arrival order, and writes heads by joining bytes: no header objects, no str round
trip. Names are compared lower-cased; values are passed on untouched.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

Headers = list[tuple[bytes, bytes]]

HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)
"""Headers about one connection (RFC 9110 7.6.1): each hop sets its own, a proxy never forwards them."""

FRAMING = frozenset({b"content-length", b"transfer-encoding"})
"""How a body is delimited: set by whoever writes the message, from how the body is sent on."""

LAST_CHUNK = b"0\r\n\r\n"

REASONS = {
    200: b"OK",
    400: b"Bad Request",
    404: b"Not Found",
    408: b"Request Timeout",
    413: b"Content Too Large",
    414: b"URI Too Long",
    431: b"Request Header Fields Too Large",
    500: b"Internal Server Error",
    501: b"Not Implemented",
    502: b"Bad Gateway",
    503: b"Service Unavailable",
    504: b"Gateway Timeout",
}


NOT_FORWARDED = HOP_BY_HOP | FRAMING


class EndToEnd(NamedTuple):
    """A message's headers as a proxy passes them on, and how its body was framed."""

    headers: Headers
    """Without hop-by-hop headers, those the Connection header names, and the framing."""
    content_length: bytes | None
    chunked: bool


def end_to_end(headers: Headers) -> EndToEnd:
    """Split `headers` in one pass (it runs twice per proxied request, so it is kept to one loop)."""
    kept: Headers = []
    content_length: bytes | None = None
    chunked = False
    named: set[bytes] | None = None
    for name, value in headers:
        lowered = name.lower()
        if lowered in NOT_FORWARDED:
            if lowered == b"content-length":
                content_length = value
            elif lowered == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif lowered == b"connection":
                named = (named or set()) | {token.strip().lower() for token in value.split(b",")}
            continue
        kept.append((name, value))
    if named:
        kept = [(name, value) for name, value in kept if name.lower() not in named]
    if chunked:
        content_length = None  # RFC 9112 6.3: Transfer-Encoding overrides Content-Length
    return EndToEnd(kept, content_length, chunked)


def head(start_line: bytes, headers: Iterable[tuple[bytes, bytes]]) -> bytes:
    """A message head: the start line, the headers, the blank line."""
    return b"".join([start_line, b"\r\n", *[b"%b: %b\r\n" % header for header in headers], b"\r\n"])


def chunk(data: bytes) -> bytes:
    """`data` as one chunk of a chunked body (never empty: an empty chunk ends the body)."""
    return b"%x\r\n%b\r\n" % (len(data), data)


def plain_response(status: int, message: str, *, close: bool = False, head_only: bool = False) -> bytes:
    """A whole text/plain response the router answers itself (404, 502, ...)."""
    body = (message + "\n").encode()
    headers: Headers = [
        (b"Content-Type", b"text/plain; charset=utf-8"),
        (b"Content-Length", b"%d" % len(body)),
    ]
    if close:
        headers.append((b"Connection", b"close"))
    start = b"HTTP/1.1 %d %b" % (status, REASONS.get(status, b"Unknown"))
    return head(start, headers) + (b"" if head_only else body)


def header_value(headers: Headers, lowered_name: bytes) -> bytes | None:
    """The first value of a header (name given lower-case), or None."""
    for name, value in headers:
        if name.lower() == lowered_name:
            return value
    return None


def text(value: bytes | None) -> str | None:
    """A header value as str (latin-1, as HTTP/1.1 has it), or None."""
    return value.decode("latin-1") if value is not None else None
