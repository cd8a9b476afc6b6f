"""SPDY/3.1 frames: their byte layout, header-block compression, and an incremental decoder.

Used by the kubelet API (a server of exec, attach and port-forward) and by providers that reach a
remote pod's port through a SPDY tunnel (the `kubernetes` provider).

Layout (draft-mbelshe-httpbis-spdy-00, section 2.2): a control frame starts with the control bit,
the version (3) and the type; a data frame with a 31-bit stream id. Both then carry 8 bits of flags and
a 24-bit length. Header blocks (SYN_STREAM, SYN_REPLY, HEADERS) are a count and length-prefixed name
and value strings, compressed by one zlib stream per direction for the whole connection, primed with
the dictionary of section 2.6.10.1 and sync-flushed after every block.
"""

from __future__ import annotations

import dataclasses
import struct
import zlib
from collections.abc import Iterator, Mapping, Sequence

VERSION = 3
MAX_DATA_LENGTH = (1 << 24) - 1
MAX_STREAM_ID = (1 << 31) - 1
DEFAULT_WINDOW = 64 * 1024
"""The initial flow-control window of every stream and of the connection (SPDY/3.1)."""

FLAG_FIN = 0x01
FLAG_UNIDIRECTIONAL = 0x02

SYN_STREAM = 1
SYN_REPLY = 2
RST_STREAM = 3
SETTINGS = 4
PING = 6
GOAWAY = 7
HEADERS = 8
WINDOW_UPDATE = 9

# RST_STREAM status codes
PROTOCOL_ERROR = 1
INVALID_STREAM = 2
REFUSED_STREAM = 3
CANCEL = 5
INTERNAL_ERROR = 6
FLOW_CONTROL_ERROR = 7
STREAM_IN_USE = 8
STREAM_ALREADY_CLOSED = 9

# GOAWAY status codes
GOAWAY_OK = 0
GOAWAY_PROTOCOL_ERROR = 1
GOAWAY_INTERNAL_ERROR = 2

SETTINGS_INITIAL_WINDOW_SIZE = 7

_WORD_LIST = (
    "options head post put delete trace accept accept-charset accept-encoding accept-language "
    "accept-ranges age allow authorization cache-control connection content-base content-encoding "
    "content-language content-length content-location content-md5 content-range content-type date "
    "etag expect expires from host if-match if-modified-since if-none-match if-range "
    "if-unmodified-since last-modified location max-forwards pragma proxy-authenticate "
    "proxy-authorization range referer retry-after server te trailer transfer-encoding upgrade "
    "user-agent vary via warning www-authenticate method get status"
)
_WORDS = [
    *_WORD_LIST.split(),
    "200 OK",
    "version",
    "HTTP/1.1",
    "url",
    "public",
    "set-cookie",
    "keep-alive",
    "origin",
]
_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized"
    "403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service Unavailable"
    "Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT"
    "chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,"
    "text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)
DICTIONARY = b"".join(struct.pack(">I", len(word)) + word.encode() for word in _WORDS) + _TAIL.encode()
"""The zlib dictionary of SPDY/3 header blocks (both ends must prime their zlib streams with it)."""


class SpdyProtocolError(Exception):
    """The peer sent something SPDY/3.1 does not allow; the connection cannot go on."""


Headers = tuple[tuple[str, str], ...]
"""Header names are lower case (SPDY requires it); several values of one name are NUL-separated."""


@dataclasses.dataclass(frozen=True, slots=True)
class DataFrame:
    stream_id: int
    data: bytes
    fin: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class SynStream:
    stream_id: int
    headers: Headers
    associated_to: int = 0
    priority: int = 0
    fin: bool = False
    unidirectional: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class _HeaderBlockFrame:
    """A stream id and a header block: all that SYN_REPLY and HEADERS carry (sections 2.6.2 and 2.6.7),
    so the two share their fields as they share their layout on the wire."""

    stream_id: int
    headers: Headers
    fin: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class SynReply(_HeaderBlockFrame):
    """The recipient's acceptance of a SYN_STREAM."""


@dataclasses.dataclass(frozen=True, slots=True)
class HeadersFrame(_HeaderBlockFrame):
    """More headers on a stream already open."""


@dataclasses.dataclass(frozen=True, slots=True)
class RstStream:
    stream_id: int
    status: int


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    entries: tuple[tuple[int, int, int], ...]
    """(flags, id, value) triples."""
    clear: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class Ping:
    ping_id: int


@dataclasses.dataclass(frozen=True, slots=True)
class GoAway:
    last_good_stream_id: int
    status: int = GOAWAY_OK


@dataclasses.dataclass(frozen=True, slots=True)
class WindowUpdate:
    stream_id: int
    delta: int


Frame = DataFrame | SynStream | SynReply | HeadersFrame | RstStream | Settings | Ping | GoAway | WindowUpdate


def header_values(headers: Headers, name: str) -> list[str]:
    """Every value of `name` (case-insensitive), split at NULs."""
    wanted = name.lower()
    return [part for key, value in headers if key == wanted for part in value.split("\0")]


def header(headers: Headers, name: str) -> str | None:
    values = header_values(headers, name)
    return values[0] if values else None


def make_headers(pairs: Mapping[str, str] | Sequence[tuple[str, str]]) -> Headers:
    items = pairs.items() if isinstance(pairs, Mapping) else pairs
    return tuple((name.lower(), value) for name, value in items)


class FrameEncoder:
    """Encodes one direction of a connection (it owns that direction's header compressor)."""

    def __init__(self) -> None:
        self._compressor = zlib.compressobj(
            zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, 15, 8, zdict=DICTIONARY
        )

    def encode(self, frame: Frame) -> bytes:  # noqa: PLR0911 (one return per frame type)
        if isinstance(frame, DataFrame):
            _check_stream_id(frame.stream_id, allow_zero=False)
            if len(frame.data) > MAX_DATA_LENGTH:
                raise ValueError(f"a data frame holds at most {MAX_DATA_LENGTH} bytes")
            flags = FLAG_FIN if frame.fin else 0
            return struct.pack(">II", frame.stream_id, (flags << 24) | len(frame.data)) + frame.data
        if isinstance(frame, SynStream):
            _check_stream_id(frame.stream_id, allow_zero=False)
            _check_stream_id(frame.associated_to, allow_zero=True)
            flags = (FLAG_FIN if frame.fin else 0) | (FLAG_UNIDIRECTIONAL if frame.unidirectional else 0)
            body = struct.pack(">IIBB", frame.stream_id, frame.associated_to, (frame.priority & 7) << 5, 0)
            return _control(SYN_STREAM, flags, body + self._header_block(frame.headers))
        if isinstance(frame, SynReply | HeadersFrame):
            _check_stream_id(frame.stream_id, allow_zero=False)
            kind = SYN_REPLY if isinstance(frame, SynReply) else HEADERS
            body = struct.pack(">I", frame.stream_id) + self._header_block(frame.headers)
            return _control(kind, FLAG_FIN if frame.fin else 0, body)
        if isinstance(frame, RstStream):
            _check_stream_id(frame.stream_id, allow_zero=False)
            return _control(RST_STREAM, 0, struct.pack(">II", frame.stream_id, frame.status))
        if isinstance(frame, Settings):
            body = struct.pack(">I", len(frame.entries)) + b"".join(
                struct.pack(">II", (flags << 24) | key, value) for flags, key, value in frame.entries
            )
            return _control(SETTINGS, 1 if frame.clear else 0, body)
        if isinstance(frame, Ping):
            return _control(PING, 0, struct.pack(">I", frame.ping_id))
        if isinstance(frame, GoAway):
            _check_stream_id(frame.last_good_stream_id, allow_zero=True)
            return _control(GOAWAY, 0, struct.pack(">II", frame.last_good_stream_id, frame.status))
        _check_stream_id(frame.stream_id, allow_zero=True)
        if not 1 <= frame.delta <= MAX_STREAM_ID:
            raise ValueError("a window update grows the window by 1 to 2^31-1 bytes")
        return _control(WINDOW_UPDATE, 0, struct.pack(">II", frame.stream_id, frame.delta))

    def _header_block(self, headers: Headers) -> bytes:
        parts = [struct.pack(">I", len(headers))]
        for name, value in headers:
            for text in (name.lower(), value):
                raw = text.encode()
                parts.append(struct.pack(">I", len(raw)) + raw)
        return self._compressor.compress(b"".join(parts)) + self._compressor.flush(zlib.Z_SYNC_FLUSH)


class FrameDecoder:
    """Decodes one direction of a connection: feed bytes as they come, get whole frames back."""

    def __init__(self, *, max_frame_length: int = MAX_DATA_LENGTH) -> None:
        self._buffer = bytearray()
        self._decompressor = zlib.decompressobj(zdict=DICTIONARY)
        self._max_frame_length = max_frame_length

    def feed(self, data: bytes) -> Iterator[Frame]:
        """Yield every frame completed by `data`; raises SpdyProtocolError on a malformed one."""
        self._buffer += data
        while len(self._buffer) >= 8:
            length = int.from_bytes(self._buffer[5:8], "big")
            if length > self._max_frame_length:
                raise SpdyProtocolError(f"a frame of {length} bytes exceeds the limit")
            if len(self._buffer) < 8 + length:
                return
            head = bytes(self._buffer[:8])
            payload = bytes(self._buffer[8 : 8 + length])
            del self._buffer[: 8 + length]
            frame = self._decode(head, payload)
            if frame is not None:
                yield frame

    def _decode(self, head: bytes, payload: bytes) -> Frame | None:
        first, flags = struct.unpack(">IB", head[:5])
        if not first & 0x80000000:
            return DataFrame(first & MAX_STREAM_ID, payload, fin=bool(flags & FLAG_FIN))
        version, kind = (first >> 16) & 0x7FFF, first & 0xFFFF
        if version != VERSION:
            raise SpdyProtocolError(f"SPDY version {version} is not supported (only {VERSION})")
        try:
            return self._control(kind, flags, payload)
        except (struct.error, IndexError) as error:
            raise SpdyProtocolError(f"a truncated control frame of type {kind}") from error

    def _control(self, kind: int, flags: int, payload: bytes) -> Frame | None:  # noqa: PLR0911 (one per type)
        fin = bool(flags & FLAG_FIN)
        if kind == SYN_STREAM:
            stream_id, associated, priority = struct.unpack(">IIB", payload[:9])
            return SynStream(
                stream_id & MAX_STREAM_ID,
                self._headers(payload[10:]),
                associated_to=associated & MAX_STREAM_ID,
                priority=priority >> 5,
                fin=fin,
                unidirectional=bool(flags & FLAG_UNIDIRECTIONAL),
            )
        if kind in (SYN_REPLY, HEADERS):
            (stream_id,) = struct.unpack(">I", payload[:4])
            headers = self._headers(payload[4:])
            if kind == SYN_REPLY:
                return SynReply(stream_id & MAX_STREAM_ID, headers, fin=fin)
            return HeadersFrame(stream_id & MAX_STREAM_ID, headers, fin=fin)
        if kind == RST_STREAM:
            stream_id, status = struct.unpack(">II", payload[:8])
            return RstStream(stream_id & MAX_STREAM_ID, status)
        if kind == SETTINGS:
            (count,) = struct.unpack(">I", payload[:4])
            if len(payload) < 4 + 8 * count:
                raise SpdyProtocolError("a SETTINGS frame shorter than its entries")
            entries = []
            for index in range(count):
                word, value = struct.unpack(">II", payload[4 + 8 * index : 12 + 8 * index])
                entries.append((word >> 24, word & 0xFFFFFF, value))
            return Settings(tuple(entries), clear=bool(flags & 1))
        if kind == PING:
            (ping_id,) = struct.unpack(">I", payload[:4])
            return Ping(ping_id)
        if kind == GOAWAY:
            last, status = struct.unpack(">II", payload[:8])
            return GoAway(last & MAX_STREAM_ID, status)
        if kind == WINDOW_UPDATE:
            stream_id, delta = struct.unpack(">II", payload[:8])
            return WindowUpdate(stream_id & MAX_STREAM_ID, delta & MAX_STREAM_ID)
        return None  # unknown control frames are ignored, as the specification asks

    def _headers(self, block: bytes) -> Headers:
        try:
            raw = self._decompressor.decompress(block)
        except zlib.error as error:
            raise SpdyProtocolError(f"a header block does not decompress: {error}") from error
        try:
            (count,) = struct.unpack(">I", raw[:4])
            offset = 4
            pairs: list[tuple[str, str]] = []
            for _ in range(count):
                texts = []
                for _part in range(2):
                    (size,) = struct.unpack(">I", raw[offset : offset + 4])
                    offset += 4
                    if offset + size > len(raw):
                        raise SpdyProtocolError("a header string runs past its block")
                    texts.append(raw[offset : offset + size].decode())
                    offset += size
                pairs.append((texts[0].lower(), texts[1]))
        except (struct.error, UnicodeDecodeError) as error:
            raise SpdyProtocolError(f"a malformed header block: {error}") from error
        return tuple(pairs)


def _control(kind: int, flags: int, body: bytes) -> bytes:
    if len(body) > MAX_DATA_LENGTH:
        raise ValueError("a control frame's body is too long")
    return struct.pack(">HHI", 0x8000 | VERSION, kind, (flags << 24) | len(body)) + body


def _check_stream_id(stream_id: int, *, allow_zero: bool) -> None:
    if not (0 if allow_zero else 1) <= stream_id <= MAX_STREAM_ID:
        raise ValueError(f"stream id {stream_id} is out of range")
