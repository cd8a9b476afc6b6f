"""`vk-provider conformance`: the contract suite against an installed provider and against plugins,
with its report, its JUnit file and its exit code (0 only when nothing failed)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree

import pytest
import yaml

from tests.unit.providers.grpc.support import raw_plugin, socket_folder
from tests.unit.providers.runpod.support import provider_config as runpod_config
from tests.unit.providers.runpod.support import write_key
from tests.unit.providers.sagemaker.support import IMAGE as SAGEMAKER_IMAGE
from tests.unit.providers.sagemaker.support import provider_config as sagemaker_config
from tests.unit.providers.sagemaker.support import write_credentials
from vk_devtools.standins.runpod.standin import FakeRunPod
from vk_devtools.standins.sagemaker import MotoSageMaker
from vk_provider.plugin.v1 import provider_pb2 as pb
from vk_provider.provider import declares_ephemeral_workloads
from vk_providers.mock import MockProvider

KIT = [sys.executable, "-m", "vk_provider", "conformance"]


def kit(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*KIT, *arguments], cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )


def test_the_mock_passes_all_it_declares_and_the_report_says_what_was_skipped_and_why(tmp_path: Path) -> None:
    # No flag: the mock declares its workloads ephemeral, so the restart tests are skipped, not failed.
    junit = tmp_path / "report.xml"
    done = kit("--provider", "mock", "--junit", str(junit), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASSED" in done.stdout
    assert "not declared: the kit cannot know which pod this provider refuses for good" in done.stdout
    assert "the provider's workloads do not outlive the instance" in done.stdout
    suite = ElementTree.parse(junit).getroot().find("testsuite")  # noqa: S314 - our own report
    assert suite is not None
    assert (suite.get("failures"), suite.get("errors")) == ("0", "0")
    assert int(suite.get("tests", "0")) >= 16


def test_a_provider_that_breaks_the_contract_fails_the_kit_with_the_reason(tmp_path: Path) -> None:
    # The mock keeps its pods in memory: with its declaration overridden (claimed to outlive a restart),
    # it does not.
    done = kit("--provider", "mock", "--no-ephemeral-workloads", cwd=tmp_path)
    assert done.returncode == 1
    assert "FAILED" in done.stdout
    assert "test_list_after_a_restart_finds_every_pod" in done.stdout


@pytest.fixture
def local_plugin(tmp_path: Path) -> Iterator[str]:
    """`vk-provider plugin serve --provider local` on a unix socket; its address."""
    config = tmp_path / "local.yaml"
    config.write_text("address_range: 127.79.0.0/16\n")
    socket = Path(f"/tmp/vkp-kit-{tmp_path.name[-12:]}.sock")  # noqa: S108 - a short path for a socket
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vk_provider",
            "plugin",
            "serve",
            "--provider",
            "local",
            "--provider-config",
            str(config),
            "--node-name",
            "conformance-node",
            "--address",
            f"unix://{socket}",
            "--state-dir",
            str(tmp_path / "state"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield f"unix://{socket}"
    finally:
        process.terminate()
        process.wait(30)
        socket.unlink(missing_ok=True)


def test_a_python_served_plugin_passes_the_kit(local_plugin: str, tmp_path: Path) -> None:
    done = kit("--plugin", local_plugin, "--pod-command", "sleep 600", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "not declared: a plugin serves one node" in done.stdout
    passed = {line.rsplit("::", 1)[-1] for line in done.stdout.splitlines() if line.startswith("PASSED")}
    # What the local provider declares, checked through the plugin: status push and logs included.
    assert {
        "test_created_pod_runs_and_reports_itself",
        "test_list_after_a_restart_finds_every_pod",
        "test_concurrent_creates_and_deletes_leave_each_pod_once",
        "test_status_push_reports_a_created_pod",
        "test_logs_honour_limit_bytes_and_refuse_an_unknown_container",
    } <= passed, done.stdout


async def test_a_plugin_that_declares_what_it_does_not_implement_fails_the_kit(tmp_path: Path) -> None:
    async with (
        socket_folder() as sockets,
        raw_plugin(sockets / "liar", {"ListPods": pb.ListPodsResponse()}) as address,
    ):
        done = await asyncio.to_thread(kit, "--plugin", address, cwd=tmp_path)
    assert done.returncode == 1
    assert "does not implement CreatePod" in done.stdout


def test_the_local_provider_passes_the_kit_in_process(tmp_path: Path) -> None:
    config = tmp_path / "local.yaml"
    config.write_text("address_range: 127.80.0.0/16\n")
    done = kit(
        "--provider", "local", "--provider-config", str(config), "--pod-command", "sleep 600", cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    passed = {line.rsplit("::", 1)[-1] for line in done.stdout.splitlines() if line.startswith("PASSED")}
    # In-process, a second node is another instance: the listing test runs too.
    assert "test_list_gives_full_references_of_this_nodes_pods_only" in passed, done.stdout
    assert "test_list_after_a_restart_finds_every_pod" in passed, done.stdout


async def kit_beside(*arguments: str, cwd: Path) -> tuple[int, str]:
    """The kit in a child process while this loop goes on serving a stand-in."""
    process = await asyncio.create_subprocess_exec(
        *KIT, *arguments, cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    async with asyncio.timeout(300):
        output, _ = await process.communicate()
    assert process.returncode is not None
    return process.returncode, output.decode()


def passed_tests(report: str) -> set[str]:
    return {line.rsplit("::", 1)[-1] for line in report.splitlines() if line.startswith("PASSED")}


async def test_the_runpod_provider_passes_the_kit_on_its_stand_in(tmp_path: Path) -> None:
    async with FakeRunPod() as fake:
        config = tmp_path / "runpod.yaml"
        key = write_key(tmp_path / "runpod-key", fake.api_key)
        config.write_text(yaml.safe_dump(runpod_config(fake, key)))
        code, report = await kit_beside(
            "--provider", "runpod", "--provider-config", str(config), cwd=tmp_path
        )
    assert code == 0, report
    assert {
        "test_created_pod_runs_and_reports_itself",
        "test_list_after_a_restart_finds_every_pod",
        "test_logs_honour_limit_bytes_and_refuse_an_unknown_container",
    } <= passed_tests(report), report


async def test_the_sagemaker_provider_passes_the_kit_on_moto(tmp_path: Path) -> None:
    credentials = tmp_path / "aws-credentials"
    write_credentials(credentials)
    with MotoSageMaker() as moto:
        config = tmp_path / "sagemaker.yaml"
        config.write_text(yaml.safe_dump(sagemaker_config(moto, credentials)))
        code, report = await kit_beside(
            "--provider",
            "sagemaker",
            "--provider-config",
            str(config),
            "--pod-image",
            SAGEMAKER_IMAGE,
            cwd=tmp_path,
        )
    assert code == 0, report
    assert {
        "test_created_pod_runs_and_reports_itself",
        "test_list_after_a_restart_finds_every_pod",
        "test_concurrent_creates_and_deletes_leave_each_pod_once",
    } <= passed_tests(report), report


def test_only_a_true_ephemeral_workloads_attribute_is_a_declaration() -> None:
    class Stray:
        ephemeral_workloads = "yes"  # truthy, but not a declaration

    assert declares_ephemeral_workloads(MockProvider)
    assert not declares_ephemeral_workloads(object())
    assert not declares_ephemeral_workloads(Stray())
