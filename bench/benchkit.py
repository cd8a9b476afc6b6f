"""What the benchmarks in bench/ share: results, statistics, the machine, commands, ports and exits.

`pods_to_running.py`, `router_overhead.py` and `router_runner.py` import this as a sibling module
(`import benchkit`): they are run as scripts (`python bench/pods_to_running.py ...`), which puts
bench/ first on sys.path. It uses the standard library only, so the router runner's process stays
as light as the router it serves.

Every benchmark writes one file pair per run with `write_report`: results/<benchmark>-<UTC start,
to the minute>.json, strict JSON with no NaN, and the .md beside it. A report opens with the keys of
`report_head`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import math
import os
import platform
import socket
import subprocess
import sys
from collections.abc import Callable, Coroutine, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
DEFAULT_RESULTS_DIR = BENCH_DIR / "results"


class BenchError(Exception):
    """A run could not be completed; the message says why."""


# --- commands, logs, ports ------------------------------------------------------------------------


def run_text(argv: Sequence[str], timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run a short command to completion and capture its output as text; never raises on its status."""
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)


def run_vk_provider(*arguments: str, timeout: float = 600.0) -> subprocess.CompletedProcess[str]:
    """`python -m vk_provider ARGUMENTS` (e.g. `dev up`) with this interpreter, as `run_text` runs it."""
    return run_text([sys.executable, "-m", "vk_provider", *arguments], timeout=timeout)


def tail(path: Path, lines: int) -> str:
    """The last `lines` lines of a log, for an error message; says so when it is missing or empty."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log was written)"
    return "\n".join(text.rstrip().splitlines()[-lines:]) or "(the log is empty)"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 when asked (the kernel's choice); nothing holds it afterwards."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def optional_uvloop() -> ModuleType | None:
    """uvloop when it happens to be importable (it is not a dependency of vk-provider), else None."""
    try:
        return importlib.import_module("uvloop")
    except ImportError:
        return None


# --- the machine ----------------------------------------------------------------------------------


def machine_info() -> dict[str, Any]:
    """CPU model and count, memory, kernel and Python version: the `machine` key of every report."""
    cpu_model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    memory_kib = 0
    with contextlib.suppress(OSError, ValueError, IndexError):
        memory_kib = int(Path("/proc/meminfo").read_text().splitlines()[0].split()[1])
    return {
        "cpu_model": cpu_model,
        "cpus": os.cpu_count(),
        "memory_gib": round(memory_kib / 1024 / 1024, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
    }


def describe_machine(machine: dict[str, Any]) -> str:
    """`machine_info()` (as stored in a report) in words: "2 CPUs (model), 23.5 GiB"."""
    return f"{machine['cpus']} CPUs ({machine['cpu_model']}), {machine['memory_gib']} GiB"


# --- statistics -----------------------------------------------------------------------------------


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (p99 of 1000 values is the 990th smallest); NaN when there are none."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def ratio(ours: float | None, theirs: float | None) -> float | None:
    """ours/theirs; None when either is missing or NaN, or theirs is not positive.

    Every quantity the benchmarks divide (a throughput, a latency, a memory peak, a CPU time, a
    latency added over a baseline) is positive when it means anything; an added latency at or below
    zero is within noise, and a ratio to it would be nonsense.
    """
    if ours is None or theirs is None or math.isnan(ours) or math.isnan(theirs) or theirs <= 0:
        return None
    return ours / theirs


# --- tables ---------------------------------------------------------------------------------------


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table's lines: the first column left-aligned, the others (numbers) right-aligned."""
    align = ["---", *["---:" for _ in header[1:]]]
    return [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join(align) + " |",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """The same table for a terminal: columns padded to their widest cell."""
    widths = [max(len(str(row[index])) for row in [header, *rows]) for index in range(len(header))]
    return [
        "  ".join(
            str(value).ljust(widths[index]) if index == 0 else str(value).rjust(widths[index])
            for index, value in enumerate(row)
        )
        for row in [header, *rows]
    ]


# --- results --------------------------------------------------------------------------------------


def without_nan(value: Any) -> Any:
    """NaN (a statistic of no values) becomes null, so the JSON stays strict."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {key: without_nan(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [without_nan(item) for item in value]
    return value


def cell(value: Any, fmt: str) -> str:
    """A number for a table: `fmt.format(value)`, or an em dash when it is missing (None or NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return fmt.format(value)


def report_head(benchmark: str, started_at: datetime) -> dict[str, Any]:
    """The keys a report starts with, in this order: benchmark, started_at, finished_at (now), machine.

    `benchmark` also names the result files (see `write_report`).
    """
    return {
        "benchmark": benchmark,
        "started_at": started_at.isoformat(timespec="seconds"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
    }


def write_report(
    results_dir: Path, report: dict[str, Any], write_markdown: Callable[[Path, dict[str, Any]], None]
) -> tuple[Path, Path]:
    """Write `<benchmark>-<YYYY-MM-DDTHHMMZ of started_at>.json` and the `.md` that `write_markdown`
    makes of the same report into results_dir (created if need be); return both paths.

    A second run started in the same minute overwrites the first's pair.
    """
    results_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.fromisoformat(report["started_at"]).strftime("%Y-%m-%dT%H%MZ")
    json_path = results_dir / f"{report['benchmark']}-{stamp}.json"
    markdown_path = json_path.with_suffix(".md")
    json_path.write_text(json.dumps(without_nan(report), indent=2, allow_nan=False, default=str) + "\n")
    write_markdown(markdown_path, report)
    return json_path, markdown_path


# --- command line and exit ------------------------------------------------------------------------


def add_results_dir_option(parser: argparse.ArgumentParser) -> None:
    """`--results-dir`, bench/results by default: where `write_report` puts a run's pair."""
    parser.add_argument("--results-dir", type=Path, default=DEFAULT_RESULTS_DIR, help="where results go")


def run_main(
    main: Coroutine[Any, Any, int],
    *,
    interrupted: str,
    cleanup: Callable[[bool], None] | None = None,
) -> int:
    """Run a benchmark's top coroutine and give the exit status all benchmarks use.

    - its own status when it returns;
    - 1 when it raises BenchError, whose message goes to stderr as `error: ...`;
    - 130 on Ctrl-C (KeyboardInterrupt), after `interrupted: <interrupted>` on stderr. asyncio.run has
      cancelled the coroutine by then, so its `finally` blocks have run: say what they cleaned up.

    `cleanup(failed)` runs last whatever happened, other exceptions included; `failed` is False only
    when the coroutine returned a status.
    """
    failed = True
    try:
        status = asyncio.run(main)
        failed = False
        return status
    except BenchError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"\ninterrupted: {interrupted}", file=sys.stderr)
        return 130
    finally:
        if cleanup is not None:
            cleanup(failed)
