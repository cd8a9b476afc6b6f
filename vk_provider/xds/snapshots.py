"""Numbered versions of the resources, and who to tell when a new one is published.

Every version carries all the resources (state of the world): an Envoy that ACKs version N of each
type has all of N, so "has applied N" is a plain comparison. Versions only grow, and only when the
resources change, so a version number means the same configuration on every stream and every Envoy.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Collection

from google.protobuf import any_pb2

from vk_provider.xds.names import (
    CLUSTER_TYPE,
    LISTENER_TYPE,
    LOAD_ASSIGNMENT_TYPE,
    ROUTE_CONFIGURATION_TYPE,
    WILDCARD_TYPES,
)
from vk_provider.xds.resources import Resources

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Snapshot:
    version: int
    resources: Resources

    @property
    def version_info(self) -> str:
        return str(self.version)

    @property
    def required_types(self) -> frozenset[str]:
        """The types an Envoy must ACK at this version to have applied it.

        Listeners, routes and clusters always: even an empty cluster list must be ACKed, since it
        removes clusters. Load assignments only when there are any: an Envoy with no EDS cluster never
        asks for them.
        """
        types = {LISTENER_TYPE, ROUTE_CONFIGURATION_TYPE, CLUSTER_TYPE}
        if self.resources.of_type(LOAD_ASSIGNMENT_TYPE):
            types.add(LOAD_ASSIGNMENT_TYPE)
        return frozenset(types)

    def resources_for(self, type_url: str, names: Collection[str]) -> list[any_pb2.Any]:
        """What a response for `type_url` carries: everything for a wildcard type, else what was named."""
        of_type = self.resources.of_type(type_url)
        if type_url in WILDCARD_TYPES and not names:
            return [of_type[name] for name in sorted(of_type)]
        return [of_type[name] for name in sorted(names) if name in of_type]


Subscriber = Callable[[Snapshot], None]


class SnapshotStore:
    """The current snapshot; each published change becomes the next version and goes to every subscriber."""

    def __init__(self) -> None:
        self.current: Snapshot | None = None
        self._subscribers: list[Subscriber] = []

    def publish(self, resources: Resources) -> int:
        """Make `resources` current; returns its version (the current one when nothing changed)."""
        if self.current is not None and self.current.resources.same_as(resources):
            return self.current.version
        previous = self.current
        version = (previous.version if previous is not None else 0) + 1
        self.current = Snapshot(version, resources)
        already_reported = set(previous.resources.left_out) if previous is not None else set()
        for left_out in resources.left_out:
            if left_out not in already_reported:
                logger.warning("version %d leaves out %s", version, left_out)
        for subscriber in list(self._subscribers):
            subscriber(self.current)
        return version

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Call `subscriber` with every new snapshot; returns the function that stops it."""
        self._subscribers.append(subscriber)
        return lambda: self._subscribers.remove(subscriber)
