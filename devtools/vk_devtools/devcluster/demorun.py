"""`vk-provider dev demo`: the example service moved out to the burst node and back, under load.

What a user of the development cluster wants to see in one command: the example service serving at
home, a steady stream of short and streaming requests through the router, then, by default, the whole
product at work by itself: a training gang arrives needing every home GPU, the OffloadPolicy moves the
service out, reserves the home pool, the scheduler admits the gang and its pods all start together,
and when the Job is done the service comes home step by step (`policydemo`). With `--manual`, a person
does the moving instead: `kubectl offload flip --to away --wait`, then back. At the end, the count of
failed requests, which must be zero. Exits 1 if any request failed or a migration did not succeed.
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
from vk_devtools.devcluster import cluster, hints, kueuedemo, policydemo, traffic
from vk_devtools.devcluster.building import BuildError
from vk_devtools.devcluster.processes import ComponentFailedError
from vk_provider.kit.kubeversions import NATIVE_POD_GROUPS, KubernetesVersion

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


async def _moves(
    state: cluster.ClusterState, router_urls: list[str], out: TextIO, *, manual: bool, kueue: bool = False
) -> int:
    settings = LoadSettings(
        url=router_urls[0],
        more_urls=tuple(router_urls[1:]),
        host_header=traffic.EXAMPLE_HOST,
        rate=RATE,
        stream_share=0.3,
    )
    if not manual:
        # A person's flip in an earlier (manual) run holds the service against the policy: let go.
        print(f"\n$ kubectl offload auto on {traffic.EXAMPLE_NAME}", file=out, flush=True)
        if await _offload(state, "auto", "on", traffic.EXAMPLE_NAME) != EXIT_OK:
            return EXIT_FAILED
    began = time.monotonic()
    async with LoadGenerator(settings) as load:
        print(
            f"sending {RATE:.0f} requests/s (30% streaming) to {' and '.join(router_urls)} "
            f"with Host {traffic.EXAMPLE_HOST}",
            file=out,
            flush=True,
        )
        if manual:
            codes = await _flip_out_and_back(state, out)
        else:
            codes = [await _training_story(state, out, kueue=kueue)]
        sending = time.monotonic() - began
    print(f"\n$ kubectl offload status {traffic.EXAMPLE_NAME}", file=out, flush=True)
    await _offload(state, "status", traffic.EXAMPLE_NAME)
    print("\nload generator:", file=out)
    for line in final_summary(load.outcomes, load.issued, sending):
        print(f"  {line}", file=out)
    failed = failures(load.outcomes)
    if failed or any(code != EXIT_OK for code in codes):
        print(f"the demo FAILED: {len(failed)} failed requests, exit codes {codes}", file=out)
        return EXIT_FAILED
    print(f"the demo succeeded: {len(load.outcomes)} requests through two migrations, none failed", file=out)
    return EXIT_OK


async def _flip_out_and_back(state: cluster.ClusterState, out: TextIO) -> list[int]:
    codes = []
    for placement in ("away", "home"):
        print(
            f"\n$ kubectl offload flip {traffic.EXAMPLE_NAME} --to {placement} --wait", file=out, flush=True
        )
        codes.append(await _offload(state, "flip", traffic.EXAMPLE_NAME, "--to", placement, "--wait"))
        if codes[-1] != EXIT_OK:
            break
    return codes


async def _training_story(state: cluster.ClusterState, out: TextIO, *, kueue: bool = False) -> int:
    try:
        story = kueuedemo.kueue_story if kueue else policydemo.training_story
        timeline = await story(state, out)
    except policydemo.StageTimeout as error:
        print(f"error: {error}", file=out)
        await _offload(state, "policy", "status", policydemo.POLICY_NAME)
        return EXIT_FAILED
    print(f"\n$ kubectl offload policy status {policydemo.POLICY_NAME}", file=out, flush=True)
    await _offload(state, "policy", "status", policydemo.POLICY_NAME)
    marks = timeline.marks
    print(
        f"\ntraining Job created -> gang admitted: {marks['gang admitted']:.1f}s, all its pods bound: "
        f"{marks['training bound']:.1f}s; Job finished -> service home: "
        f"{marks['served home'] - marks['training done']:.1f}s",
        file=out,
    )
    return EXIT_OK


def _stopped(state: cluster.ClusterState, directory: Path) -> str | None:
    stopped = [name for name, running in state.running().items() if not running]
    if not stopped:
        return None
    restarts = "; ".join(f"`{hints.dev(directory, 'restart', name)}`" for name in stopped)
    return f"not running in {directory}: {', '.join(stopped)}; restart with {restarts}"


def _lacks_native_gangs(state: cluster.ClusterState) -> str | None:
    """Why the policy demo cannot run on this plane: its training gang is a native PodGroup
    (manifests/examples/training-job.yaml), which an older minor's apiserver does not serve."""
    gap = NATIVE_POD_GROUPS.unavailable(KubernetesVersion.parse(state.kubernetes_version))
    if gap is None:
        return None
    return (
        f"the policy demo's training gang is a native PodGroup: {gap}. On this plane run "
        "`dev demo --kueue` (a Kueue-queued Job) or `dev demo --manual` (flips by hand), or start the "
        "default plane (`dev up` without --kubernetes-version)"
    )


def run(directory: Path, *, manual: bool = False, kueue: bool = False, out: TextIO = sys.stdout) -> int:
    state = cluster.ClusterState.load(directory)
    if state is None or state.stopped or not state.has_demo:
        print(
            f"error: no demo cluster is running in {directory}; start it with `{hints.dev(directory, 'up')}`",
            file=out,
        )
        return EXIT_FAILED
    refusal = (None if manual or kueue else _lacks_native_gangs(state)) or _stopped(state, directory)
    if refusal:
        print(f"error: {refusal}", file=out)
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
    if kueue:
        try:
            state = kueuedemo.ensure_kueue(state, out)
        except (BuildError, ComponentFailedError, RuntimeError) as error:
            print(f"error: Kueue could not be started: {error}", file=out)
            return EXIT_FAILED
    try:
        router_urls = state.traffic_urls(timeout_seconds=READY_TIMEOUT_SECONDS)
    except RuntimeError as error:
        print(f"error: {error}", file=out)
        return EXIT_FAILED
    return asyncio.run(_moves(state, router_urls, out, manual=manual, kueue=kueue))
