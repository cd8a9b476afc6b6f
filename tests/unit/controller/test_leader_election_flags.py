"""The controller's leader election on its command line: the node's names, timings that work
together, and `--leader-elect=false` for a lone replica."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from vk_provider.cli import parse_command_line
from vk_provider.controller.running import leader_election_problem, leading


def arguments(*words: str) -> argparse.Namespace:
    return parse_command_line(["controller", *words], environ={})[1]


@pytest.mark.parametrize(
    ("words", "works"),
    [
        ((), True),  # 15 s, retry 5 s, deadline 10 s
        (
            ("--leader-election-lease-duration-seconds", "6", "--leader-election-retry-period-seconds", "2"),
            True,
        ),
        (("--leader-election-lease-duration-seconds", "5"), False),  # deadline 0
        (("--leader-election-renew-deadline-seconds", "15"), False),  # deadline = lease
        (("--leader-election-renew-deadline-seconds", "4"), False),  # deadline < retry
        (("--leader-election-renew-deadline-seconds", "12"), True),
    ],
)
def test_the_timings_must_leave_a_standby_out_while_the_leader_acts(
    words: tuple[str, ...], works: bool
) -> None:
    assert (leader_election_problem(arguments(*words)) is None) is works


class Elector:
    identity = "replica-1"

    def __init__(self) -> None:
        self.ran = False

    async def run(self, lead: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self.ran = True
        await lead()


@pytest.mark.parametrize(("flag", "elected"), [("true", True), ("false", False)])
async def test_without_leader_election_the_controller_leads_at_once(flag: str, elected: bool) -> None:
    elector = Elector()
    led: list[bool] = []

    async def lead() -> None:
        led.append(True)

    await leading(arguments("--leader-elect", flag), elector, lead)  # type: ignore[arg-type]
    assert led == [True]
    assert elector.ran is elected
