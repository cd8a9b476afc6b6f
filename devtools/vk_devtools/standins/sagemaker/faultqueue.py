"""The faults a test scripted on the layer, served in the order they were added."""

from __future__ import annotations

import dataclasses
import threading

HOLD_LIMIT_SECONDS = 60.0


@dataclasses.dataclass(slots=True)
class Fault:
    """An answer the layer gives instead of moto's, `times` times (None: until cleared)."""

    operation: str | None
    """The operation (e.g. "CreateEndpoint"); None for every one."""
    code: str = "ServiceUnavailable"
    message: str = "Service Unavailable"
    status: int = 503
    times: int | None = 1
    lose_answer: bool = False
    """Carry the request out in moto, then fail as if the answer had been lost (a read timeout)."""
    hold: threading.Event | None = None
    """Keep the call waiting until this is set (or `HOLD_LIMIT_SECONDS` pass), then answer normally."""


class FaultQueue:
    """Faults waiting for their operation (callers hold the layer's lock)."""

    def __init__(self) -> None:
        self._faults: list[Fault] = []
        self._holding: list[threading.Event] = []

    def add(self, fault: Fault) -> None:
        self._faults.append(fault)

    def take(self, operation: str) -> Fault | None:
        """The first fault for `operation` (used up once its `times` are), or None."""
        for fault in self._faults:
            if fault.operation in (None, operation):
                if fault.times is not None:
                    fault.times -= 1
                    if fault.times <= 0:
                        self._faults.remove(fault)
                if fault.hold is not None:
                    self._holding.append(fault.hold)
                return fault
        return None

    def clear(self) -> None:
        """Drop every fault, and let the calls kept waiting go on."""
        holds = [fault.hold for fault in self._faults if fault.hold is not None] + self._holding
        for hold in holds:
            hold.set()
        self._faults.clear()
        self._holding.clear()
