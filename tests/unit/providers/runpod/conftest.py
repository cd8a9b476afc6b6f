"""Fixtures: a fresh fake RunPod per test, and a provider pointed at it (closed after the test)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from vk_devtools.standins.runpod.standin import FakeRunPod
from vk_providers.runpod import RunPodProvider

from .support import ManualClock, make_provider


@pytest.fixture
async def fake() -> AsyncIterator[FakeRunPod]:
    async with FakeRunPod(provisioning_seconds=0.05, starting_seconds=0.05) as server:
        yield server


@pytest.fixture
async def held_fake() -> AsyncIterator[FakeRunPod]:
    """A fake whose pods stay PROVISIONING until a test moves them."""
    async with FakeRunPod(auto_advance=False) as server:
        yield server


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def provider(fake: FakeRunPod, tmp_path: Path, clock: ManualClock) -> AsyncIterator[RunPodProvider]:
    subject = make_provider(fake, tmp_path, clock=clock)
    yield subject
    await subject.aclose()
