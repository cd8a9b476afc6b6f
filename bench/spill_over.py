"""Burst on demand: the demo service under a load ramp, served home only (the peer) and spilling over.

Each mode gets a development plane of its own (`vk-provider dev up`, the demo service with 2 home
replicas on local-gpu and the burst node burst-gpu, metrics-server, the router, the controller):

1. `home-only`: the demo as shipped, 2 replicas at home, no autoscaler;
2. `spill-over`: the same, with the Offload spilling over (`maxHomeReplicas 2`, `maxAwayReplicas 3`)
   and manifests/examples/autoscaler.yaml (the real HorizontalPodAutoscaler, CPU target 50% of 50m).

The same ramp in both: `--step-seconds` at each of 20, 65, 110 and 155 requests/s, `--peak-seconds` at
200/s, `--step-seconds` back at 20/s. For each mode: requests and failures, p50 and p99 over the last
half of the peak (once an autoscaler has had time to act), the share served by the burst node there,
and the p99's ratio to the home-only peer. Results go to bench/results/spill_over-<time>.{json,md}.

Run (as root, as `dev up` needs): `.venv/bin/python bench/spill_over.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchkit import (
    BenchError,
    add_results_dir_option,
    markdown_table,
    percentile,
    ratio,
    report_head,
    run_main,
    run_vk_provider,
    write_report,
)
from vk_devtools.demo.load import LoadGenerator, LoadSettings, Outcome, failures, window
from vk_devtools.devcluster import cluster, traffic

RAMP = (20.0, 65.0, 110.0, 155.0)
PEAK = 200.0
LOW = 20.0
SPILL_OVER = {"replicas": 2, "spillOver": {"maxHomeReplicas": 2, "maxAwayReplicas": 3}}
AUTOSCALER = traffic.MANIFESTS / "examples" / "autoscaler.yaml"


def kubectl(state: cluster.ClusterState, *arguments: str) -> None:
    done = subprocess.run(
        [str(state.bin_dir / "kubectl"), f"--kubeconfig={state.kubeconfig}", *arguments],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise BenchError(f"kubectl {' '.join(arguments)}: {done.stderr.strip()}")


async def send(state: cluster.ClusterState, rate: float, seconds: float) -> list[Outcome]:
    settings = LoadSettings(
        url=f"http://127.0.0.1:{state.ports['router']}",
        host_header=traffic.EXAMPLE_HOST,
        rate=rate,
        stream_share=0.0,
        stream_tokens=2,
    )
    async with LoadGenerator(settings) as generator:
        await asyncio.sleep(seconds)  # a load of a given length is what is measured
    return generator.outcomes


async def run_mode(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"bench-spill-{mode}-") as folder:
        directory = Path(folder) / "plane"
        up = run_vk_provider("dev", "up", "--any-free-ports", "--dir", str(directory))
        if up.returncode != 0:
            raise BenchError(f"dev up failed: {up.stderr.strip()[-2000:]}")
        try:
            state = cluster.ClusterState.load(directory)
            if state is None:
                raise BenchError(f"no plane state in {directory}")
            if mode == "spill-over":
                body = json.dumps({"spec": SPILL_OVER})
                kubectl(state, "patch", "offload", traffic.EXAMPLE_NAME, "--type=merge", "-p", body)
                kubectl(state, "apply", "-f", str(AUTOSCALER))
            outcomes: list[Outcome] = []
            for rate in RAMP:
                outcomes += await send(state, rate, args.step_seconds)
            peak_started = time.monotonic()
            peak = await send(state, PEAK, args.peak_seconds)
            outcomes += peak + await send(state, LOW, args.step_seconds)
        finally:
            run_vk_provider("dev", "down", "--dir", str(directory))
    measured = window(peak, peak_started + args.peak_seconds / 2, peak_started + args.peak_seconds)
    latencies = [outcome.end - outcome.start for outcome in measured if outcome.ok]
    away = sum(1 for outcome in measured if (outcome.served_by or "").startswith("burst-gpu/"))
    return {
        "mode": mode,
        "requests": len(outcomes),
        "failed": len(failures(outcomes)),
        "peak_measured": len(measured),
        "peak_p50_ms": 1000 * percentile(latencies, 0.5) if latencies else None,
        "peak_p99_ms": 1000 * percentile(latencies, 0.99) if latencies else None,
        "peak_away_percent": 100.0 * away / len(measured) if measured else None,
    }


def write_markdown(path: Path, report: dict[str, Any]) -> None:
    rows = [
        [
            mode["mode"],
            str(mode["requests"]),
            str(mode["failed"]),
            str(mode["peak_measured"]),
            f"{mode['peak_p50_ms']:.0f}" if mode["peak_p50_ms"] is not None else "-",
            f"{mode['peak_p99_ms']:.0f}" if mode["peak_p99_ms"] is not None else "-",
            f"{mode['peak_away_percent']:.1f}" if mode["peak_away_percent"] is not None else "-",
            f"{mode['p99_ratio_to_home_only']:.2f}" if mode["p99_ratio_to_home_only"] is not None else "-",
        ]
        for mode in report["modes"]
    ]
    settings = report["settings"]
    ramp = ", ".join(f"{rate:g}" for rate in RAMP)
    lines = [
        f"# spill_over, {report['started_at']}",
        "",
        f"Ramp {ramp}/s for {settings['step_seconds']:g} s each, {PEAK:g}/s for "
        f"{settings['peak_seconds']:g} s, {LOW:g}/s for {settings['step_seconds']:g} s; latency over the "
        "last half of the peak.",
        "",
        *markdown_table(
            ["mode", "requests", "failed", "peak measured", "p50 ms", "p99 ms", "% away", "p99 / home-only"],
            rows,
        ),
        "",
    ]
    path.write_text("\n".join(lines))


async def main(args: argparse.Namespace) -> int:
    started_at = datetime.now(UTC)
    modes = [await run_mode("home-only", args), await run_mode("spill-over", args)]
    for mode in modes:
        mode["p99_ratio_to_home_only"] = ratio(mode["peak_p99_ms"], modes[0]["peak_p99_ms"])
    report = report_head("spill_over", started_at) | {
        "settings": {"step_seconds": args.step_seconds, "peak_seconds": args.peak_seconds},
        "modes": modes,
    }
    json_path, markdown_path = write_report(args.results_dir, report, write_markdown)
    print(markdown_path.read_text())
    print(f"wrote {json_path} and {markdown_path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--step-seconds", type=float, default=10.0, help="length of each ramp step")
    parser.add_argument("--peak-seconds", type=float, default=90.0, help="length of the 200/s peak")
    add_results_dir_option(parser)
    return parser


if __name__ == "__main__":
    sys.exit(run_main(main(build_parser().parse_args()), interrupted="the spill-over benchmark"))
