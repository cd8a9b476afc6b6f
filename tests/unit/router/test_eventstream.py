"""Streaming through SageMaker: which requests want a stream, and unwrapping InvokeEndpointWithResponseStream.

The frames are made by a small test-side encoder (`eventframes`; botocore only decodes), following the
event-stream layout: prelude (total length, headers length, CRC32 of both), headers, payload, CRC32 of
it all. It is checked against a frame from AWS's own documentation of the format.
"""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vk_provider.router.eventstream import (
    INVALID_STREAM,
    TRUNCATED_STREAM,
    ResponseStreamDecoder,
    StreamFailureError,
    is_event_stream,
    relayed_content_type,
    stream_failure_ending,
    stream_url,
    wants_stream,
)

from .eventframes import exception, frame, model_stream_error, part, sse_events

# --- The test-side encoder ------------------------------------------------------------------------


def test_the_test_encoder_writes_the_frames_of_the_format_description() -> None:
    # AWS's event-stream documentation (Transcribe's, the format is shared): `{"foo": "bar"}`, no headers.
    prelude = bytes([0, 0, 0, 30, 0, 0, 0, 0, 186, 242, 246, 138])
    expected = prelude + b'{"foo": "bar"}' + bytes([174, 114, 88, 228])
    assert frame({}, b'{"foo": "bar"}') == expected


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    edges = [0, *sorted({cut % (len(data) + 1) for cut in cuts}), len(data)]
    return [data[start:end] for start, end in itertools.pairwise(edges)]


# --- The decoder -------------------------------------------------------------------------------------

payload_lists = st.lists(st.binary(max_size=64), max_size=8)


@given(payloads=payload_lists, cuts=st.lists(st.integers(min_value=0), max_size=12))
def test_payloads_come_out_whole_and_in_order_however_the_body_is_cut(
    payloads: list[bytes], cuts: list[int]
) -> None:
    body = b"".join(part(payload) for payload in payloads)
    decoder = ResponseStreamDecoder()
    received: list[bytes] = []
    for chunk in split_at(body, cuts):
        received += decoder.feed(chunk)
    decoder.finish()
    # Empty parts are dropped: an empty write would end a chunked response.
    assert received == [payload for payload in payloads if payload]


def test_each_payload_comes_out_as_soon_as_its_frame_is_complete() -> None:
    first, second = part(b'data: {"token": "Hel"}\n\n'), part(b'data: {"token": "lo"}\n\n')
    decoder = ResponseStreamDecoder()
    assert decoder.feed(first[:-1]) == []
    assert decoder.feed(first[-1:] + second[:5]) == [b'data: {"token": "Hel"}\n\n']
    assert decoder.feed(second[5:]) == [b'data: {"token": "lo"}\n\n']


def test_events_other_than_payload_parts_are_ignored() -> None:
    unknown = frame({":message-type": "event", ":event-type": "SomethingNew"}, b"ignored")
    decoder = ResponseStreamDecoder()
    assert decoder.feed(part(b"a") + unknown + part(b"b")) == [b"a", b"b"]


@given(
    before=st.lists(st.binary(min_size=1, max_size=32), max_size=4),
    cuts=st.lists(st.integers(min_value=0), max_size=8),
)
def test_an_error_event_fails_the_stream_after_every_payload_before_it(
    before: list[bytes], cuts: list[int]
) -> None:
    body = b"".join(part(payload) for payload in before) + model_stream_error() + part(b"never sent")
    decoder = ResponseStreamDecoder()
    received: list[bytes] = []
    failures: list[StreamFailureError] = []
    for chunk in split_at(body, cuts):
        try:
            received += decoder.feed(chunk)
        except StreamFailureError as failure:
            received += failure.payloads
            failures.append(failure)
            break
    assert received == before
    (only,) = failures
    assert (only.code, only.error_code) == ("ModelStreamError", "ModelInvocationTimeExceeded")
    assert only.message == "the model took too long"


def test_after_a_failure_every_feed_and_the_finish_fail_again_without_payloads() -> None:
    decoder = ResponseStreamDecoder()
    with pytest.raises(StreamFailureError) as first:
        decoder.feed(part(b"a") + model_stream_error("StreamBroken"))
    assert first.value.payloads == (b"a",)
    assert str(first.value) == "ModelStreamError (StreamBroken): the model took too long"
    with pytest.raises(StreamFailureError) as again:
        decoder.feed(part(b"b"))
    assert (again.value.code, again.value.payloads) == ("ModelStreamError", ())
    with pytest.raises(StreamFailureError):
        decoder.finish()


def test_an_internal_stream_failure_has_no_error_code() -> None:
    decoder = ResponseStreamDecoder()
    with pytest.raises(StreamFailureError) as failure:
        decoder.feed(exception("InternalStreamFailure", {"Message": "try again"}))
    assert (failure.value.code, failure.value.message, failure.value.error_code) == (
        "InternalStreamFailure",
        "try again",
        None,
    )


def test_an_exception_whose_payload_is_not_json_keeps_its_text_as_the_message() -> None:
    decoder = ResponseStreamDecoder()
    with pytest.raises(StreamFailureError) as failure:
        decoder.feed(exception("InternalStreamFailure", b"upstream went away"))
    assert failure.value.message == "upstream went away"


def test_a_generic_error_message_carries_its_code_and_message_in_headers() -> None:
    error = frame({":message-type": "error", ":error-code": "Throttled", ":error-message": "slow down"})
    decoder = ResponseStreamDecoder()
    with pytest.raises(StreamFailureError) as failure:
        decoder.feed(part(b"x") + error)
    assert (failure.value.code, failure.value.message, failure.value.payloads) == (
        "Throttled",
        "slow down",
        (b"x",),
    )


@pytest.mark.parametrize(
    "corrupt_at", [5, 9, 20, -5, -1], ids=["prelude", "prelude-crc", "headers", "payload", "message-crc"]
)
def test_a_corrupt_frame_fails_the_stream_after_the_good_ones(corrupt_at: int) -> None:
    bad = bytearray(part(b"second payload"))
    bad[corrupt_at] ^= 0x01
    decoder = ResponseStreamDecoder()
    with pytest.raises(StreamFailureError) as failure:
        decoder.feed(part(b"first") + bytes(bad))
    assert failure.value.code == INVALID_STREAM
    assert failure.value.message.startswith("corrupt event-stream frame: Checksum mismatch")
    assert failure.value.payloads == (b"first",)


def test_a_body_that_ends_inside_a_frame_was_cut_short() -> None:
    decoder = ResponseStreamDecoder()
    assert decoder.feed(part(b"whole") + part(b"cut")[:10]) == [b"whole"]
    with pytest.raises(StreamFailureError) as failure:
        decoder.finish()
    assert failure.value.code == TRUNCATED_STREAM
    assert "10 bytes" in failure.value.message


# --- Which requests want a stream -------------------------------------------------------------------

JSON = "application/json"


@pytest.mark.parametrize(
    ("accept", "content_type", "body", "expected"),
    [
        ("text/event-stream", None, b"", True),
        ("application/json, Text/Event-Stream;q=0.9", JSON, b"{}", True),
        ("text/event-stream; q=0", JSON, b"{}", False),
        ("*/*", JSON, b"{}", False),
        ("text/*", JSON, b"{}", False),
        (None, JSON, b'{"model": "m", "stream": true}', True),
        (None, "application/json; charset=utf-8", b'{"stream": true}', True),
        (None, "application/vnd.api+json", b'{"stream": true}', True),
        (None, None, b'  {"stream": true}', True),
        (None, JSON, b'{"stream": false}', False),
        (None, JSON, b'{"model": "m"}', False),
        (None, JSON, b'{"stream": "true"}', False),
        (None, JSON, b'{"stream": 1}', False),
        (None, JSON, b'{"options": {"stream": true}}', False),
        (None, JSON, b'[{"stream": true}]', False),
        (None, JSON, b'{"stream": tru', False),
        (None, JSON, b'{"stream": true, \xff}', False),
        (None, JSON, b"[" * 100_000 + b'{"stream": true}', False),
        (None, "text/plain", b'{"stream": true}', False),
        (None, "application/x-www-form-urlencoded", b'{"stream": true}', False),
        (None, None, b"", False),
        ("application/json", JSON, b'{"stream": true}', True),
    ],
)
def test_a_request_wants_a_stream_when_its_accept_or_its_json_body_says_so(
    accept: str | None, content_type: str | None, body: bytes, expected: bool
) -> None:
    assert wants_stream(accept, content_type, body) is expected


def test_a_body_too_large_to_parse_on_the_event_loop_is_not_parsed() -> None:
    padding = b"x" * (1024 * 1024)
    assert not wants_stream(None, JSON, b'{"stream": true, "pad": "' + padding + b'"}')
    assert wants_stream("text/event-stream", JSON, b'{"stream": true, "pad": "' + padding + b'"}')


# --- URLs and content types --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            "https://runtime.sagemaker.eu-west-1.amazonaws.com/endpoints/vk-abc/invocations",
            "https://runtime.sagemaker.eu-west-1.amazonaws.com/endpoints/vk-abc/invocations-response-stream",
        ),
        (
            "http://127.0.0.1:8080/prefix/endpoints/vk-x/invocations?a=1&b=2",
            "http://127.0.0.1:8080/prefix/endpoints/vk-x/invocations-response-stream?a=1&b=2",
        ),
    ],
)
def test_the_stream_url_is_the_invocation_url_with_response_stream(url: str, expected: str) -> None:
    assert stream_url(url) == expected


@pytest.mark.parametrize(
    "url",
    [
        "https://runtime.sagemaker.eu-west-1.amazonaws.com/endpoints/vk-abc/invocations-response-stream",
        "https://runtime.sagemaker.eu-west-1.amazonaws.com/endpoints/vk-abc",
        "https://runtime.sagemaker.eu-west-1.amazonaws.com/invocations",
        "http://10.0.0.7:8080/v1/chat/completions",
        "/endpoints/vk-abc/invocations",
        "ftp://host/endpoints/vk-abc/invocations",
    ],
)
def test_other_urls_have_no_stream_url(url: str) -> None:
    with pytest.raises(ValueError, match="not a SageMaker invocation URL"):
        stream_url(url)


@pytest.mark.parametrize(
    ("header_value", "expected"),
    [
        ("text/event-stream", "text/event-stream"),
        (" application/jsonlines; charset=utf-8 ", "application/jsonlines; charset=utf-8"),
        (None, None),
        ("", None),
        ("not a media type", None),
    ],
)
def test_the_client_sees_the_models_content_type(header_value: str | None, expected: str | None) -> None:
    assert relayed_content_type(header_value) == expected


def test_only_event_stream_answers_are_decoded() -> None:
    assert is_event_stream("application/vnd.amazon.eventstream")
    assert is_event_stream("Application/VND.Amazon.EventStream; charset=binary")
    assert not is_event_stream("application/json")  # an error answer of the stream operation
    assert not is_event_stream(None)


# --- Ending a response after a failure ---------------------------------------------------------------


FAILURE = StreamFailureError("ModelStreamError", 'model said "no"\nand stopped', error_code="StreamBroken")


@pytest.mark.parametrize("content_type", ["text/event-stream", "text/event-stream; charset=utf-8"])
def test_an_sse_response_ends_with_an_error_event(content_type: str) -> None:
    ending = stream_failure_ending(content_type, FAILURE)
    assert ending is not None
    sent = b'data: {"token": "Hi"}\n\n'
    assert sse_events(sent + ending) == [
        ("message", '{"token": "Hi"}'),
        (
            "error",
            json.dumps(
                {
                    "error": {
                        "code": "ModelStreamError",
                        "message": 'model said "no"\nand stopped',
                        "error_code": "StreamBroken",
                    }
                }
            ),
        ),
    ]


def test_the_error_event_stands_alone_after_an_event_cut_short() -> None:
    ending = stream_failure_ending("text/event-stream", StreamFailureError("InternalStreamFailure", "gone"))
    assert ending is not None
    events = sse_events(b'data: {"token": "Hi"}\n\ndata: {"tok' + ending)
    assert events[-1] == ("error", '{"error": {"code": "InternalStreamFailure", "message": "gone"}}')


@pytest.mark.parametrize("content_type", ["application/json", "application/jsonlines", None])
def test_any_other_response_must_be_cut_short(content_type: str | None) -> None:
    assert stream_failure_ending(content_type, FAILURE) is None
