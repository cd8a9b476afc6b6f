"""The route table: which requests belong to which Offload, and where each side's endpoints are.

The table is a plain immutable value so the router can swap a whole new one in with a single
assignment: a request reads the table once and keeps what it picked, so a swap never shows a request
half an old table and half a new one. The code that builds tables (from EndpointSlices, pods and
Offload resources) lives elsewhere; this module only says what a table is and how a request matches.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Literal

from vk_provider.kit.traffic_auth import TrafficAuth

Side = Literal["home", "away"]
SIDES: tuple[Side, Side] = ("home", "away")


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """One backend address: e.g. `http://127.1.0.5:8080`, or a base with a path prefix that request
    paths are appended to (a proxy front such as a RunPod stand-in's); for a signed endpoint, the whole
    URL requests go to (a SageMaker endpoint's invocation URL)."""

    url: str
    terminating: bool = False
    """A draining endpoint: it finishes the requests it has but gets no new ones."""
    auth: TrafficAuth | None = None
    """How requests to it must be authenticated (signed); None for plain requests."""
    kept_on_active_checks: bool = False
    """An away endpoint served only because the router's own checks pass: its node is not Ready, so
    the node lifecycle controller marked the pod not Ready (see `vk_provider.routetable.building`)."""

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"endpoint URL {self.url!r} must start with http:// or https://")

    def target(self, raw_path: str) -> str:
        """The URL a request for `raw_path` (path and query, as received) is sent to.

        A plain endpoint serves the client's paths, so the path is appended. A signed one is a single
        operation at a fixed URL (SageMaker's `/endpoints/<name>/invocations`, which takes whatever
        the model reads, e.g. an OpenAI-style chat body), so the client's path and query are dropped.
        The method stays the client's (SageMaker takes POST and refuses the rest).
        """
        return self.url if self.auth is not None else self.url + raw_path


@dataclasses.dataclass(frozen=True)
class RouteMatch:
    """Which requests a route takes: by Host header, by path prefix, or both (then both must hold)."""

    hosts: tuple[str, ...] = ()
    path_prefix: str = ""

    def __post_init__(self) -> None:
        if not self.hosts and not self.path_prefix:
            raise ValueError("a route match needs hosts, a path prefix, or both")
        if self.path_prefix and not self.path_prefix.startswith("/"):
            raise ValueError(f"path prefix {self.path_prefix!r} must start with /")
        # Stored normalised so matching compares like with like, whatever the Offload spelled.
        object.__setattr__(self, "hosts", tuple(normalize_host(host) for host in self.hosts))

    def matches(self, host: str, path: str) -> bool:
        """Whether a request for `host` (already normalised) and `path` belongs here."""
        if self.hosts and host not in self.hosts:
            return False
        return not self.path_prefix or path_has_prefix(path, self.path_prefix)


@dataclasses.dataclass(frozen=True)
class EndpointPicker:
    """The endpoint picker of an InferencePool whose pods are a route's home side (the `inferencepool`
    data plane): every home request asks it which pod to go to (Envoy's external processing)."""

    pool: str
    """`namespace/name` of the InferencePool."""
    addresses: tuple[str, ...] = ()
    """`ip:port` of the picker's ready endpoints (sorted); none while it has none."""
    fail_open: bool = False
    """The pool's `failureMode` is FailOpen: when the picker does not answer, a home request goes to a
    home endpoint of Envoy's choosing; FailClose (the default) fails it."""
    problem: str = ""
    """Why the pool gives no picker to ask ('' when `addresses` are its picker's): the pool or its
    `endpointPickerRef` is missing."""


@dataclasses.dataclass(frozen=True)
class Route:
    """The routing of one Offload: its match, the weight it applies, and both sides' endpoints."""

    namespace: str
    name: str
    generation: int
    match: RouteMatch
    away_weight: int
    """Percent of new requests that go away, 0..100."""
    home: tuple[Endpoint, ...] = ()
    away: tuple[Endpoint, ...] = ()
    picker: EndpointPicker | None = None
    """Set for an Offload whose home side is an InferencePool; our router ignores it (the Envoys of
    the `inferencepool` data plane ask the picker)."""

    def __post_init__(self) -> None:
        if not 0 <= self.away_weight <= 100:
            raise ValueError(f"away weight {self.away_weight} is outside 0..100")

    @property
    def key(self) -> str:
        """`namespace/name`, the Offload's identity in logs, metrics and the status document."""
        return f"{self.namespace}/{self.name}"

    def endpoints(self, side: Side) -> tuple[Endpoint, ...]:
        return self.home if side == "home" else self.away


@dataclasses.dataclass(frozen=True)
class RouteTable:
    """All routes the router applies at one moment.

    Matching reads an index built with the table (routes by the hosts they name, and the routes for
    every host), so a request costs the same with a thousand routes as with ten: it looks at the
    routes of its own host, and at the every-host routes only when none of those takes it.
    """

    routes: tuple[Route, ...] = ()
    host_owners: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Named host → the namespace that owns it (see `vk_provider.offload.claims`)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", _MatchIndex.of(self.routes))

    def __getstate__(self) -> dict[str, object]:
        # The index is derived: a pickled table (sent to a router's workers) carries the routes only.
        return {"routes": self.routes, "host_owners": self.host_owners}

    def __setstate__(self, state: dict[str, object]) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)
        self.__post_init__()

    @classmethod
    def of(cls, routes: Iterable[Route], host_owners: Mapping[str, str] | None = None) -> RouteTable:
        return cls(tuple(routes), dict(host_owners or {}))

    def match(self, host: str | None, path: str) -> Route | None:
        """The route for a request, or None.

        A route that names the host beats one that does not (it is the more specific claim), then
        the longest path prefix wins, as in every ingress controller, so `/v1/chat` can be carved out
        of `/v1` without ordering the routes. A route for every host takes no path of a host another
        namespace owns: the owner's paths are its own, even those its routes do not name. Among
        equals, the first in the table wins.
        """
        normalized = normalize_host(host or "")
        index: _MatchIndex = getattr(self, "_index")  # noqa: B009 - set in __post_init__, not a field
        named = _longest_prefix(index.by_host.get(normalized, ()), path)
        if named is not None:
            return named
        owner = self.host_owners.get(normalized)
        for route in index.every_host:
            if owner is not None and route.namespace != owner:
                continue
            if not route.match.path_prefix or path_has_prefix(path, route.match.path_prefix):
                return route
        return None

    def endpoint_urls(self) -> set[str]:
        return {endpoint.url for route in self.routes for endpoint in (*route.home, *route.away)}


def normalize_host(host: str) -> str:
    """Host header → bare lower-case host name: the port and a trailing dot do not change the site."""
    host = host.strip().lower()
    if host.startswith("["):  # an IPv6 literal, whose colons are not a port separator
        end = host.find("]")
        return host[: end + 1] if end >= 0 else host
    if host.count(":") == 1:
        host = host.partition(":")[0]
    return host.rstrip(".")


def path_has_prefix(path: str, prefix: str) -> bool:
    """Prefix match on whole path segments: `/api` takes `/api` and `/api/x` but not `/apix`."""
    if prefix == "/" or prefix.endswith("/"):
        return path.startswith(prefix)
    return path == prefix or path.startswith(prefix + "/")


@dataclasses.dataclass(frozen=True)
class _MatchIndex:
    """A table's routes arranged for matching: by each host they name, and those naming none; each
    list longest path prefix first, in table order among equal prefixes (a stable sort), so the first
    route whose prefix takes the path is the one `RouteTable.match` picks."""

    by_host: Mapping[str, tuple[Route, ...]]
    every_host: tuple[Route, ...]

    @classmethod
    def of(cls, routes: Iterable[Route]) -> _MatchIndex:
        by_host: dict[str, list[Route]] = {}
        every_host: list[Route] = []
        for route in routes:
            for host in dict.fromkeys(route.match.hosts):  # a host named twice lists the route once
                by_host.setdefault(host, []).append(route)
            if not route.match.hosts:
                every_host.append(route)
        return cls(
            {host: _longest_first(found) for host, found in by_host.items()}, _longest_first(every_host)
        )


def _longest_first(routes: list[Route]) -> tuple[Route, ...]:
    if len(routes) == 1:  # most hosts have one route: nothing to sort
        return (routes[0],)
    return tuple(sorted(routes, key=lambda route: -len(route.match.path_prefix)))


def _longest_prefix(routes: tuple[Route, ...], path: str) -> Route | None:
    """The first of `routes` (longest prefix first) whose prefix takes `path`."""
    for route in routes:
        if not route.match.path_prefix or path_has_prefix(path, route.match.path_prefix):
            return route
    return None
