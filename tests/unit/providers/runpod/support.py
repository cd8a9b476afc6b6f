"""Helpers for the runpod provider's tests: the fake's settings, pods, a manual clock, lookups."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vk_devtools.standins.runpod.standin import FakeRunPod
from vk_provider.provider import ContainerPort, ContainerSpec, PodRef, PodRequest, ProviderContext
from vk_providers.runpod import RunPodProvider

NODE = "runpod-test"
GPU = "NVIDIA GeForce RTX 4090"
IMAGE = "registry.example/llm-server:1"


class ManualClock:
    """The provider's clock (breaker, catalog cache): moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def write_key(path: Path, key: str) -> Path:
    path.write_text(key + "\n")
    return path


def provider_config(fake: FakeRunPod, key_file: Path, **overrides: Any) -> dict[str, Any]:
    return {
        "api_url": fake.api_url,
        "proxy_url_template": fake.proxy_url_template,
        "api_key_file": str(key_file),
        "gpu_type": GPU,
        "call_timeout_seconds": 2.0,
        "max_attempts": 3,
        "backoff_initial_seconds": 0.01,
        "backoff_max_seconds": 0.05,
        "max_retry_after_seconds": 5.0,
        "breaker_failure_threshold": 5,
        "breaker_open_seconds": 30.0,
        "log_idle_seconds": 0.3,
        **overrides,
    }


def make_provider(
    fake: FakeRunPod,
    state_dir: Path,
    *,
    clock: ManualClock | None = None,
    node_name: str = NODE,
    key_file: Path | None = None,
    **overrides: Any,
) -> RunPodProvider:
    key_file = key_file or write_key(state_dir / "runpod-key", fake.api_key)
    context = ProviderContext(node_name, provider_config(fake, key_file, **overrides), "10.0.0.1", state_dir)
    return RunPodProvider(context, clock=clock or ManualClock())


def pod_request(
    name: str,
    *,
    uid: str | None = None,
    node_name: str = NODE,
    image: str = IMAGE,
    ports: tuple[ContainerPort, ...] = (ContainerPort(8000, name="http"),),
    env: tuple[tuple[str, str], ...] = (("MODEL", "llama"),),
    args: tuple[str, ...] = (),
    gpus: str | None = None,
    annotations: Mapping[str, str] | None = None,
    containers: tuple[ContainerSpec, ...] | None = None,
) -> PodRequest:
    limits = {"nvidia.com/gpu": gpus} if gpus is not None else {}
    container = ContainerSpec(name="server", image=image, args=args, env=env, ports=ports, limits=limits)
    return PodRequest(
        ref=PodRef("default", name, uid or str(uuid.uuid4())),
        node_name=node_name,
        containers=containers if containers is not None else (container,),
        annotations=dict(annotations or {}),
    )


async def runpod_pods_of(fake: FakeRunPod, uid: str) -> list[dict[str, Any]]:
    """The fake's pods (as the API shows them) created for a pod UID."""
    return [pod for pod in await fake.control.pods() if pod["env"].get("VK_PROVIDER_POD_UID") == uid]


async def runpod_pod_of(fake: FakeRunPod, uid: str) -> dict[str, Any]:
    pods = await runpod_pods_of(fake, uid)
    assert len(pods) == 1, pods
    return pods[0]


async def requests_to(fake: FakeRunPod, method: str, path_prefix: str = "/v2/pods") -> list[dict[str, Any]]:
    return [
        request
        for request in await fake.control.requests()
        if request["method"] == method and request["path"].startswith(path_prefix)
    ]
