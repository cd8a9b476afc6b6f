"""`vk-provider dev demo`: flip the example service out to the burst node and back, under load.

What a user of the development cluster wants to see in one command: the example service serving at
home, a steady stream of short and streaming requests through the router, `kubectl offload flip
--to away --wait` moving it step by step, the home Deployment scaled to 0, the flip back, and at the
end the count of failed requests, which must be zero. Exits 1 if any request failed or a migration
did not succeed.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TextIO

from vk_devtools.demo.load import LoadGenerator, LoadSettings, failures, final_summary
from vk_devtools.devcluster import cluster, hints, traffic
from vk_devtools.devcluster.ports import LOOPBACK

EXIT_OK = 0
EXIT_FAILED = 1
READY_TIMEOUT_SECONDS = 180
RATE = 40.0


def _kubectl(state: cluster.ClusterState, *arguments: str) -> subprocess.CompletedProcess[str]:
    command = [str(state.bin_dir / "kubectl"), f"--kubeconfig={state.kubeconfig}", *arguments]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=READY_TIMEOUT_SECONDS + 30, check=False
    )


async def _offload(state: cluster.ClusterState, *arguments: str) -> int:
    """Run `kubectl offload ...` (the same code as the kubectl plugin), its output shown as it comes."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "vk_provider",
        "migrate",
        *arguments,
        "--kubeconfig",
        str(state.kubeconfig),
        env={**os.environ, "KUBECONFIG": str(state.kubeconfig)},
    )
    return await process.wait()


async def _flip_out_and_back(state: cluster.ClusterState, router_url: str, out: TextIO) -> int:
    settings = LoadSettings(url=router_url, host_header=traffic.EXAMPLE_HOST, rate=RATE, stream_share=0.3)
    began = time.monotonic()
    async with LoadGenerator(settings) as load:
        print(
            f"sending {RATE:.0f} requests/s (30% streaming) to {router_url} with Host {traffic.EXAMPLE_HOST}",
            file=out,
            flush=True,
        )
        codes = []
        for placement in ("away", "home"):
            print(
                f"\n$ kubectl offload flip {traffic.EXAMPLE_NAME} --to {placement} --wait",
                file=out,
                flush=True,
            )
            codes.append(await _offload(state, "flip", traffic.EXAMPLE_NAME, "--to", placement, "--wait"))
            if codes[-1] != EXIT_OK:
                break
        sending = time.monotonic() - began
    print(f"\n$ kubectl offload status {traffic.EXAMPLE_NAME}", file=out, flush=True)
    await _offload(state, "status", traffic.EXAMPLE_NAME)
    print("\nload generator:", file=out)
    for line in final_summary(load.outcomes, load.issued, sending):
        print(f"  {line}", file=out)
    failed = failures(load.outcomes)
    if failed or any(code != EXIT_OK for code in codes):
        print(f"the demo FAILED: {len(failed)} failed requests, flip exit codes {codes}", file=out)
        return EXIT_FAILED
    print(f"the demo succeeded: {len(load.outcomes)} requests through two migrations, none failed", file=out)
    return EXIT_OK


def run(directory: Path, *, out: TextIO = sys.stdout) -> int:
    state = cluster.ClusterState.load(directory)
    if state is None or state.stopped or state.record("router") is None:
        print(
            f"error: no demo cluster is running in {directory}; start it with `{hints.dev(directory, 'up')}`",
            file=out,
        )
        return EXIT_FAILED
    stopped = [name for name, running in state.running().items() if not running]
    if stopped:
        restarts = "; ".join(f"`{hints.dev(directory, 'restart', name)}`" for name in stopped)
        print(f"error: not running in {directory}: {', '.join(stopped)}; restart with {restarts}", file=out)
        return EXIT_FAILED
    rollout = _kubectl(
        state,
        "rollout",
        "status",
        f"deployment/{traffic.EXAMPLE_NAME}",
        f"--timeout={READY_TIMEOUT_SECONDS}s",
    )
    if rollout.returncode != 0:
        print(f"error: the example service did not become ready: {rollout.stderr.strip()}", file=out)
        return EXIT_FAILED
    router_url = f"http://{LOOPBACK}:{state.ports['router']}"
    return asyncio.run(_flip_out_and_back(state, router_url, out))
