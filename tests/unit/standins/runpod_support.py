"""Helpers for the RunPod stand-in's tests: requests with the fake's key, waiting on a condition."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import aiohttp
from multidict import CIMultiDictProxy

from vk_devtools.standins.runpod.standin import FakeRunPod

T = TypeVar("T")

GPU = "NVIDIA GeForce RTX 4090"
"""$0.69 an hour in the secure cloud, pool ADA_24 (the stand-in's default catalog)."""
A100 = "NVIDIA A100 80GB PCIe"
"""$1.64 an hour in the secure cloud, pool AMPERE_80."""


def pod_body(gpu: str = GPU, **changes: Any) -> dict[str, Any]:
    return {
        "name": "x",
        "image": "vllm/vllm-openai:v0.11",
        "gpu": {"id": gpu},
        "ports": ["8000/http"],
        **changes,
    }


async def call(
    session: aiohttp.ClientSession, fake: FakeRunPod, method: str, path: str, body: Any = None
) -> tuple[int, CIMultiDictProxy[str], Any]:
    """An API request with the fake's key: status, headers and the JSON body (None if empty)."""
    headers = {"Authorization": f"Bearer {fake.api_key}"}
    async with session.request(method, fake.api_url + path, headers=headers, json=body) as response:
        text = await response.text()
        return response.status, response.headers, json.loads(text) if text else None


async def eventually(check: Callable[[], Awaitable[T | None]], *, timeout_seconds: float = 10.0) -> T:
    """Call `check` until it returns something other than None (a condition wait, bounded)."""
    async with asyncio.timeout(timeout_seconds):
        while True:
            result = await check()
            if result is not None:
                return result
            await asyncio.sleep(0.005)  # a bounded poll of a condition (noqa: sleep-ok)
