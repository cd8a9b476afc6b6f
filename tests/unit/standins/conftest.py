"""The SageMaker stand-in's fixtures: moto's server once per module, reset for each test, on a manual clock,
with the machine's own AWS settings kept away from every test here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from vk_devtools.standins.sagemaker import MotoSageMaker

from .sagemaker_support import ManualClock, isolate_from_ambient_aws


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
