"""Value types of the daemons' flags, each refusing a bad value with a message argparse prints as is.

argparse turns an `ArgumentTypeError` into `argument --flag: <message>`, exit 2; a plain ValueError
would read `invalid <function name> value`. Durations are seconds, as a number (fractions allowed):
every daemon's `--<name>-seconds` flag takes one.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable

_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(ms|s|m|h)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def _number(text: str) -> float:
    try:
        number = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(number):
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds, got {text!r}")
    return number


def seconds(text: str) -> float:
    """A number of seconds, 0 or more."""
    number = _number(text)
    if number < 0:
        raise argparse.ArgumentTypeError(f"expected 0 seconds or more, got {text!r}")
    return number


def requests_per_second(text: str) -> float:
    """A rate in requests a second, 0 or more (0 meaning no ceiling)."""
    try:
        number = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of requests a second, got {text!r}") from None
    if not math.isfinite(number) or number < 0:
        raise argparse.ArgumentTypeError(f"expected 0 requests a second or more, got {text!r}")
    return number


def positive_seconds(text: str) -> float:
    """A number of seconds greater than 0 (an interval or a timeout that 0 would make meaningless)."""
    number = _number(text)
    if number <= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds greater than 0, got {text!r}")
    return number


def seconds_with_unit(text: str) -> float:
    """What the old duration flags took: seconds, bare or with a unit (`30`, `30s`, `500ms`, `2m`, `1h`).
    Only their deprecated aliases use it, so a manifest written for them keeps working."""
    match = _DURATION.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"expected a duration such as 30, 30s, 500ms or 2m, got {text!r}")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def whole_number(least: int) -> Callable[[str], int]:
    """A whole number of at least `least`."""

    def convert(text: str) -> int:
        try:
            number = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if number < least:
            raise argparse.ArgumentTypeError(f"expected at least {least}, got {number}")
        return number

    convert.__name__ = f"whole_number_{least}"
    return convert


def port(text: str) -> int:
    """A TCP port, 1 to 65535."""
    number = whole_number(1)(text)
    if number > 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 1 to 65535, got {number}")
    return number


def host_port(text: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 in brackets; an empty host is every address) → (host, port)."""
    host, separator, port_text = text.rpartition(":")
    if not separator or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT with a port from 1 to 65535, got {text!r}")
    return host.strip("[]") or "0.0.0.0", int(port_text)  # noqa: S104 - the daemons serve the network
