"""Two RunPod stand-ins with different price lists, as two members of a chain (two accounts, say)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from vk_devtools.standins.runpod.catalog import FakeGpuType
from vk_devtools.standins.runpod.standin import FakeRunPod

from ..runpod.support import provider_config, write_key

PRICEY_GPU_TYPES = (
    FakeGpuType("NVIDIA GeForce RTX 4090", "RTX 4090", 24, 0.59, 0.44, 8, 4, pool="ADA_24"),
    FakeGpuType("NVIDIA A100 80GB PCIe", "A100 PCIe", 80, 1.49, 1.09, 8, 8, pool="AMPERE_80"),
)
"""The second account's prices; the first has the stand-in's defaults (RTX 4090: 0.69 secure, 0.34
community; A100: 1.64, 1.19; H100: 2.99, secure only)."""


@pytest.fixture
async def cheap() -> AsyncIterator[FakeRunPod]:
    async with FakeRunPod(provisioning_seconds=0.02, starting_seconds=0.02) as server:
        yield server


@pytest.fixture
async def pricey() -> AsyncIterator[FakeRunPod]:
    async with FakeRunPod(
        provisioning_seconds=0.02, starting_seconds=0.02, gpu_types=PRICEY_GPU_TYPES
    ) as server:
        yield server


def runpod_member(name: str, fake: FakeRunPod, folder: Path, **overrides: Any) -> Mapping[str, Any]:
    """A `runpod` member of a chain, on `fake`; its key in a file of its own."""
    folder.mkdir(parents=True, exist_ok=True)
    key_file = write_key(folder / f"{name}-key", fake.api_key)
    config = provider_config(fake, key_file, breaker_open_seconds=0.2, **overrides)
    return {"name": name, "provider": "runpod", "config": config}
