"""GET /stats/summary and GET /metrics/resource, built from the provider's usage."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import pytest

from vk_provider.errors import TemporaryProviderError
from vk_provider.kubelet.stats import CpuRateCache, format_go_float
from vk_provider.provider import ContainerUsage, PodRef, ProviderContext
from vk_providers.mock import MockProvider

from . import NODE, START, BareProvider, FakeClock, kubelet_client, pod_json, request_of, running_mock

TRIO = pod_json("trio", "a", "b", "c")
WEB = pod_json("web", "app", "sidecar")
BATCH = pod_json("batch", "main", namespace="jobs")
MIB = 1024 * 1024


async def test_the_summary_has_one_entry_per_container_of_a_three_container_pod(tmp_path: Path) -> None:
    clock = FakeClock()
    provider = await running_mock(tmp_path, clock, TRIO)
    clock.advance(10)
    async with kubelet_client(provider, [TRIO], clock=clock) as client:
        response = await client.get("/stats/summary")
        assert response.status == 200
        summary = await response.json()
    assert summary["node"] == {
        "nodeName": "vk-test",
        "startTime": "2024-01-01T00:00:00Z",
        "cpu": {"time": "2024-01-02T03:04:15Z", "usageCoreNanoSeconds": 3_000_000_000},
        "memory": {"time": "2024-01-02T03:04:15Z", "usageBytes": 192 * MIB, "workingSetBytes": 192 * MIB},
    }
    [pod] = summary["pods"]
    assert pod["podRef"] == {"name": "trio", "namespace": "default", "uid": "uid-default-trio"}
    assert pod["startTime"] == "2024-01-02T03:04:05Z"
    assert [container["name"] for container in pod["containers"]] == ["a", "b", "c"]
    assert pod["containers"][0] == {
        "name": "a",
        "startTime": "2024-01-02T03:04:05Z",
        "cpu": {"time": "2024-01-02T03:04:15Z", "usageCoreNanoSeconds": 1_000_000_000},
        "memory": {"time": "2024-01-02T03:04:15Z", "usageBytes": 64 * MIB, "workingSetBytes": 64 * MIB},
    }
    assert pod["cpu"] == {"time": "2024-01-02T03:04:15Z", "usageCoreNanoSeconds": 3_000_000_000}
    assert pod["memory"] == {
        "time": "2024-01-02T03:04:15Z",
        "usageBytes": 192 * MIB,
        "workingSetBytes": 192 * MIB,
    }


async def test_usage_nano_cores_is_the_rate_between_two_summaries(tmp_path: Path) -> None:
    clock = FakeClock()
    provider = await running_mock(tmp_path, clock, TRIO)
    async with kubelet_client(provider, [TRIO], clock=clock) as client:
        first = await (await client.get("/stats/summary")).json()
        clock.advance(4)
        second = await (await client.get("/stats/summary")).json()
    assert "usageNanoCores" not in first["pods"][0]["containers"][0]["cpu"]
    assert "usageNanoCores" not in first["pods"][0]["cpu"]
    assert [container["cpu"]["usageNanoCores"] for container in second["pods"][0]["containers"]] == [
        100_000_000
    ] * 3
    assert second["pods"][0]["cpu"]["usageNanoCores"] == 300_000_000
    assert second["node"]["cpu"]["usageNanoCores"] == 300_000_000


async def test_the_summary_leaves_out_finished_pods_and_pods_the_provider_does_not_hold(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    provider = await running_mock(tmp_path, clock, WEB, BATCH)
    done = pod_json("done", phase="Succeeded")
    pending = pod_json("pending")  # bound, but not created at the provider yet
    async with kubelet_client(provider, [WEB, done, pending, BATCH], clock=clock) as client:
        summary = await (await client.get("/stats/summary")).json()
    assert [(pod["podRef"]["namespace"], pod["podRef"]["name"]) for pod in summary["pods"]] == [
        ("default", "web"),
        ("jobs", "batch"),
    ]


async def test_usage_endpoints_are_a_501_for_a_provider_without_usage() -> None:
    async with kubelet_client(BareProvider(), [WEB]) as client:
        for path in ("/stats/summary", "/metrics/resource"):
            response = await client.get(path)
            assert response.status == 501
            assert await response.text() == 'the provider of node "vk-test" reports no usage'


async def test_resource_metrics_are_the_kubelets_text_with_labels_namespace_pod_container(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    provider = await running_mock(tmp_path, clock, WEB, BATCH)
    clock.advance(12.345)
    async with kubelet_client(provider, [WEB, BATCH], clock=clock) as client:
        response = await client.get("/metrics/resource")
        assert response.status == 200
        assert response.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        text = await response.text()
    at, started = 1704164657345, 1704164645000  # ms: the sample's time, the containers' start
    app = '{namespace="default",pod="web",container="app"}'
    sidecar = '{namespace="default",pod="web",container="sidecar"}'
    main = '{namespace="jobs",pod="batch",container="main"}'
    web, batch = '{namespace="default",pod="web"}', '{namespace="jobs",pod="batch"}'
    scrape_help = "1 if there was an error while getting container metrics, 0 otherwise"
    assert text == (
        "# HELP container_cpu_usage_seconds_total [STABLE] "
        "Cumulative cpu time consumed by the container in core-seconds\n"
        "# TYPE container_cpu_usage_seconds_total counter\n"
        f"container_cpu_usage_seconds_total{app} 1.2345 {at}\n"
        f"container_cpu_usage_seconds_total{sidecar} 1.2345 {at}\n"
        f"container_cpu_usage_seconds_total{main} 1.2345 {at}\n"
        "# HELP container_memory_working_set_bytes [STABLE] Current working set of the container in bytes\n"
        "# TYPE container_memory_working_set_bytes gauge\n"
        f"container_memory_working_set_bytes{app} 6.7108864e+07 {at}\n"
        f"container_memory_working_set_bytes{sidecar} 6.7108864e+07 {at}\n"
        f"container_memory_working_set_bytes{main} 6.7108864e+07 {at}\n"
        "# HELP container_start_time_seconds [STABLE] "
        "Start time of the container since unix epoch in seconds\n"
        "# TYPE container_start_time_seconds gauge\n"
        f"container_start_time_seconds{app} 1.704164645e+09 {started}\n"
        f"container_start_time_seconds{sidecar} 1.704164645e+09 {started}\n"
        f"container_start_time_seconds{main} 1.704164645e+09 {started}\n"
        "# HELP node_cpu_usage_seconds_total [STABLE] "
        "Cumulative cpu time consumed by the node in core-seconds\n"
        "# TYPE node_cpu_usage_seconds_total counter\n"
        f"node_cpu_usage_seconds_total 3.7035 {at}\n"
        "# HELP node_memory_working_set_bytes [STABLE] Current working set of the node in bytes\n"
        "# TYPE node_memory_working_set_bytes gauge\n"
        f"node_memory_working_set_bytes 2.01326592e+08 {at}\n"
        "# HELP pod_cpu_usage_seconds_total [STABLE] "
        "Cumulative cpu time consumed by the pod in core-seconds\n"
        "# TYPE pod_cpu_usage_seconds_total counter\n"
        f"pod_cpu_usage_seconds_total{web} 2.469 {at}\n"
        f"pod_cpu_usage_seconds_total{batch} 1.2345 {at}\n"
        "# HELP pod_memory_working_set_bytes [STABLE] Current working set of the pod in bytes\n"
        "# TYPE pod_memory_working_set_bytes gauge\n"
        f"pod_memory_working_set_bytes{web} 1.34217728e+08 {at}\n"
        f"pod_memory_working_set_bytes{batch} 6.7108864e+07 {at}\n"
        f"# HELP resource_scrape_error [STABLE] {scrape_help}\n"
        "# TYPE resource_scrape_error gauge\n"
        "resource_scrape_error 0\n"
        f"# HELP scrape_error [ALPHA] {scrape_help}\n"
        "# TYPE scrape_error gauge\n"
        "scrape_error 0\n"
    )


class FailingFor(MockProvider):
    """The mock, except that usage of the pods named in `failing` raises."""

    def __init__(self, context: ProviderContext, clock: FakeClock, failing: set[str]) -> None:
        super().__init__(context, clock=clock)
        self.failing = failing

    async def usage(self, ref: PodRef) -> Sequence[ContainerUsage]:
        if ref.name in self.failing:
            raise TemporaryProviderError("usage backend timed out")
        return await super().usage(ref)


async def test_a_failed_usage_call_sets_scrape_error_and_leaves_out_that_pods_series(tmp_path: Path) -> None:
    clock = FakeClock()
    context = ProviderContext(node_name=NODE, config={}, host_ip="10.0.0.1", state_dir=tmp_path)
    provider = FailingFor(context, clock, failing={"web"})
    for pod in (WEB, BATCH):
        await provider.create_pod(request_of(pod))
    async with kubelet_client(provider, [WEB, BATCH], clock=clock) as client:
        text = await (await client.get("/metrics/resource")).text()
        summary = await (await client.get("/stats/summary")).json()
    assert 'pod="web"' not in text
    assert 'pod_cpu_usage_seconds_total{namespace="jobs",pod="batch"} 0 1704164645000' in text
    assert "\nscrape_error 1\n" in text
    assert "\nresource_scrape_error 1\n" in text
    web = next(pod for pod in summary["pods"] if pod["podRef"]["name"] == "web")
    assert web == {
        "podRef": {"name": "web", "namespace": "default", "uid": "uid-default-web"},
        "startTime": "2024-01-02T03:04:05Z",
        "containers": [],
    }
    assert summary["node"]["memory"]["workingSetBytes"] == 64 * MIB  # the batch pod only


async def test_label_values_are_escaped(tmp_path: Path) -> None:
    clock = FakeClock()
    odd = pod_json("web", 'we"ird\\name')
    provider = await running_mock(tmp_path, clock, odd)
    async with kubelet_client(provider, [odd], clock=clock) as client:
        text = await (await client.get("/metrics/resource")).text()
    assert 'container="we\\"ird\\\\name"} 0 1704164645000\n' in text


async def test_a_node_without_pods_reports_zero_usage(tmp_path: Path) -> None:
    clock = FakeClock()
    provider = await running_mock(tmp_path, clock)
    async with kubelet_client(provider, [], clock=clock) as client:
        text = await (await client.get("/metrics/resource")).text()
        summary = await (await client.get("/stats/summary")).json()
    assert text.startswith("# HELP node_cpu_usage_seconds_total")
    assert "node_cpu_usage_seconds_total 0 1704164645000\n" in text
    assert summary["pods"] == []
    assert summary["node"]["cpu"] == {
        "time": "2024-01-02T03:04:05Z",
        "usageNanoCores": 0,
        "usageCoreNanoSeconds": 0,
    }


def test_the_rate_cache_starts_over_when_a_counter_goes_backwards_and_repeats_for_an_old_sample() -> None:
    cache = CpuRateCache()
    key = ("uid", "app")
    assert cache.nano_cores(key, START, 1_000) is None
    assert cache.nano_cores(key, START + timedelta(seconds=2), 1_000 + 1_000_000_000) == 500_000_000
    assert cache.nano_cores(key, START + timedelta(seconds=2), 5_000_000_000) == 500_000_000  # not newer
    assert cache.nano_cores(key, START + timedelta(seconds=3), 10) is None  # restarted
    assert cache.nano_cores(key, START + timedelta(seconds=4), 250_000_010) == 250_000_000


def test_the_rate_cache_forgets_containers_that_are_gone() -> None:
    cache = CpuRateCache()
    cache.nano_cores(("gone", "app"), START, 0)
    cache.nano_cores(("kept", "app"), START, 0)
    cache.keep_only({("kept", "app")})
    later = START + timedelta(seconds=1)
    assert cache.nano_cores(("gone", "app"), later, 10) is None
    assert cache.nano_cores(("kept", "app"), later, 10) == 10


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0"),
        (1.0, "1"),
        (1.23, "1.23"),
        (123456.0, "123456"),
        (1234567.0, "1.234567e+06"),
        (67108864.0, "6.7108864e+07"),
        (0.0001, "0.0001"),
        (0.00001234, "1.234e-05"),
        (-2.5, "-2.5"),
        (float("inf"), "+Inf"),
        (float("-inf"), "-Inf"),
        (float("nan"), "NaN"),
    ],
)
def test_numbers_are_written_as_gos_text_encoder_writes_them(value: float, text: str) -> None:
    assert format_go_float(value) == text
