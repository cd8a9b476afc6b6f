"""How the stand-in behaves in time and in refusals: a `Profile`, chosen when it is built.

Two are named. `FAST` (the default) is the stand-in every existing test knows: pods RUNNING and
answering within a tenth of a second, no rate limit, no refusal beyond the catalog's rules. `REALISTIC`
is RunPod as its documentation and users describe it, for the tests and benchmarks that study time:

- **a cold start of about seven minutes** before a vLLM server answers through the proxy: RunPod's
  own figures for vLLM images run from ~7 s (a FlashBoot snapshot on the same host and image) to ~7 min
  (cold), and a worker idle about a minute may download its weights again (runpod-workers/worker-vllm
  #111; gathered in the project's research notes, adoption-and-realism.md section 1). The profile takes
  the cold end, the one a training gang waits for. No source splits it into stages, so the split is
  ours: 30 s PROVISIONING (a machine is found), 150 s STARTING (the image, ~10 GB for vLLM, is pulled),
  240 s of loading after RUNNING (the weights are read and the server starts), during which the proxy
  answers 502 as for any port nothing listens on. `FLASHBOOT` is the warm end (~7 s in all);
  `Profile.scaled` shortens either for a test that cannot wait minutes (e.g. a 30 s cold start);
- **the proxy's request timeout**: 100 s. Requests go through Cloudflare, which closes a request whose
  answer has not begun within 100 s, and the client gets a 524 (docs.runpod.io/pods/configuration/
  expose-ports, "Proxy limitations and behavior");
- **rate limits per API key** in three fixed windows, minute, hour and day; a request counts against
  all three and any exhausted window refuses with 429 until it resets; `RateLimit-Policy` and
  `RateLimit` on every authenticated answer (docs.runpod.io/api-reference-v2/rate-limits). RunPod
  publishes no quotas; the ones here, 60 a minute, 3000 an hour, 50000 a day, are the examples of
  the `RateLimitPolicyHeader` schema in RunPod's v2 OpenAPI document;
- **capacity refusals that contradict the catalog**: none at random by default (RunPod publishes no
  rate of them, and tests need to say which create is refused); `capacity_refusal_fraction` with
  `capacity_seed` refuses a reproducible share of creates, and the control plane scripts them per GPU
  type, data center and cloud (`control.FakeRunPodControl.refuse_capacity`);
- **money and access**: `balance_dollars` (None: unlimited) refuses with 402 a create whose first hour
  the balance does not cover (RunPod documents 402 for an insufficient balance, not the threshold: one
  hour is ours); `denied_pools` refuses with 403 creates of GPU types in those pools.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any


@dataclasses.dataclass(frozen=True, slots=True)
class RateLimitWindow:
    """One window of an API key's quota: `quota` requests per `seconds`, named as in the headers."""

    name: str
    quota: int
    seconds: int

    def __post_init__(self) -> None:
        if not self.name or self.quota < 1 or self.seconds < 1:
            raise ValueError(f"a rate-limit window needs a name, a quota >= 1 and seconds >= 1: {self}")


RUNPOD_RATE_LIMITS = (
    RateLimitWindow("minute", 60, 60),
    RateLimitWindow("hour", 3000, 3600),
    RateLimitWindow("day", 50000, 86400),
)
"""The example quotas of RunPod's v2 OpenAPI document (`RateLimitPolicyHeader`)."""

RUNPOD_PROXY_TIMEOUT_SECONDS = 100.0
"""Cloudflare's limit on RunPod's HTTP proxy: no answer within 100 s is a 524 (docs.runpod.io)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Profile:
    """The stand-in's timings and behaviours; read for each request and each pod, so a change through
    the control plane applies at once (a pod already sleeping keeps the delay it started with)."""

    name: str
    provisioning_seconds: float
    """PROVISIONING -> STARTING: finding a machine."""
    starting_seconds: float
    """STARTING -> RUNNING: pulling the image and starting the container."""
    load_seconds: float = 0.0
    """RUNNING, but the server inside does not answer yet (the model loads); the proxy answers 502."""
    proxy_timeout_seconds: float | None = None
    """The proxy answers 524 when a pod's app has not begun its answer by then; None: it waits."""
    rate_limits: tuple[RateLimitWindow, ...] = ()
    """Per API key; empty: no limit and no `RateLimit` headers."""
    capacity_refusal_fraction: float = 0.0
    """The share of creates refused for capacity at random (reproducibly, from `capacity_seed`)."""
    capacity_seed: int = 0
    balance_dollars: float | None = None
    """None: unlimited. Otherwise a create whose first hour costs more is refused with 402."""
    denied_pools: frozenset[str] = frozenset()
    """GPU pools this account may not use: creates of their GPU types are refused with 403."""

    def __post_init__(self) -> None:
        timings = (self.provisioning_seconds, self.starting_seconds, self.load_seconds)
        if min(timings) < 0:
            raise ValueError("the pod timings must be >= 0")
        if self.proxy_timeout_seconds is not None and self.proxy_timeout_seconds <= 0:
            raise ValueError("proxy_timeout_seconds must be > 0 (or None)")
        if not 0 <= self.capacity_refusal_fraction <= 1:
            raise ValueError("capacity_refusal_fraction must be between 0 and 1")
        if len({window.name for window in self.rate_limits}) != len(self.rate_limits):
            raise ValueError("rate-limit windows need distinct names")

    @property
    def cold_start_seconds(self) -> float:
        """From the create to the first answer through the proxy."""
        return self.provisioning_seconds + self.starting_seconds + self.load_seconds

    def scaled(self, factor: float) -> Profile:
        """The same profile with its pod timings (not the proxy timeout or rate windows) times `factor`."""
        if factor < 0:
            raise ValueError("factor must be >= 0")
        return dataclasses.replace(
            self,
            provisioning_seconds=self.provisioning_seconds * factor,
            starting_seconds=self.starting_seconds * factor,
            load_seconds=self.load_seconds * factor,
        )

    def updated(self, changes: Mapping[str, Any]) -> Profile:
        """This profile with the fields of a JSON object changed (the control plane's body); raises
        ValueError (or TypeError) for an unknown field or a wrong value."""
        unknown = sorted(set(changes) - {field.name for field in dataclasses.fields(self)})
        if unknown:
            raise ValueError(f"unknown profile fields: {', '.join(unknown)}")
        values = dict(changes)
        if "rate_limits" in values:
            values["rate_limits"] = tuple(
                RateLimitWindow(str(window["name"]), int(window["quota"]), int(window["seconds"]))
                for window in values["rate_limits"]
            )
        if "denied_pools" in values:
            values["denied_pools"] = frozenset(str(pool) for pool in values["denied_pools"])
        for name in ("provisioning_seconds", "starting_seconds", "load_seconds", "capacity_refusal_fraction"):
            if name in values:
                values[name] = float(values[name])
        for name in ("proxy_timeout_seconds", "balance_dollars"):
            if values.get(name) is not None:
                values[name] = float(values[name])
        if "capacity_seed" in values:
            values["capacity_seed"] = int(values["capacity_seed"])
        if "name" in values:
            values["name"] = str(values["name"])
        return dataclasses.replace(self, **values)

    def to_json(self) -> dict[str, Any]:
        document = dataclasses.asdict(self)
        document["rate_limits"] = [dataclasses.asdict(window) for window in self.rate_limits]
        document["denied_pools"] = sorted(self.denied_pools)
        return document


FAST = Profile("fast", provisioning_seconds=0.05, starting_seconds=0.05)
"""The default: what every test that does not study time runs against."""

REALISTIC = Profile(
    "realistic",
    provisioning_seconds=30.0,
    starting_seconds=150.0,
    load_seconds=240.0,
    proxy_timeout_seconds=RUNPOD_PROXY_TIMEOUT_SECONDS,
    rate_limits=RUNPOD_RATE_LIMITS,
)
"""RunPod with a cold vLLM start (~7 min to the first answer), its proxy timeout and its rate limits."""

FLASHBOOT = dataclasses.replace(
    REALISTIC, name="flashboot", provisioning_seconds=1.0, starting_seconds=2.0, load_seconds=4.0
)
"""The realistic profile at the warm end: ~7 s, a FlashBoot snapshot on the same host and image."""

PROFILES: Mapping[str, Profile] = {profile.name: profile for profile in (FAST, REALISTIC, FLASHBOOT)}
