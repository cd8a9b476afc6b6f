"""The daemons' `--log-level` and `--log-format`: one set of names, checked when the command line is read.

A misspelt level (`--log-level verbose`) is a usage error naming the choices, exit 2, not a
`ValueError: Unknown level` from the logging module once the daemon has started. `--log-format json`
writes one JSON object a line (time in RFC 3339, level, logger, message, and the exception's text when
there is one), which log collectors index without a parsing rule; standard library only.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
from typing import Any

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
FORMATS = ("text", "json")


def log_level(text: str) -> str:
    """A level name in any case, upper-cased; ValueError naming the choices otherwise."""
    level = text.strip().upper()
    if level not in LEVELS:
        raise ValueError(f"unknown log level {text!r} (choose from {', '.join(LEVELS)})")
    return level


def log_format(text: str) -> str:
    """`text` or `json` in any case, lower-cased; ValueError naming the choices otherwise."""
    name = text.strip().lower()
    if name not in FORMATS:
        raise ValueError(f"unknown log format {text!r} (choose from {', '.join(FORMATS)})")
    return name


def _flag(convert: Any) -> Any:
    def checked(text: str) -> str:
        try:
            return str(convert(text))
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from error

    return checked


def add_log_level_argument(parser: argparse.ArgumentParser, *, default: str | None = "INFO") -> None:
    parser.add_argument(
        "--log-level",
        type=_flag(log_level),
        default=default,
        metavar="LEVEL",
        help=f"{', '.join(LEVELS)} (default: INFO)",
    )


def add_log_format_argument(parser: argparse.ArgumentParser, *, default: str | None = "text") -> None:
    parser.add_argument(
        "--log-format",
        type=_flag(log_format),
        default=default,
        metavar="FORMAT",
        help="text (one line a record, for people) or json (one JSON object a line: time, level, logger, "
        "message, exception) (default: text)",
    )


def add_log_arguments(parser: argparse.ArgumentParser, *, defaults: bool = True) -> None:
    """`--log-level` and `--log-format`; `defaults` False leaves them None (the node fills in its own,
    after its file and environment)."""
    add_log_level_argument(parser, default="INFO" if defaults else None)
    add_log_format_argument(parser, default="text" if defaults else None)


class JsonLines(logging.Formatter):
    """One JSON object a record, on one line (a traceback's newlines are escaped inside its string)."""

    def __init__(self, source: str | None = None) -> None:
        super().__init__()
        self._source = source

    def format(self, record: logging.LogRecord) -> str:
        moment = datetime.datetime.fromtimestamp(record.created, tz=datetime.UTC)
        entry: dict[str, str] = {
            "time": moment.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if self._source is not None:
            entry["source"] = self._source
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False)


def formatter(log_format_name: str = "text", *, source: str | None = None) -> logging.Formatter:
    """The records' form; `source` names a process among several writing one log (a router's worker)."""
    if log_format(log_format_name) == "json":
        return JsonLines(source)
    prefix = f" [{source}]" if source is not None else ""
    return logging.Formatter(f"%(asctime)s %(levelname)s %(name)s{prefix}: %(message)s")


def configure_logging(level: str, log_format_name: str = "text", *, source: str | None = None) -> None:
    """Root logging to stderr at `level` in `log_format_name`, unless something configured it first."""
    handler = logging.StreamHandler()
    handler.setFormatter(formatter(log_format_name, source=source))
    logging.basicConfig(level=log_level(level), handlers=[handler])
