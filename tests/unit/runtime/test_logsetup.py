"""`--log-format json`: one JSON object a line, with what a log collector indexes."""

from __future__ import annotations

import datetime
import json
import logging
import sys

import pytest

from vk_provider.runtime.logsetup import JsonLines, formatter, log_format


def record(message: str, *args: object, exc_info: bool = False) -> logging.LogRecord:
    info = sys.exc_info() if exc_info else None
    return logging.LogRecord("vk_provider.test", logging.WARNING, __file__, 1, message, args, info)


def test_a_record_is_one_line_of_json_with_time_level_logger_and_message() -> None:
    line = JsonLines().format(record("%d routes from %s", 3, "the feed"))
    assert "\n" not in line
    entry = json.loads(line)
    assert set(entry) == {"time", "level", "logger", "message"}
    assert (entry["level"], entry["logger"], entry["message"]) == (
        "WARNING",
        "vk_provider.test",
        "3 routes from the feed",
    )
    moment = datetime.datetime.fromisoformat(entry["time"])  # RFC 3339, in UTC
    assert moment.utcoffset() == datetime.timedelta(0)
    assert entry["time"].endswith("Z")
    assert abs(moment.timestamp() - record("x").created) < 5


def test_an_exception_s_text_comes_in_its_own_field_still_on_one_line() -> None:
    try:
        raise ValueError("the cause")
    except ValueError:
        line = JsonLines(source="worker 2").format(record("failed", exc_info=True))
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["source"] == "worker 2"
    assert entry["exception"].startswith("Traceback (most recent call last):")
    assert entry["exception"].rstrip().endswith("ValueError: the cause")


def test_text_stays_the_format_it_was() -> None:
    text = formatter("text", source="worker 1").format(record("hello"))
    assert text.endswith(" WARNING vk_provider.test [worker 1]: hello")


def test_an_unknown_format_names_the_choices() -> None:
    assert log_format(" JSON ") == "json"
    with pytest.raises(ValueError, match=r"unknown log format 'xml' \(choose from text, json\)"):
        log_format("xml")
