"""A manual clock and a sleep that only moves it, so retry and breaker timing is tested without waiting."""

from __future__ import annotations

import asyncio


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)

    def advance(self, seconds: float) -> None:
        self.now += seconds


HANG = object()
"""An outcome of Script: never answer (until the caller's timeout)."""


class Script:
    """An attempt function playing a list of outcomes in turn (the last one repeats): an exception to
    raise, HANG, or a value to return."""

    def __init__(self, *outcomes: object) -> None:
        self._outcomes = list(outcomes)
        self.calls = 0

    async def __call__(self) -> object:
        self.calls += 1
        outcome = self._outcomes.pop(0) if len(self._outcomes) > 1 else self._outcomes[0]
        if outcome is HANG:
            await asyncio.Event().wait()
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome
