"""How an accepted CreateEndpoint goes: Creating for a while, then InService or Failed, and why.

SageMaker provisions the instances (or finds it cannot: InsufficientInstanceCapacity), starts the
container once its image and artifacts are on the instance, and calls it healthy at its first good
`/ping`; a container that has not answered within the health-check timeout fails the endpoint (the
figures and words are in `profile`).
"""

from __future__ import annotations

import dataclasses

from vk_devtools.standins.sagemaker.profile import (
    CAPACITY_FAILURE_REASON,
    DEFAULT_HEALTH_CHECK_TIMEOUT_SECONDS,
    PING_FAILURE_REASON,
)
from vk_devtools.standins.sagemaker.runtime import ContainerAnswer


@dataclasses.dataclass(frozen=True, slots=True)
class Container:
    """How the server in an image behaves once started (`SageMakerLayer.script_container`)."""

    loading_seconds: float | None = None
    """Its start -> its first healthy `/ping`; None: the layer's `loading_seconds`."""
    answers_ping: bool = True
    """False: it never answers `/ping` (a crash loop, a wrong port, a server that never comes up)."""
    answer: ContainerAnswer = dataclasses.field(default_factory=ContainerAnswer)
    """What it answers to `POST /invocations`."""


@dataclasses.dataclass(frozen=True, slots=True)
class Startup:
    """An endpoint Creating from `started` for `seconds`, then InService, or Failed with `failure`."""

    started: float
    seconds: float
    failure: str | None = None

    def status(self, now: float) -> str | None:
        """Creating, Failed, or None once it is InService."""
        if now < self.started + self.seconds:
            return "Creating"
        return "Failed" if self.failure is not None else None


def plan_startup(
    now: float,
    *,
    variant: str,
    provisioning_seconds: float,
    loading_seconds: float,
    health_check_timeout_seconds: float | None,
    short_of_capacity: bool,
    capacity_failure_seconds: float,
    answers_ping: bool,
) -> Startup:
    """The course of an endpoint whose CreateEndpoint was accepted at `now`."""
    if short_of_capacity:
        return Startup(now, capacity_failure_seconds, CAPACITY_FAILURE_REASON)
    timeout = health_check_timeout_seconds
    if timeout is None:
        timeout = DEFAULT_HEALTH_CHECK_TIMEOUT_SECONDS
    if not answers_ping or loading_seconds > timeout:
        return Startup(now, provisioning_seconds + timeout, PING_FAILURE_REASON.format(variant=variant))
    return Startup(now, provisioning_seconds + loading_seconds)
