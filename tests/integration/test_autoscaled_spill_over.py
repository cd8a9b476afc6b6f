"""Burst on demand on the development plane: the real HorizontalPodAutoscaler of kube-controller-manager
scales the demo's Offload by its pods' CPU (metrics-server), under a load ramp from 20 to 200 requests a
second and back. The overflow runs on the burst node and takes its share; a training Job at the peak
moves the whole service away and it spills over again afterwards; on the way down the away replicas go
first. Every request is accounted for.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from tests.integration.conftest import DEV_CLUSTER_GROUP, kubectl_for
from tests.integration.waiting import wait_for
from vk_devtools.demo.load import LoadGenerator, LoadSettings, Outcome, failures, share_by, window
from vk_devtools.devcluster import cluster, policydemo, traffic
from vk_provider.kit.kube import MERGE_PATCH, KubeApi
from vk_provider.offload.names import offload_path

pytestmark = DEV_CLUSTER_GROUP

AUTOSCALER = traffic.MANIFESTS / "examples" / "autoscaler.yaml"
SPILL_OVER = {"replicas": 2, "spillOver": {"maxHomeReplicas": 2, "maxAwayReplicas": 3}}
LOW_RATE, PEAK_RATE = 20.0, 200.0
RAMP_STEPS = (20.0, 65.0, 110.0, 155.0, 200.0)
RAMP_STEP_REQUESTS = 150
"""Requests sent at each rate of the ramp before the next one."""


@contextlib.asynccontextmanager
async def traffic_at(state: cluster.ClusterState, rate: float) -> AsyncIterator[LoadGenerator]:
    settings = LoadSettings(
        url=f"http://127.0.0.1:{state.ports['router']}",
        host_header=traffic.EXAMPLE_HOST,
        rate=rate,
        stream_share=0.0,
        stream_tokens=2,
    )
    async with LoadGenerator(settings) as generator:
        yield generator


class Timeline:
    """Replicas on each side and the weight, sampled once a second, for the record."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.samples: list[tuple[float, int, int, int]] = []
        """(seconds, home replicas, away replicas, away weight)."""

    def record(self, status: dict[str, Any]) -> None:
        spill = status.get("spillOver") or {}
        sample = (spill.get("homeReplicas", 0), spill.get("awayReplicas", 0), status.get("awayWeight", 0))
        if not self.samples or self.samples[-1][1:] != sample:
            self.samples.append((round(time.monotonic() - self.started, 1), *sample))

    async def follow(self, api: KubeApi) -> None:
        while True:
            self.record(await spill(api))
            await asyncio.sleep(1)  # a sampling period, not a wait for a condition (noqa: sleep-ok)


async def served(generator: LoadGenerator, since: float, count: int) -> bool:
    return len(window(generator.outcomes, since, time.monotonic())) >= count


async def send(state: cluster.ClusterState, rate: float, count: int) -> list[Outcome]:
    """`count` requests at `rate` a second: one step of the ramp."""
    async with traffic_at(state, rate) as generator:
        since = time.monotonic()
        await wait_for(
            lambda: served(generator, since, count), timeout_seconds=60, what=f"{count} requests at {rate}/s"
        )
    return generator.outcomes


async def spill(api: KubeApi) -> dict[str, Any]:
    status: dict[str, Any] = (await api.get(offload_path("default", traffic.EXAMPLE_NAME))).get(
        "status"
    ) or {}
    return status


def p99(outcomes: list[Outcome]) -> float:
    latencies = sorted(outcome.end - outcome.start for outcome in outcomes)
    return latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] if latencies else 0.0


async def ramp(state: cluster.ClusterState) -> str:
    api = await KubeApi.from_kubeconfig(str(state.kubeconfig))
    timeline = Timeline()
    follower = asyncio.create_task(timeline.follow(api))
    outcomes: list[Outcome] = []
    try:
        await api.patch(
            offload_path("default", traffic.EXAMPLE_NAME), {"spec": SPILL_OVER}, content_type=MERGE_PATCH
        )
        kubectl_for(state)("apply", "-f", str(AUTOSCALER))
        for rate in RAMP_STEPS:  # up
            outcomes += await send(state, rate, RAMP_STEP_REQUESTS)
        async with traffic_at(state, PEAK_RATE) as generator:  # the peak: until the overflow serves
            peak = time.monotonic()

            async def overflow_serves() -> bool:
                status = await spill(api)
                away = (status.get("spillOver") or {}).get("awayReadyReplicas", 0)
                return away >= 1 and status.get("awayWeight", 0) > 0

            await wait_for(overflow_serves, timeout_seconds=240, what="the autoscaler to spill over")
            spilled = time.monotonic()
            await wait_for(
                lambda: served(generator, spilled, 1000), timeout_seconds=60, what="peak load spilled over"
            )
            spilled_until = time.monotonic()
            out = io.StringIO()
            await policydemo.training_story(state, out)  # the whole service away, and back
            back = await spill(api)
            assert back["targetPlacement"] == "home", back
            await wait_for(overflow_serves, timeout_seconds=240, what="spilling over again after training")
        outcomes += generator.outcomes
        peak_outcomes = window(generator.outcomes, spilled, spilled_until)
        before = window(generator.outcomes, peak, spilled)
        sides = share_by(peak_outcomes, lambda by: (by or "").partition("/")[0])
        async with traffic_at(state, LOW_RATE) as generator:  # down: the away replicas go first

            async def home_only() -> bool:
                status = await spill(api)
                figures = status.get("spillOver") or {}
                return (figures.get("awayReplicas"), status.get("awayWeight")) == (0, 0)

            await wait_for(home_only, timeout_seconds=300, what="the autoscaler to give the overflow back")
        outcomes += generator.outcomes
        final = await spill(api)
        timeline.record(final)
        assert final["spillOver"]["homeReplicas"] == 2
    finally:
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follower
        await api.close()
    assert not failures(outcomes), [(o.status, o.failure) for o in failures(outcomes)[:10]]
    assert sides["burst-gpu"] > 0, sides
    report = (
        f"{len(outcomes)} requests, 0 failed; at the peak before spilling over: p99 "
        f"{p99(before) * 1000:.0f} ms over {len(before)}; spilled over: p99 "
        f"{p99(peak_outcomes) * 1000:.0f} ms over {len(peak_outcomes)}, served by {dict(sides)}; "
        f"replicas (s, home, away, weight): {timeline.samples}"
    )
    return report + "\n" + out.getvalue()


def test_an_autoscaler_spills_the_demo_over_under_a_load_ramp_and_gives_the_overflow_back(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "autoscaled"
    up = subprocess.run(
        [sys.executable, "-m", "vk_provider", "dev", "up", "--any-free-ports", "--dir", str(directory)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    try:
        assert up.returncode == 0, up.stderr
        state = cluster.ClusterState.load(directory)
        assert state is not None
        report = asyncio.run(ramp(state))
        print(report)
        hpa = json.loads(kubectl_for(state)("get", "hpa", traffic.EXAMPLE_NAME, "-o", "json").stdout)
        print(
            "autoscaler conditions:",
            [(c["type"], c["status"], c["reason"]) for c in hpa["status"]["conditions"]],
        )
    finally:
        subprocess.run(
            [sys.executable, "-m", "vk_provider", "dev", "down", "--dir", str(directory)],
            capture_output=True,
            timeout=300,
            check=False,
        )
