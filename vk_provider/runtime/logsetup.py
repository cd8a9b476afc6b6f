"""The daemons' `--log-level`: one set of names, checked when the command line is read.

A misspelt level (`--log-level verbose`) is a usage error naming the choices, exit 2, not a
`ValueError: Unknown level` from the logging module once the daemon has started.
"""

from __future__ import annotations

import argparse
import logging

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def log_level(text: str) -> str:
    """A level name in any case, upper-cased; ValueError naming the choices otherwise."""
    level = text.strip().upper()
    if level not in LEVELS:
        raise ValueError(f"unknown log level {text!r} (choose from {', '.join(LEVELS)})")
    return level


def _log_level_flag(text: str) -> str:
    try:
        return log_level(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error


def add_log_level_argument(parser: argparse.ArgumentParser, *, default: str | None = "INFO") -> None:
    parser.add_argument(
        "--log-level",
        type=_log_level_flag,
        default=default,
        metavar="LEVEL",
        help=f"{', '.join(LEVELS)} (default: INFO)",
    )


def configure_logging(level: str) -> None:
    logging.basicConfig(level=log_level(level), format=LOG_FORMAT)
