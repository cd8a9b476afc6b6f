"""SPDY/3.1 frames: every frame type survives encode and decode, split anywhere, across many frames
sharing one header compressor; malformed input is refused with SpdyProtocolError, never a crash."""

from __future__ import annotations

import hashlib
import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vk_provider.kit import spdyframes as frames

pytestmark = pytest.mark.unit

stream_ids = st.integers(min_value=1, max_value=frames.MAX_STREAM_ID)
header_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-0123456789", min_size=1, max_size=20)
header_values = st.text(max_size=50).filter(lambda text: "\0" not in text)
headers = st.lists(st.tuples(header_names, header_values), max_size=8).map(tuple)

frame_strategy = st.one_of(
    st.builds(frames.DataFrame, stream_ids, st.binary(max_size=3000), st.booleans()),
    st.builds(
        frames.SynStream,
        stream_ids,
        headers,
        associated_to=st.integers(min_value=0, max_value=frames.MAX_STREAM_ID),
        priority=st.integers(min_value=0, max_value=7),
        fin=st.booleans(),
        unidirectional=st.booleans(),
    ),
    st.builds(frames.SynReply, stream_ids, headers, fin=st.booleans()),
    st.builds(frames.HeadersFrame, stream_ids, headers, fin=st.booleans()),
    st.builds(frames.RstStream, stream_ids, st.integers(min_value=1, max_value=11)),
    st.builds(
        frames.Settings,
        st.lists(
            st.tuples(
                st.integers(min_value=0, max_value=255),
                st.integers(min_value=1, max_value=0xFFFFFF),
                st.integers(min_value=0, max_value=0xFFFFFFFF),
            ),
            max_size=5,
        ).map(tuple),
        clear=st.booleans(),
    ),
    st.builds(frames.Ping, st.integers(min_value=0, max_value=0xFFFFFFFF)),
    st.builds(frames.GoAway, st.integers(min_value=0, max_value=frames.MAX_STREAM_ID), st.integers(0, 2)),
    st.builds(
        frames.WindowUpdate, st.integers(0, frames.MAX_STREAM_ID), st.integers(1, frames.MAX_STREAM_ID)
    ),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(frame_strategy, min_size=1, max_size=12), st.data())
def test_frames_survive_encoding_in_any_split(sequence: list[frames.Frame], data: st.DataObject) -> None:
    encoder, decoder = frames.FrameEncoder(), frames.FrameDecoder()
    wire = b"".join(encoder.encode(frame) for frame in sequence)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=6)))
    decoded: list[frames.Frame] = []
    for start, end in zip([0, *cuts], [*cuts, len(wire)], strict=True):
        decoded.extend(decoder.feed(wire[start:end]))
    assert decoded == sequence


def test_the_dictionary_is_the_specifications() -> None:
    # The SHA-256 of the 1423-byte dictionary of SPDY/3 section 2.6.10.1 (as Go's spdy package holds it).
    assert len(frames.DICTIONARY) == 1423
    assert hashlib.sha256(frames.DICTIONARY).hexdigest() == (
        "51d27341373f923f3cd88e1eb7162aeaa3723d7585ff2399201dc06498407f02"
    )


def test_header_blocks_use_the_dictionary_and_one_stream_per_direction() -> None:
    encoder = frames.FrameEncoder()
    first = encoder.encode(frames.SynStream(1, (("streamtype", "error"),)))
    second = encoder.encode(frames.SynStream(3, (("streamtype", "error"),)))
    block = first[18:]
    # zlib header with FDICT set, and the dictionary's Adler-32 right after it.
    assert block[1] & 0x20
    assert struct.unpack(">I", block[2:6])[0] == zlib.adler32(frames.DICTIONARY)
    # The second block continues the first's compression stream, so repeated headers cost little.
    assert len(second) < len(first)
    decoder = frames.FrameDecoder()
    assert [frame.stream_id for frame in decoder.feed(first + second)] == [1, 3]  # type: ignore[union-attr]


def test_header_values_split_at_nul_and_names_are_case_insensitive() -> None:
    pairs = frames.make_headers({"X-Stream-Protocol-Version": "v4.channel.k8s.io\0v5.channel.k8s.io"})
    assert frames.header_values(pairs, "x-stream-protocol-version") == [
        "v4.channel.k8s.io",
        "v5.channel.k8s.io",
    ]
    assert frames.header(pairs, "X-STREAM-PROTOCOL-VERSION") == "v4.channel.k8s.io"
    assert frames.header(pairs, "missing") is None


def test_unknown_control_frames_are_skipped() -> None:
    unknown = struct.pack(">HHI", 0x8003, 0x00FF, 4) + b"abcd"
    ping = frames.FrameEncoder().encode(frames.Ping(7))
    assert list(frames.FrameDecoder().feed(unknown + ping)) == [frames.Ping(7)]


@pytest.mark.parametrize(
    ("wire", "complaint"),
    [
        (struct.pack(">HHI", 0x8002, frames.PING, 4) + b"\0\0\0\1", "version 2"),
        (struct.pack(">HHI", 0x8003, frames.PING, 2) + b"\0\1", "truncated"),
        (struct.pack(">HHI", 0x8003, frames.SYN_REPLY, 8) + b"\0\0\0\1garb", "decompress"),
        (struct.pack(">HHI", 0x8003, frames.SETTINGS, 4) + b"\0\0\0\5", "shorter"),
    ],
)
def test_malformed_frames_are_protocol_errors(wire: bytes, complaint: str) -> None:
    with pytest.raises(frames.SpdyProtocolError, match=complaint):
        list(frames.FrameDecoder().feed(wire))


def test_a_frame_over_the_limit_is_refused_before_it_is_buffered() -> None:
    decoder = frames.FrameDecoder(max_frame_length=1024)
    with pytest.raises(frames.SpdyProtocolError, match="exceeds"):
        list(decoder.feed(struct.pack(">II", 1, 4096)))


@pytest.mark.parametrize(
    "frame",
    [
        frames.DataFrame(0, b""),
        frames.DataFrame(1 << 31, b""),
        frames.WindowUpdate(1, 0),
        frames.RstStream(0, frames.CANCEL),
    ],
)
def test_the_encoder_refuses_frames_that_cannot_exist(frame: frames.Frame) -> None:
    with pytest.raises(ValueError, match=r"range|grows"):
        frames.FrameEncoder().encode(frame)
