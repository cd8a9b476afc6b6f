"""Fixtures: one moto server per test module (emptied before each test), the layer, a provider on both.

The machine's own AWS settings never reach a test: every AWS_* variable is removed, the shared files
point at nothing, and the instance metadata service is off.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.unit.standins.sagemaker_support import isolate_from_ambient_aws
from vk_devtools.standins.sagemaker import MotoSageMaker, SageMakerLayer
from vk_provider.provider import ProviderContext
from vk_providers.sagemaker import SageMakerProvider

from .support import (
    NODE,
    ManualClock,
    RecordedSleep,
    make_provider,
    provider_config,
    write_credentials,
)


@pytest.fixture(autouse=True)
def _no_ambient_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_from_ambient_aws(monkeypatch, tmp_path)


@pytest.fixture(scope="module")
def moto_server() -> Iterator[MotoSageMaker]:
    with MotoSageMaker() as server:
        yield server


@pytest.fixture
def moto(moto_server: MotoSageMaker) -> MotoSageMaker:
    moto_server.reset()
    return moto_server


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def layer(moto: MotoSageMaker, clock: ManualClock) -> SageMakerLayer:
    """moto plus SageMaker's behaviour, on the test's manual clock (statuses move when the test says)."""
    return SageMakerLayer(moto, clock=clock)


@pytest.fixture
def sleep() -> RecordedSleep:
    return RecordedSleep()


@pytest.fixture
async def provider(
    moto: MotoSageMaker, layer: SageMakerLayer, tmp_path: Path, clock: ManualClock, sleep: RecordedSleep
) -> AsyncIterator[SageMakerProvider]:
    subject = make_provider(moto, tmp_path, layer=layer, clock=clock, sleep=sleep)
    yield subject
    await subject.aclose()


@pytest.fixture
def context(moto: MotoSageMaker, tmp_path: Path) -> ProviderContext:
    """A provider's context whose pod Events a test reads (`context.pod_events.recorded`)."""
    credentials = write_credentials(tmp_path / "aws-credentials")
    return ProviderContext(NODE, provider_config(moto, credentials), "10.0.0.1", tmp_path)


@pytest.fixture
async def subject(
    context: ProviderContext, layer: SageMakerLayer, clock: ManualClock, sleep: RecordedSleep
) -> AsyncIterator[SageMakerProvider]:
    """The provider on `context`, through the layer."""
    provider = SageMakerProvider(context, clock=clock, sleep=sleep, client_hook=layer.install)
    yield provider
    await provider.aclose()
