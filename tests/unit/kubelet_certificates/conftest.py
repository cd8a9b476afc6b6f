"""The test CA every serving-certificate test signs with, and its certificate as a file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.kubelet_certificates import SigningCa


@pytest.fixture(scope="module")
def ca() -> SigningCa:
    return SigningCa.create()


@pytest.fixture
def ca_file(tmp_path: Path, ca: SigningCa) -> Path:
    return ca.write(tmp_path / "ca.crt")
