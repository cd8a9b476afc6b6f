"""What crosses this package's boundary: the reader it asks, and the events and errors it answers with."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol


class ReferenceReader(Protocol):
    """The API objects a container's environment and volumes may refer to, all in the pod's namespace.

    `None` means the object does not exist; any other failure (API down, forbidden) is raised and
    propagates unchanged, because only "not found" may be excused by `optional: true`. Every
    resolution asks for Services afresh (the pod's namespace and `default`); a reader backed by a
    watch cache, as the kubelet's is, answers that cheaply.
    """

    async def config_map(self, namespace: str, name: str) -> Mapping[str, str] | None:
        """The ConfigMap's `data`."""
        ...

    async def config_map_files(self, namespace: str, name: str) -> Mapping[str, bytes] | None:
        """The ConfigMap as a volume's files: `data` encoded as UTF-8 and `binaryData` as it is.

        Apart from `config_map` because `binaryData` is bytes, which a variable cannot hold exactly.
        """
        ...

    async def secret(self, namespace: str, name: str) -> Mapping[str, bytes] | None:
        """The Secret's `data`, base64-decoded."""
        ...

    async def services(self, namespace: str) -> Sequence[Mapping[str, Any]]:
        """Every Service of the namespace, as the API returns it (JSON dicts)."""
        ...


class TokenIssuer(Protocol):
    """Where a projected volume's `serviceAccountToken` source gets its token (the TokenRequest API).

    Failures propagate unchanged, as the reader's do: a pod whose token cannot be had must not start."""

    async def service_account_token(
        self, pod: Mapping[str, Any], *, audience: str, expiration_seconds: int
    ) -> bytes:
        """A token for the pod's ServiceAccount, bound to the pod; `audience` "" means the API server's."""
        ...


@dataclasses.dataclass(frozen=True, slots=True)
class EnvironmentEvent:
    """An event the caller should record on the pod, as the kubelet would."""

    type: Literal["Normal", "Warning"]
    reason: str
    message: str


@dataclasses.dataclass(frozen=True, slots=True)
class ResolvedEnvironment:
    variables: tuple[tuple[str, str], ...]
    """In first-appearance order, each name once, with its last definition's value."""
    events: tuple[EnvironmentEvent, ...]


class MandatoryReferenceError(Exception):
    """A ConfigMap, Secret or key the container needs does not exist: the pod must not be created.

    `event` is the Warning to record on the pod; `earlier_events` are the warnings gathered before
    resolution stopped (optional misses, skipped names), which are worth recording too.
    """

    def __init__(self, event: EnvironmentEvent, *, earlier_events: tuple[EnvironmentEvent, ...] = ()) -> None:
        super().__init__(event.message)
        self.event = event
        self.earlier_events = earlier_events


class InvalidEnvironmentError(ValueError):
    """The container's environment cannot be built as written (bad fieldPath, resource, quantity...).

    The API server rejects most of these, so one reaching us means a spec we cannot honour; retrying
    will not help.
    """

    def __init__(self, container: str, variable: str, detail: str) -> None:
        super().__init__(f'container "{container}", environment variable "{variable}": {detail}')
        self.container = container
        self.variable = variable
        self.detail = detail


class SelectorError(ValueError):
    """A downward API selector that cannot be evaluated.

    Raised by the selector code, which does not know the container or variable; the resolver turns
    it into an `InvalidEnvironmentError` that names both.
    """
