"""`-o wide|name|json|yaml` on list, status, policy list and policy status."""

from __future__ import annotations

import argparse
import asyncio
import copy
import re
from collections.abc import Mapping
from typing import Any, cast

import pytest

from tests.unit.offloadcli.test_policy_commands import ListingApi, policy
from tests.unit.offloadcli.test_rendering import NOW, SHIFTING, sample
from tests.unit.offloadcli.test_status_watch import FakeApi, offload, soon
from vk_provider.cli import offload_main
from vk_provider.kit.kube import KubeApi
from vk_provider.offloadcli import commands, outputs, policy_commands, policy_rendering, rendering


class OffloadListApi:
    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items
        self.paths: list[str] = []

    async def get(self, path: str, *, query: Mapping[str, Any] | None = None) -> dict[str, Any]:
        self.paths.append(path)
        return {"kind": "OffloadList", "items": copy.deepcopy(self.items)}


def listing(output: str | None, *, all_namespaces: bool = False) -> argparse.Namespace:
    return argparse.Namespace(output=output, all_namespaces=all_namespaces)


async def test_list_as_names_prints_what_kubectl_get_o_name_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    api = OffloadListApi([sample("chat"), sample("embed")])
    assert await commands.run_list(cast(KubeApi, api), listing("name"), "ml") == 0
    assert capsys.readouterr().out.splitlines() == [
        "offload.offload.vk-provider.dev/chat",
        "offload.offload.vk-provider.dev/embed",
    ]
    # No names on stdout for an empty list: the note goes to stderr, as kubectl's does.
    assert await commands.run_list(cast(KubeApi, OffloadListApi([])), listing("name"), "ml") == 0
    assert capsys.readouterr() == ("", 'No offloads found in namespace "ml".\n')


def ready(status: str, reason: str) -> dict[str, Any]:
    return {"type": "Ready", "status": status, "reason": reason}


def test_wide_adds_data_plane_hosts_ready_with_its_reason_and_spill_over_replicas() -> None:
    conflicted = sample("chat", phase="Idle", conditions=[ready("False", "RouteConflict")])
    spilling = sample("embed", phase="Idle", conditions=[ready("True", "Reconciled")])
    spilling["spec"]["traffic"] = {"dataPlane": "envoy"}
    spilling["spec"]["route"] = {"pathPrefix": "/v1"}
    spilling["spec"]["spillOver"] = {"maxHomeReplicas": 2}
    spilling["status"]["spillOver"] = {"homeReplicas": 2, "awayReplicas": 3}

    table = rendering.render_list([conflicted, spilling], all_namespaces=True, now=NOW, wide=True)

    header, first, second = table.splitlines()
    assert re.split(" {2,}", header)[-6:] == [
        "DATA PLANE",
        "HOSTS",
        "READY",
        "REASON",
        "HOME REPLICAS",
        "AWAY REPLICAS",
    ]
    assert first.split()[0:2] == ["ml", "chat"]
    assert first.split()[-6:] == ["builtin", "chat.example.test", "False", "RouteConflict", "-", "-"]
    assert second.split()[-6:] == ["envoy", "*", "True", "-", "2", "3"]
    narrow = rendering.render_list([conflicted], all_namespaces=False, now=NOW)
    assert "DATA PLANE" not in narrow
    assert "RouteConflict" not in narrow


@pytest.mark.parametrize("output", ["json", "yaml"])
async def test_list_as_a_document_prints_the_whole_list(
    output: str, capsys: pytest.CaptureFixture[str]
) -> None:
    api = OffloadListApi([SHIFTING])
    assert await commands.run_list(cast(KubeApi, api), listing(output), "ml") == 0
    expected = rendering.render_document({"kind": "OffloadList", "items": [SHIFTING]}, output)
    assert capsys.readouterr().out == expected + "\n"


async def test_status_as_a_name_or_a_wide_row_and_again_on_each_change_with_watch(
    capsys: pytest.CaptureFixture[str],
) -> None:
    api = FakeApi(offload("Shifting", 50), [])
    arguments = argparse.Namespace(name="chat", watch=False, output="name")
    assert await commands.run_status(cast(KubeApi, api), arguments, "ml") == 0
    assert capsys.readouterr().out == "offload.offload.vk-provider.dev/chat\n"
    assert api.event_lists == []

    arguments = argparse.Namespace(name="chat", watch=True, output="wide")
    watching = asyncio.create_task(commands.run_status(cast(KubeApi, api), arguments, "ml"))
    api.change(offload("Shifting", 100, version=2))

    async def lines() -> list[str]:
        printed: list[str] = []
        while len(printed) < 3:
            await asyncio.sleep(0.01)  # the poll of a wait bounded by soon() (noqa: sleep-ok)
            printed += capsys.readouterr().out.splitlines()
        return printed

    header, first, second = await soon(lines())
    watching.cancel()
    await asyncio.wait({watching})
    assert header.startswith("NAME")
    assert "DATA PLANE" in header
    assert first.split()[:4] == ["chat", "away", "Shifting", "50%"]
    assert second.split()[:4] == ["chat", "away", "Shifting", "100%"]


async def test_policy_list_and_status_take_every_form(capsys: pytest.CaptureFixture[str]) -> None:
    unready = policy(conditions=[ready("False", "NoHomePool")])
    api = ListingApi({"items": [unready]})
    assert (
        await policy_commands.run_policy_list(cast(KubeApi, api), argparse.Namespace(output="name"), "") == 0
    )
    assert capsys.readouterr().out == "offloadpolicy.offload.vk-provider.dev/training-first\n"

    assert (
        await policy_commands.run_policy_list(cast(KubeApi, api), argparse.Namespace(output="wide"), "") == 0
    )
    header, row = capsys.readouterr().out.splitlines()
    assert header.split()[-3:] == ["SELECTOR", "RESOURCE", "REASON"]
    assert row.split()[-3:] == ["tier=inference", "nvidia.com/gpu", "NoHomePool"]

    shown = FakeApi(unready, [])
    arguments = argparse.Namespace(name="training-first", watch=False, output="wide")
    assert await policy_commands.run_policy_status(cast(KubeApi, shown), arguments, "") == 0
    assert capsys.readouterr().out == policy_rendering.render_policy_list([unready], wide=True) + "\n"


def test_render_one_repeats_without_the_header_and_yaml_as_a_new_document() -> None:
    kind = commands.offload_kind()
    first = outputs.render_one(SHIFTING, "wide", kind, repeat=False)
    again = outputs.render_one(SHIFTING, "wide", kind, repeat=True)
    assert first.splitlines()[1] == again
    assert outputs.render_one(SHIFTING, "yaml", kind, repeat=True).startswith("---\napiVersion: ")
    assert outputs.render_one(SHIFTING, "yaml", kind, repeat=False).startswith("apiVersion: ")


@pytest.mark.parametrize(
    "command", [["list"], ["status", "chat"], ["policy", "list"], ["policy", "status", "p"]]
)
def test_every_listing_or_showing_command_refuses_an_unknown_form(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        offload_main([*command, "-o", "table"])
    assert exited.value.code == 2
    assert "invalid choice: 'table' (choose from 'wide', 'name', 'json', 'yaml')" in capsys.readouterr().err
