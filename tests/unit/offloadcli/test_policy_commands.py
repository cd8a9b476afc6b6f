"""The commands for the OffloadPolicies, against fakes of the apiserver: a person's flip writes its hold
in the same single patch as the placement, `auto` writes its annotation, and `policy list|status
[--watch]` read the cluster-scoped policy and draw it (again on each change, until interrupted)."""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
from collections.abc import Mapping
from typing import Any, cast

import pytest

from tests.unit.offloadcli.test_status_watch import FakeApi, Timer, soon
from vk_provider.kit.kube import KubeApi, KubeApiError
from vk_provider.offloadcli import commands, policy_commands, running
from vk_provider.policy.names import (
    AUTO_ANNOTATION,
    FLIPPED_BY_ANNOTATION,
    HOLD_UNTIL_ANNOTATION,
    policies_path,
)

POLICY_PATH = "/apis/offload.vk-provider.dev/v1alpha1/offloadpolicies"


class PatchingApi:
    """An Offload to read, and every patch written to it, in order."""

    def __init__(self, current: dict[str, Any]) -> None:
        self.current = current
        self.patches: list[tuple[str, dict[str, Any], str | None]] = []

    async def get(self, path: str, *, query: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return copy.deepcopy(self.current)

    async def patch(
        self, path: str, body: dict[str, Any], *, content_type: str | None = None
    ) -> dict[str, Any]:
        self.patches.append((path, copy.deepcopy(body), content_type))
        metadata = self.current["metadata"]
        annotations = {
            **(metadata.get("annotations") or {}),
            **body.get("metadata", {}).get("annotations", {}),
        }
        metadata["annotations"] = {key: value for key, value in annotations.items() if value is not None}
        self.current["spec"] = {**self.current["spec"], **body.get("spec", {})}
        return copy.deepcopy(self.current)


def offload(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "chat",
            "namespace": "ml",
            "resourceVersion": "7",
            "annotations": annotations or {},
        },
        "spec": {"placement": "home"},
        "status": {"phase": "Idle"},
    }


def flip(hold: int | None) -> argparse.Namespace:
    return argparse.Namespace(
        name="chat", to="away", steps=None, interval=None, save=False, wait=False, hold=hold
    )


async def test_a_flip_with_a_hold_is_one_patch_of_placement_and_annotations(
    capsys: pytest.CaptureFixture[str],
) -> None:
    api = PatchingApi(offload())

    assert await commands.run_flip(cast(KubeApi, api), flip(7200), "ml") == 0

    [(path, body, content_type)] = api.patches
    assert path == "/apis/offload.vk-provider.dev/v1alpha1/namespaces/ml/offloads/chat"
    assert content_type == "application/merge-patch+json"
    assert body["spec"] == {"placement": "away"}
    annotations = body["metadata"]["annotations"]
    assert annotations[FLIPPED_BY_ANNOTATION] == "person"
    assert annotations[HOLD_UNTIL_ANNOTATION].endswith("Z")
    assert body["metadata"]["resourceVersion"] == "7"  # checked against the read, like every flip
    out = capsys.readouterr().out
    assert "offload chat: placement set to away" in out
    assert f"OffloadPolicies leave it alone until {annotations[HOLD_UNTIL_ANNOTATION]} (" in out


async def test_a_flip_without_a_hold_holds_until_the_next_flip(capsys: pytest.CaptureFixture[str]) -> None:
    api = PatchingApi(offload({HOLD_UNTIL_ANNOTATION: "2026-01-01T00:00:00Z"}))

    assert await commands.run_flip(cast(KubeApi, api), flip(None), "ml") == 0

    assert api.patches[0][1]["metadata"]["annotations"][HOLD_UNTIL_ANNOTATION] == "next-flip"
    assert "OffloadPolicies leave it alone until the next flip by a person" in capsys.readouterr().out


async def test_an_abort_by_a_person_holds_like_a_flip(capsys: pytest.CaptureFixture[str]) -> None:
    running = offload()
    running["spec"]["placement"] = "away"
    running["status"] = {"phase": "Shifting", "targetPlacement": "away", "awayWeight": 25}
    api = PatchingApi(running)

    assert await commands.run_abort(cast(KubeApi, api), argparse.Namespace(name="chat"), "ml") == 0

    [(_, body, _)] = api.patches
    assert body["spec"] == {"placement": "home"}
    assert body["metadata"]["annotations"] == {
        HOLD_UNTIL_ANNOTATION: "next-flip",
        FLIPPED_BY_ANNOTATION: "person",
    }
    assert "until the next flip by a person" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("state", "written", "said"),
    [
        (
            "off",
            {AUTO_ANNOTATION: "off"},
            "auto off; no OffloadPolicy moves it until `kubectl offload auto on",
        ),
        ("on", {AUTO_ANNOTATION: "on", HOLD_UNTIL_ANNOTATION: None}, "auto on; an OffloadPolicy"),
    ],
)
async def test_auto_writes_its_annotation_and_on_removes_the_hold(
    state: str, written: dict[str, Any], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    api = PatchingApi(offload({HOLD_UNTIL_ANNOTATION: "next-flip"}))

    arguments = argparse.Namespace(name="chat", state=state)
    assert await commands.run_auto(cast(KubeApi, api), arguments, "ml") == 0

    assert [body for _, body, _ in api.patches] == [{"metadata": {"annotations": written}}]
    assert said in capsys.readouterr().out
    assert (HOLD_UNTIL_ANNOTATION in api.current["metadata"]["annotations"]) == (state == "off")


def policy(version: int = 1, **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "offload.vk-provider.dev/v1alpha1",
        "kind": "OffloadPolicy",
        "metadata": {"name": "training-first", "resourceVersion": str(version), "generation": 1},
        "spec": {"offloads": {"selector": {"matchLabels": {"tier": "inference"}}}},
        "status": status,
    }


def status_arguments(*, watch: bool = False, output: str | None = None) -> argparse.Namespace:
    return argparse.Namespace(name="training-first", watch=watch, output=output)


def start_watch(api: FakeApi, timer: Timer, *, interactive: bool) -> asyncio.Task[int]:
    arguments = status_arguments(watch=True)
    return asyncio.create_task(
        policy_commands.run_policy_status(
            cast(KubeApi, api), arguments, "", sleep=timer.sleep, interactive=interactive
        )
    )


def policy_event(reason: str, version: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"training-first.{version}",
            "uid": f"event-{version}",
            "resourceVersion": str(version),
        },
        "involvedObject": {"kind": "OffloadPolicy", "name": "training-first"},
        "type": "Normal",
        "reason": reason,
        "message": f"{reason} message",
        "lastTimestamp": "2026-12-03T15:59:00Z",
    }


async def test_policy_status_reads_the_cluster_scoped_policy_and_its_events(
    capsys: pytest.CaptureFixture[str],
) -> None:
    api = FakeApi(policy(demand={"gpus": 6, "gangs": []}), [policy_event("FlipOutStarted", 1)])

    assert await policy_commands.run_policy_status(cast(KubeApi, api), status_arguments(), "ignored") == 0

    assert policies_path("training-first") == f"{POLICY_PATH}/training-first"
    assert api.requests == [
        (policies_path("training-first"), {}),
        (
            "/api/v1/namespaces/default/events",
            {"fieldSelector": "involvedObject.kind=OffloadPolicy,involvedObject.name=training-first"},
        ),
    ]
    out = capsys.readouterr().out
    assert "Demand:       6 GPUs from 0 gangs" in out
    events = out.split("Recent events:\n", 1)[1].splitlines()
    assert events[1].split()[1:3] == ["Normal", "FlipOutStarted"]
    assert events[1].endswith("FlipOutStarted message")


async def test_a_watch_into_a_log_redraws_when_a_new_event_arrives(
    capsys: pytest.CaptureFixture[str],
) -> None:
    api, timer = FakeApi(policy(), []), Timer()
    watching = start_watch(api, timer, interactive=False)
    await soon(timer.started.get())
    assert "Recent events:\n  (none)" in capsys.readouterr().out

    api.events = [policy_event("NodeUnhealthy", 2)]
    timer.ring()
    await soon(timer.started.get())
    assert "NodeUnhealthy message" in capsys.readouterr().out
    watching.cancel()
    await asyncio.wait({watching})


async def test_policy_status_watch_redraws_on_changes_and_runs_until_interrupted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    api, timer = FakeApi(policy(), []), Timer()
    watching = start_watch(api, timer, interactive=False)
    await soon(timer.started.get())
    assert "Status:       no status yet" in capsys.readouterr().out

    timer.ring()  # nothing changed: into a log, no identical page
    await soon(timer.started.get())
    assert capsys.readouterr().out == ""

    api.change(policy(2, demand={"gpus": 4, "gangs": []}))
    await soon(timer.started.get())
    assert "Demand:       4 GPUs from 0 gangs" in capsys.readouterr().out
    assert not watching.done()
    watching.cancel()
    await asyncio.wait({watching})
    assert api.watch_closed


async def test_on_a_tty_the_policy_page_is_redrawn_from_the_top_each_tick_until_deleted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    api, timer = FakeApi(policy(), []), Timer()
    watching = start_watch(api, timer, interactive=True)
    await soon(timer.started.get())
    capsys.readouterr()

    timer.ring()  # ages and holds count down on the screen
    await soon(timer.started.get())
    assert capsys.readouterr().out.startswith(commands.CLEAR_SCREEN + "\nName:         training-first")

    api.change(policy(2), kind="DELETED")
    with pytest.raises(commands.CommandError, match='offloadpolicy "training-first" was deleted'):
        await soon(watching)


async def test_policy_status_as_json_prints_each_version(capsys: pytest.CaptureFixture[str]) -> None:
    api = FakeApi(policy(), [])
    watching = asyncio.create_task(
        policy_commands.run_policy_status(cast(KubeApi, api), status_arguments(watch=True, output="json"), "")
    )
    api.change(policy(2, demand={"gpus": 4}))

    async def printed() -> list[dict[str, Any]]:
        out = ""
        while out.count("\n}") < 2:
            await asyncio.sleep(0.01)  # captured output has no event to wait on (noqa: sleep-ok)
            out += capsys.readouterr().out
        return [json.loads(text) for text in out.replace("}\n{", "}\x00{").split("\x00")]

    documents = await soon(printed())
    assert [document["metadata"]["resourceVersion"] for document in documents] == ["1", "2"]
    watching.cancel()
    await asyncio.wait({watching})


class ListingApi:
    def __init__(self, answer: dict[str, Any] | KubeApiError) -> None:
        self.answer = answer

    async def get(self, path: str, *, query: Mapping[str, Any] | None = None) -> dict[str, Any]:
        assert path == POLICY_PATH
        if isinstance(self.answer, KubeApiError):
            raise self.answer
        return self.answer


async def test_policy_list_draws_the_table_or_says_there_is_none(capsys: pytest.CaptureFixture[str]) -> None:
    listing = argparse.Namespace(output=None)
    api = ListingApi({"items": [policy(pool={"total": 8, "free": 8})]})
    assert await policy_commands.run_policy_list(cast(KubeApi, api), listing, "") == 0
    assert capsys.readouterr().out.splitlines()[1].split()[:7] == [
        "training-first",
        "no",
        "-",
        "8",
        "-",
        "-",
        "8",
    ]

    assert await policy_commands.run_policy_list(cast(KubeApi, ListingApi({"items": []})), listing, "") == 0
    assert capsys.readouterr().err == "No offloadpolicies found.\n"

    missing = ListingApi(KubeApiError(404, "NotFound", "the server could not find the requested resource"))
    with pytest.raises(commands.CommandError, match=r"OffloadPolicy resource is not installed"):
        await policy_commands.run_policy_list(cast(KubeApi, missing), listing, "")


def test_the_runner_knows_every_command_the_parser_can_name() -> None:
    assert set(running.HANDLERS) == {
        "list",
        "status",
        "flip",
        "pause",
        "resume",
        "abort",
        "promote",
        "auto",
        "policy list",
        "policy status",
        "uninstall",
    }
