"""`vk-provider interconnect-exporter`: its flags, and running it until SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from urllib.parse import urlsplit

from vk_provider.interconnect.exporter import (
    DEFAULT_INTERVAL_SECONDS,
    DEFAULT_SYSFS_ROOT,
    ExporterSettings,
    ListenError,
    serve,
)
from vk_provider.interconnect.names import DEFAULT_PORT
from vk_provider.interconnect.sysfs import SysfsRootError, check_root
from vk_provider.runtime.flagtypes import positive_seconds
from vk_provider.runtime.logsetup import add_log_arguments, configure_logging
from vk_provider.runtime.signals import until_signalled

PROGRAM = "vk-provider interconnect-exporter"


def listen_port(text: str) -> int:
    """A TCP port, 0 (any free one) to 65535."""
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, got {text!r}") from None
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, got {number}")
    return number


def http_url(text: str) -> str:
    """An http:// or https:// URL with a host."""
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(
            f"expected an http:// URL such as http://127.0.0.1:9400/metrics, got {text!r}"
        )
    return text


def add_interconnect_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sysfs-root",
        type=Path,
        default=DEFAULT_SYSFS_ROOT,
        metavar="PATH",
        help="where sysfs is: the InfiniBand counters are read under PATH/class/infiniband (a DaemonSet "
        "mounts the host's /sys read-only; a test gives a folder laid out the same way)",
    )
    parser.add_argument(
        "--listen-address",
        default="0.0.0.0",  # noqa: S104 - scraped on the pod's IP
        help="address to serve /metrics, /healthz and /readyz on; an address or $(POD_IP)",
    )
    parser.add_argument(
        "--port", type=listen_port, default=DEFAULT_PORT, help="port of /metrics, /healthz and /readyz"
    )
    parser.add_argument(
        "--interval-seconds",
        type=positive_seconds,
        default=DEFAULT_INTERVAL_SECONDS,
        help="seconds between reads; the _per_second gauges are rates over this interval",
    )
    parser.add_argument(
        "--dcgm-exporter-url",
        type=http_url,
        default=None,
        metavar="URL",
        help="a dcgm-exporter's metrics URL (e.g. http://127.0.0.1:9400/metrics) to read NVLink error "
        "counters from; its counters file must enable the NVLink error fields (default: none, no NVLink)",
    )
    parser.add_argument(
        "--dcgm-timeout-seconds",
        type=positive_seconds,
        default=5.0,
        help="how long a read of the dcgm-exporter may take",
    )
    add_log_arguments(parser)
    parser.set_defaults(run_command=run_interconnect_command)


def settings_from(arguments: argparse.Namespace) -> ExporterSettings:
    """The settings of the parsed flags; SysfsRootError when --sysfs-root is no folder."""
    check_root(arguments.sysfs_root)
    return ExporterSettings(
        sysfs_root=arguments.sysfs_root,
        listen_address=arguments.listen_address,
        port=arguments.port,
        interval_seconds=arguments.interval_seconds,
        dcgm_exporter_url=arguments.dcgm_exporter_url,
        dcgm_timeout_seconds=arguments.dcgm_timeout_seconds,
    )


def run_interconnect_command(arguments: argparse.Namespace) -> int:
    try:
        settings = settings_from(arguments)
    except SysfsRootError as error:
        print(f"{PROGRAM}: error: {error}", file=sys.stderr)
        return 2
    configure_logging(arguments.log_level, arguments.log_format)
    try:
        asyncio.run(until_signalled(lambda stop: serve(settings, stop)))
    except ListenError as error:
        print(f"{PROGRAM}: error: {error}", file=sys.stderr)
        return 1
    return 0
