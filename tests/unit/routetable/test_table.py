"""Route matching: by host (port ignored), by longest path prefix on whole segments, and validation."""

from __future__ import annotations

import pytest

from vk_provider.router import Endpoint, Route, RouteMatch, RouteTable
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
