"""Trailing slashes as the kubelet treats them: the same answer with and without one where the kubelet
gives it, a redirect for `/runningpods`, and a 404 where the kubelet has no such path."""

from __future__ import annotations

from pathlib import Path

import pytest

from . import BareProvider, FakeClock, kubelet_client, pod_json, running_mock

pytestmark = pytest.mark.unit

WEB = pod_json("web", "app")


@pytest.mark.parametrize("path", ["/pods", "/pods/"])
async def test_pods_answers_with_and_without_a_trailing_slash(path: str) -> None:
    async with kubelet_client(BareProvider(), [WEB]) as client:
        response = await client.get(path)
        assert response.status == 200
        assert [pod["metadata"]["name"] for pod in (await response.json())["items"]] == ["web"]


@pytest.mark.parametrize("slash", ["", "/"])
async def test_usage_answers_with_and_without_a_trailing_slash(slash: str, tmp_path: Path) -> None:
    clock = FakeClock()
    provider = await running_mock(tmp_path, clock, WEB)
    async with kubelet_client(provider, [WEB], clock=clock) as client:
        summary = await client.get(f"/stats/summary{slash}")
        assert summary.status == 200
        assert (await summary.json())["node"]["nodeName"]
        metrics = await client.get(f"/metrics/resource{slash}")
        assert metrics.status == 200
        assert "container_cpu_usage_seconds_total" in await metrics.text()


async def test_runningpods_is_redirected_to_the_path_with_a_slash_keeping_the_query() -> None:
    async with kubelet_client(BareProvider(), [WEB]) as client:
        response = await client.get("/runningpods?verbose=1", allow_redirects=False)
        assert response.status == 307
        assert response.headers["Location"] == "/runningpods/?verbose=1"
        followed = await client.get("/runningpods")
        assert followed.status == 200
        assert followed.url.path == "/runningpods/"


@pytest.mark.parametrize("path", ["/healthz/", "/metrics/", "/stats/", "/runningpods//"])
async def test_paths_the_kubelet_answers_404_stay_404(path: str) -> None:
    async with kubelet_client(BareProvider(), [WEB]) as client:
        assert (await client.get(path, allow_redirects=False)).status == 404
