"""A provider that cannot be built (no key file, bad settings) is reported on the Node and retried,
never a daemon exit: the Secret can be created later and the node starts without a restart."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

import pytest

from vk_provider import plugins
from vk_provider.kit.kube import KubeApi, KubeApiError
from vk_provider.node import nodeobject, providerstart
from vk_provider.node.settings import NodeSettings
from vk_provider.provider import PodLifecycle, ProviderContext
from vk_providers.runpod import RunPodProvider


class NodeApi:
    """A cluster with no Node at first: records the Node created, status patches and Events."""

    def __init__(self) -> None:
        self.node: dict[str, Any] | None = None
        self.status_patches: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []

    async def get(self, path: str, **_: Any) -> dict[str, Any]:
        if self.node is None:
            raise KubeApiError(404, "NotFound", 'nodes "n" not found')
        return self.node

    async def create(self, path: str, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        if body["kind"] == "Event":
            self.events.append(body)
            return body
        self.node = {**body, "metadata": {**body["metadata"], "uid": "node-uid"}}
        return self.node

    async def patch(self, path: str, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        assert path.endswith("/status")
        self.status_patches.append(body)
        assert self.node is not None
        self.node["status"] = body["status"]
        return self.node


def provider_condition(node: dict[str, Any]) -> dict[str, Any]:
    [condition] = [
        c for c in node["status"]["conditions"] if c["type"] == nodeobject.PROVIDER_AVAILABLE_CONDITION
    ]
    return condition


async def test_a_missing_key_file_is_reported_on_the_node_and_picked_up_once_it_appears(
    tmp_path: Path,
) -> None:
    key = tmp_path / "credentials" / "runpod-api-key"
    settings = NodeSettings(node_name="n", provider="runpod", retry_initial_seconds=0.01, no_taint=True)
    context = ProviderContext("n", {"api_key_file": str(key)}, "10.0.0.1", tmp_path / "state")
    api = NodeApi()
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        await asyncio.sleep(0.01)  # the stand-in for the backoff wait lets the Event out (noqa: sleep-ok)
        if len(waits) == 2:  # the Secret is created while the daemon waits
            key.parent.mkdir()
            key.write_text("rp_key\n")

    async with asyncio.timeout(10):
        provider = await providerstart.build_provider(settings, cast(KubeApi, api), context, sleep=sleep)
    try:
        assert len(waits) == 2
        assert waits[1] > 0
        assert api.node is not None
        ready = next(c for c in api.node["status"]["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "False"
        condition = provider_condition(api.node)
        assert (condition["status"], condition["reason"]) == ("False", "CredentialsMissing")
        assert str(key) in condition["message"]
        assert "existingSecret" in condition["message"]
        assert len(api.status_patches) == 1  # created once, then its status patched on the retry
        assert api.events
        assert {(e["type"], e["reason"]) for e in api.events} == {("Warning", "CredentialsMissing")}
        assert api.events[0]["involvedObject"]["uid"] == "node-uid"
    finally:
        await provider.aclose()
    assert isinstance(provider, PodLifecycle)


async def test_a_bad_setting_is_a_config_error_with_the_provider_s_words(tmp_path: Path) -> None:
    settings = NodeSettings(node_name="n", provider="mock", retry_initial_seconds=0.01)
    context = ProviderContext("n", {}, "10.0.0.1", tmp_path)
    api = NodeApi()
    attempts = 0

    def build(name: str, context: ProviderContext) -> PodLifecycle:
        nonlocal attempts
        attempts += 1
        if attempts < 3:
            raise ValueError("sagemaker provider: region 'mars-1' is not an AWS region")
        return plugins.build(name, context)

    async def no_wait(seconds: float) -> None:
        return None

    provider = await providerstart.build_provider(
        settings, cast(KubeApi, api), context, build=build, sleep=no_wait
    )
    await provider.aclose()
    assert attempts == 3
    assert api.node is not None
    condition = provider_condition(api.node)
    assert condition["reason"] == "ProviderConfigError"
    assert condition["message"] == "sagemaker provider: region 'mars-1' is not an AWS region"


async def test_a_provider_bug_is_not_retried(tmp_path: Path) -> None:
    def build(name: str, context: ProviderContext) -> PodLifecycle:
        raise RuntimeError("bug")

    with pytest.raises(RuntimeError, match="bug"):
        await providerstart.build_provider(
            NodeSettings(node_name="n"),
            cast(KubeApi, NodeApi()),
            ProviderContext("n", {}, "10.0.0.1", tmp_path),
            build=build,
        )


def test_a_missing_secret_re_raised_as_a_value_error_still_counts_as_credentials(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="runpod") as caught:
        RunPodProvider(ProviderContext("n", {"api_key_file": str(tmp_path / "absent")}, "h", tmp_path))
    assert providerstart.reason_for(caught.value) == "CredentialsMissing"
    assert providerstart.reason_for(ValueError("gpu_type is required")) == "ProviderConfigError"
