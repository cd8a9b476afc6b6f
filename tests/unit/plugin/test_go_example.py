"""The plugin API in another language: the Go example plugin (examples/plugin-go), built here with the
Go toolchain from its pinned module, passes the conformance kit, and its generated code is current."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.plugin.goexample import EXAMPLE, build_go_plugin


@pytest.fixture(scope="module")
def go_plugin_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_go_plugin(tmp_path_factory.mktemp("go-plugin"))


@pytest.fixture
def go_plugin(go_plugin_binary: Path) -> Iterator[str]:
    """The Go plugin serving on a unix socket; its address."""
    folder = Path(tempfile.mkdtemp(prefix="vkp-go-"))  # a socket's path must be short
    socket = folder / "plugin.sock"
    process = subprocess.Popen(
        [str(go_plugin_binary), "--address", f"unix://{socket}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        yield f"unix://{socket}"
    finally:
        process.terminate()
        _, errors = process.communicate(timeout=30)
        socket.unlink(missing_ok=True)
        folder.rmdir()
        assert process.returncode in (0, -15), errors


def test_the_go_plugin_passes_the_conformance_kit(go_plugin: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "vk_provider", "conformance", "--plugin", go_plugin],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    passed = {line.rsplit("::", 1)[-1] for line in done.stdout.splitlines() if line.startswith("PASSED")}
    assert {
        "test_create_is_idempotent",
        "test_list_after_a_restart_finds_every_pod",
        "test_concurrent_creates_and_deletes_leave_each_pod_once",
        "test_status_push_reports_a_created_pod",
        "test_logs_honour_limit_bytes_and_refuse_an_unknown_container",
    } <= passed, done.stdout


def test_the_go_code_of_the_api_is_current(tmp_path: Path) -> None:
    subprocess.run(
        [str(EXAMPLE / "generate.sh"), str(tmp_path)],
        check=True,
        capture_output=True,
        timeout=600,
        env={**os.environ, "PYTHON": sys.executable},
    )
    for name in ("provider.pb.go", "provider_grpc.pb.go"):
        fresh = (tmp_path / "pluginv1" / name).read_text()
        committed = (EXAMPLE / "pluginv1" / name).read_text()
        assert fresh == committed, (
            f"examples/plugin-go/pluginv1/{name} is stale: run `make proto` and commit it"
        )
