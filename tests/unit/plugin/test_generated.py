"""The committed Python code of the plugin API is what protoc writes from the .proto (`make proto`)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[3]
PROTO = Path("vk_provider/plugin/v1/provider.proto")
GENERATED = ("provider_pb2.py", "provider_pb2.pyi")


def test_the_generated_code_is_current(tmp_path: Path) -> None:
    (tmp_path / PROTO.parent).mkdir(parents=True)
    shutil.copyfile(ROOT / PROTO, tmp_path / PROTO)
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", "-I", ".", "--python_out=.", "--pyi_out=.", str(PROTO)],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        timeout=120,
    )
    for name in GENERATED:
        fresh = (tmp_path / PROTO.parent / name).read_text()
        committed = (ROOT / PROTO.parent / name).read_text()
        assert fresh == committed, f"{PROTO.parent / name} is stale: run `make proto` and commit it"
