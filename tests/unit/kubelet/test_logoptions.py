"""Log query options: parsed and validated as the kubelet does, with messages that name the parameter."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from vk_provider.kubelet.logoptions import LogOptionsError, parse_log_options, parse_rfc3339
from vk_provider.provider import LogOptions

NOW = datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)


def parse(**query: str) -> LogOptions:
    return parse_log_options(query, now=NOW)


def test_no_parameters_give_the_defaults() -> None:
    assert parse() == LogOptions()


def test_every_option_is_parsed() -> None:
    options = parse(
        follow="true",
        tailLines="5",
        limitBytes="100",
        previous="1",
        timestamps="t",
        sinceTime="2024-05-06T07:00:00Z",
    )
    assert options == LogOptions(
        follow=True,
        tail_lines=5,
        limit_bytes=100,
        previous=True,
        since_time=datetime(2024, 5, 6, 7, 0, tzinfo=UTC),
        timestamps=True,
    )


def test_since_seconds_becomes_a_time_that_many_seconds_before_now() -> None:
    assert parse(sinceSeconds="90").since_time == NOW - timedelta(seconds=90)


def test_a_since_seconds_beyond_the_calendar_means_the_whole_log() -> None:
    assert parse(sinceSeconds=str(2**63 - 1)).since_time == datetime.min.replace(tzinfo=UTC)


@pytest.mark.parametrize("text", ["false", "False", "FALSE", "f", "F", "0"])
def test_only_false_f_and_0_are_false(text: str) -> None:
    assert parse(follow=text, previous=text, timestamps=text) == LogOptions()


@pytest.mark.parametrize("text", ["true", "1", "yes", "no", "", "anything"])
def test_any_other_boolean_value_is_true_even_empty(text: str) -> None:
    options = parse(follow=text, previous=text, timestamps=text)
    assert (options.follow, options.previous, options.timestamps) == (True, True, True)


@pytest.mark.parametrize("text", ["0", "+7", "007"])
def test_integers_are_read_as_go_reads_them(text: str) -> None:
    assert parse(tailLines=text).tail_lines == int(text)


@pytest.mark.parametrize("name", ["tailLines", "limitBytes", "sinceSeconds"])
@pytest.mark.parametrize("text", ["abc", "1.5", "", " 3", "0x10", str(2**63)])
def test_a_value_that_is_not_a_64_bit_integer_is_refused_by_name(name: str, text: str) -> None:
    with pytest.raises(LogOptionsError, match=f"^{name}: "):
        parse(**{name: text})


def test_a_legacy_tail_that_is_neither_a_number_nor_all_is_refused_by_name() -> None:
    with pytest.raises(LogOptionsError, match=r"^tail: 'some' is not an integer$"):
        parse(tail="some")


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"tailLines": "-1"}, "tailLines: Invalid value: -1: must be greater than or equal to 0"),
        ({"limitBytes": "0"}, "limitBytes: Invalid value: 0: must be greater than 0"),
        ({"limitBytes": "-5"}, "limitBytes: Invalid value: -5: must be greater than 0"),
        ({"sinceSeconds": "0"}, "sinceSeconds: Invalid value: 0: must be greater than 0"),
        (
            {"sinceSeconds": "10", "sinceTime": "2024-05-06T07:00:00Z"},
            "at most one of `sinceTime` or `sinceSeconds` may be specified",
        ),
    ],
)
def test_values_out_of_range_are_refused_as_the_apiserver_words_it(
    query: dict[str, str], message: str
) -> None:
    with pytest.raises(LogOptionsError) as raised:
        parse_log_options(query, now=NOW)
    assert str(raised.value) == message


def test_zero_tail_lines_and_one_byte_are_the_smallest_accepted_values() -> None:
    assert parse(tailLines="0", limitBytes="1") == LogOptions(tail_lines=0, limit_bytes=1)


@pytest.mark.parametrize(
    "text", ["yesterday", "2024-05-06", "2024-05-06T07:00:00", "2024-02-30T00:00:00Z", "2024-05-06 07:00:00Z"]
)
def test_a_since_time_that_is_not_rfc3339_is_refused_by_name(text: str) -> None:
    with pytest.raises(LogOptionsError, match=r"^sinceTime: "):
        parse(sinceTime=text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-05-06T07:08:09Z", datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)),
        ("2024-05-06t07:08:09z", datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)),
        ("2024-05-06T09:08:09+02:00", datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)),
        ("2024-05-06T05:38:09-01:30", datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)),
        ("2024-05-06T07:08:09.123456789Z", datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)),
        ("2024-05-06T07:08:09.5Z", datetime(2024, 5, 6, 7, 8, 9, 500000, tzinfo=UTC)),
    ],
)
def test_rfc3339_times_are_read_in_utc_to_the_microsecond(text: str, expected: datetime) -> None:
    parsed = parse_rfc3339(text)
    assert parsed == expected
    assert parsed.tzinfo == UTC


def test_the_legacy_tail_parameter_overrides_tail_lines_and_all_means_everything() -> None:
    assert parse(tail="3", tailLines="8").tail_lines == 3
    assert parse(tail="all", tailLines="8").tail_lines is None
    assert parse(tail="", tailLines="8").tail_lines == 8
