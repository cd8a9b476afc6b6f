"""Route matching: by host (port ignored), by longest path prefix on whole segments, and validation."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vk_provider.router import Endpoint, Route, RouteMatch, RouteTable
from vk_provider.routetable import table as table_module
from vk_provider.routetable.table import normalize_host, path_has_prefix


def _route(name: str, *, hosts: tuple[str, ...] = (), prefix: str = "") -> Route:
    return Route("ml", name, 1, RouteMatch(hosts=hosts, path_prefix=prefix), 0)


TABLE = RouteTable.of(
    [
        _route("chat", hosts=("chat.example.com",)),
        _route("api", prefix="/api"),
        _route("api-v2", prefix="/api/v2"),
        _route("chat-admin", hosts=("chat.example.com",), prefix="/admin"),
        _route("root", prefix="/"),
    ]
)


@pytest.mark.parametrize(
    ("host", "path", "expected"),
    [
        ("chat.example.com", "/x", "chat"),
        ("Chat.Example.COM:8443", "/x", "chat"),
        ("chat.example.com.", "/x", "chat"),
        ("chat.example.com", "/admin/users", "chat-admin"),
        ("other", "/api", "api"),
        ("other", "/api/v1/x", "api"),
        ("other", "/api/v2/x", "api-v2"),
        ("other", "/apix", "root"),
        (None, "/anything", "root"),
    ],
)
def test_a_request_matches_the_most_specific_route(host: str | None, path: str, expected: str) -> None:
    match = TABLE.match(host, path)
    assert match is not None
    assert match.name == expected


def test_no_route_matches_an_unknown_host_without_a_catch_all() -> None:
    table = RouteTable.of([_route("chat", hosts=("chat.example.com",)), _route("api", prefix="/api")])
    assert table.match("unknown.example.com", "/v1") is None
    assert RouteTable().match("chat.example.com", "/") is None


def test_hosts_and_prefix_must_both_hold_when_both_are_set() -> None:
    table = RouteTable.of([_route("both", hosts=("a",), prefix="/v1")])
    assert table.match("a", "/v1/x") is not None
    assert table.match("a", "/v2") is None
    assert table.match("b", "/v1") is None


def test_an_every_host_route_takes_no_path_of_a_host_another_namespace_owns() -> None:
    owned = Route("default", "tokens", 1, RouteMatch(hosts=("tokens.demo",), path_prefix="/v1"), 0)
    own_fallback = Route("default", "fallback", 1, RouteMatch(path_prefix="/"), 0)
    foreign = Route("team", "everything", 1, RouteMatch(path_prefix="/"), 0)
    table = RouteTable.of([owned, foreign], {"tokens.demo": "default"})
    assert table.match("tokens.demo", "/v1/completions") == owned
    assert table.match("Tokens.Demo:80", "/v2/completions") is None
    assert table.match("other.demo", "/v2/completions") == foreign
    with_own = RouteTable.of([owned, own_fallback], {"tokens.demo": "default"})
    assert with_own.match("tokens.demo", "/v2") == own_fallback


def test_helpers() -> None:
    assert normalize_host("[::1]:8080") == "[::1]"
    assert normalize_host("Example.org:80") == "example.org"
    assert path_has_prefix("/a/b", "/a/")
    assert not path_has_prefix("/ab", "/a")


@pytest.mark.parametrize(
    "build",
    [
        RouteMatch,
        lambda: RouteMatch(path_prefix="api"),
        lambda: Route("ml", "x", 1, RouteMatch(path_prefix="/"), 101),
        lambda: Route("ml", "x", 1, RouteMatch(path_prefix="/"), -1),
        lambda: Endpoint("127.0.0.1:80"),
    ],
)
def test_invalid_values_are_rejected(build: object) -> None:
    assert callable(build)
    with pytest.raises(ValueError):  # noqa: PT011 - each case has its own message
        build()


def test_route_key_and_sides() -> None:
    home, away = Endpoint("http://h:1"), Endpoint("http://a:1")
    route = Route("ml", "web", 3, RouteMatch(path_prefix="/"), 10, home=(home,), away=(away,))
    assert route.key == "ml/web"
    assert route.endpoints("home") == (home,)
    assert route.endpoints("away") == (away,)
    assert RouteTable.of([route]).endpoint_urls() == {"http://h:1", "http://a:1"}


def _scanned_match(table: RouteTable, host: str | None, path: str) -> Route | None:
    """The matching rule read straight off `RouteTable.match`'s contract, one route at a time: what
    the index must agree with."""
    normalized = normalize_host(host or "")
    owner = table.host_owners.get(normalized)
    best: Route | None = None
    best_rank = (-1, -1)
    for route in table.routes:
        if not route.match.matches(normalized, path):
            continue
        if owner is not None and not route.match.hosts and route.namespace != owner:
            continue
        rank = (1 if route.match.hosts else 0, len(route.match.path_prefix))
        if rank > best_rank:
            best, best_rank = route, rank
    return best


_HOSTS = st.sampled_from(["a.example", "b.example", "c.example"])
_PREFIXES = st.sampled_from(["", "/", "/v1", "/v1/chat", "/v2", "/v1/"])


@st.composite
def _tables(draw: st.DrawFn) -> RouteTable:
    routes = []
    for number in range(draw(st.integers(0, 8))):
        hosts = tuple(draw(st.lists(_HOSTS, max_size=2)))
        prefix = draw(_PREFIXES)
        if not hosts and not prefix:
            prefix = "/"
        namespace = draw(st.sampled_from(["ml", "web"]))
        routes.append(Route(namespace, f"r{number}", 1, RouteMatch(hosts=hosts, path_prefix=prefix), 0))
    owners = draw(st.dictionaries(_HOSTS, st.sampled_from(["ml", "web"]), max_size=2))
    return RouteTable.of(routes, owners)


@given(
    _tables(),
    st.one_of(st.none(), _HOSTS, st.just("A.Example:8080")),
    st.sampled_from(["/", "/v1", "/v1/chat/x", "/v2/y", "/v1x", "/other"]),
)
def test_the_indexed_match_picks_what_a_scan_of_every_route_picks(
    table: RouteTable, host: str | None, path: str
) -> None:
    assert table.match(host, path) is _scanned_match(table, host, path)


def test_a_pickled_table_matches_as_the_original_and_carries_no_index() -> None:
    payload = pickle.dumps(TABLE)
    copy = pickle.loads(payload)  # noqa: S301 - our own bytes
    assert copy == TABLE
    assert b"_index" not in payload
    found = copy.match("chat.example.com", "/admin/x")
    assert found is not None
    assert found.name == "chat-admin"


def test_a_thousand_routes_are_matched_by_host_without_testing_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    routes = [_route(f"m{number}", hosts=(f"m{number}.example",), prefix="/") for number in range(1000)]
    table = RouteTable.of(routes)
    tests: list[str] = []
    whole_match = RouteMatch.matches

    def recording_prefix(path: str, prefix: str) -> bool:
        tests.append(f"prefix {prefix}")
        return path_has_prefix(path, prefix)

    def recording_match(self: RouteMatch, host: str, path: str) -> bool:
        tests.append(f"match {self.hosts}")
        return whole_match(self, host, path)

    monkeypatch.setattr(table_module, "path_has_prefix", recording_prefix)
    monkeypatch.setattr(RouteMatch, "matches", recording_match)
    found = table.match("m999.example", "/x")
    assert found is not None
    assert found.name == "m999"
    assert len(tests) <= 1  # the host's own route at most, not a scan of the thousand
