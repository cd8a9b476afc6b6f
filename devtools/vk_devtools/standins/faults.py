"""Faults at random for a stand-in's API: a seeded fraction of requests fails, the kinds of failure mixed.

Reliability tests need many failures spread over a long run, not a few scripted ones. `RandomFaults`
draws, for each request it is shown, whether it fails and how, from its own `random.Random(seed)`: the
sequence of draws is reproducible from the seed (which request receives which draw still depends on the
order in which requests arrive). The kinds, each as a remote API fails:

- `server_error`: 500, 502 or 503, the request not carried out;
- `throttle`: 429 with `Retry-After`, not carried out;
- `timeout`: no answer for `hang_seconds`, then 504; not carried out. Longer than the client's own
  timeout, it is a timeout for the client; short, so hanging requests do not pile up in the stand-in;
- `lose_answer`: carried out, and the answer held back for `hang_seconds`: the client times out on a
  request that did its work (a create made the pod, the client does not know).

It decides only; the stand-in (`vk_devtools.standins.runpod`) serves the fault, and counts nothing
itself: `stats` says how many draws were made and how many faults of each kind were handed out.
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

RandomKind = Literal["server_error", "throttle", "timeout", "lose_answer"]
RANDOM_KINDS: tuple[RandomKind, ...] = ("server_error", "throttle", "timeout", "lose_answer")
SERVER_ERROR_STATUSES = (500, 502, 503)


@dataclasses.dataclass(frozen=True, slots=True)
class InjectedFault:
    """One drawn fault, in the terms the stand-in serves faults in."""

    random_kind: RandomKind
    kind: Literal["status", "timeout", "lose_answer"]
    status: int
    detail: str
    retry_after: str | None
    hang_seconds: float | None


class RandomFaults:
    def __init__(
        self,
        *,
        fraction: float,
        seed: int,
        kinds: Sequence[RandomKind] = RANDOM_KINDS,
        hang_seconds: float = 1.5,
        retry_after_seconds: float = 1.0,
        method: str = "*",
        path: str = ".*",
    ) -> None:
        if not 0 <= fraction <= 1:
            raise ValueError(f"fraction must be between 0 and 1, not {fraction!r}")
        unknown = sorted(set(kinds) - set(RANDOM_KINDS))
        if not kinds or unknown:
            raise ValueError(f"kinds must be some of {RANDOM_KINDS}, not {list(kinds)!r}")
        if hang_seconds <= 0 or retry_after_seconds < 0:
            raise ValueError("hang_seconds must be > 0 and retry_after_seconds >= 0")
        self.fraction = fraction
        self.seed = seed
        self.kinds = tuple(kinds)
        self.hang_seconds = hang_seconds
        self.retry_after_seconds = retry_after_seconds
        self.method = method
        self.path = re.compile(path)
        self.active = True
        self.drawn = 0
        self.injected: dict[str, int] = dict.fromkeys(self.kinds, 0)
        self._random = random.Random(seed)  # noqa: S311 - reproducible test faults, not secrets

    @classmethod
    def from_json(cls, spec: Mapping[str, Any]) -> RandomFaults:
        """From the control API's body; raises ValueError (or TypeError) for a wrong one."""
        return cls(
            fraction=float(spec["fraction"]),
            seed=int(spec["seed"]),
            kinds=tuple(spec.get("kinds", RANDOM_KINDS)),
            hang_seconds=float(spec.get("hang_seconds", 1.5)),
            retry_after_seconds=float(spec.get("retry_after_seconds", 1.0)),
            method=str(spec.get("method", "*")),
            path=str(spec.get("path", ".*")),
        )

    def draw(self, method: str, path: str) -> InjectedFault | None:
        """Whether this request fails, and how; None to serve it normally."""
        if not self.active or self.method not in ("*", method) or self.path.search(path) is None:
            return None
        self.drawn += 1
        # Both numbers are drawn for every request, so the sequence depends on the seed alone.
        roll, pick = self._random.random(), self._random.randrange(len(self.kinds) * 6)
        if roll >= self.fraction:
            return None
        kind = self.kinds[pick % len(self.kinds)]
        self.injected[kind] += 1
        if kind == "server_error":
            status = SERVER_ERROR_STATUSES[pick // len(self.kinds) % len(SERVER_ERROR_STATUSES)]
            return InjectedFault(kind, "status", status, "injected server error", None, None)
        if kind == "throttle":
            retry_after = f"{self.retry_after_seconds:g}"
            return InjectedFault(kind, "status", 429, "injected throttling", retry_after, None)
        if kind == "timeout":
            return InjectedFault(kind, "timeout", 504, "injected hang", None, self.hang_seconds)
        return InjectedFault(kind, "lose_answer", 0, "", None, self.hang_seconds)

    def stats(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "fraction": self.fraction,
            "active": self.active,
            "drawn": self.drawn,
            "injected": dict(self.injected),
        }
