"""`flip --wait --timeout DURATION`: waiting gives up after DURATION with one line saying where the
migration is (exit 1), and the migration goes on."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest

from tests.unit.offloadcli.test_status_watch import STEP, FakeApi, offload
from vk_provider.cli import build_offload_parser
from vk_provider.kit.kube import KubeApi
from vk_provider.offloadcli import commands


def test_flip_takes_a_timeout_as_a_duration() -> None:
    parsed = build_offload_parser().parse_args(
        ["flip", "chat", "--to", "away", "--wait", "--timeout", "1h30m"]
    )
    assert (parsed.wait, parsed.timeout) == (True, 5400)
    assert build_offload_parser().parse_args(["flip", "chat", "--to", "away"]).timeout is None


def test_a_bad_timeout_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_offload_parser().parse_args(["flip", "chat", "--to", "away", "--wait", "--timeout", "soon"])
    assert exited.value.code == 2
    problem = capsys.readouterr().err.rstrip("\n").rpartition("\n")[2]
    assert problem == (
        "kubectl offload flip: error: argument --timeout: 'soon' is not a timeout like 10m, 1h30m or 600"
    )


async def test_waiting_past_the_timeout_ends_with_one_line_saying_where_the_migration_is(
    capsys: pytest.CaptureFixture[str],
) -> None:
    patched = offload("Shifting", 50)
    patched["metadata"]["generation"] = 2
    api = FakeApi(patched, [])  # its watch never brings an ending

    async with asyncio.timeout(STEP):
        code = await commands.wait_for_end(cast(KubeApi, api), "ml", patched, "away", timeout_seconds=1)

    assert code == 1
    assert api.watch_closed
    out, error = capsys.readouterr()
    assert out == "offload chat: Shifting, away weight 50%, step 1/2\n"
    assert error == (
        "error: offload chat: the migration to away did not end within 1s: phase Shifting, away weight 50%, "
        "step 1/2; it goes on (`kubectl offload status chat -n ml --watch`)\n"
    )


async def test_without_a_timeout_the_wait_ends_with_the_migration() -> None:
    patched = offload("Shifting", 50)
    patched["metadata"]["generation"] = 2
    api = FakeApi(patched, [])
    ended = offload("Succeeded", 100, version=2)
    ended["status"]["observedGeneration"] = 2
    api.change(ended)
    async with asyncio.timeout(STEP):
        assert await commands.wait_for_end(cast(KubeApi, api), "ml", patched, "away") == 0
