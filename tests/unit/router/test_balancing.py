"""The choice of side and endpoint: weight share, least outstanding, draining, ejection, fallback."""

from __future__ import annotations

import pytest

from vk_provider.router import Balancer, EjectionPolicy, Endpoint, Route, RouteMatch

from . import seeded

H1, H2 = Endpoint("http://127.1.0.1:80"), Endpoint("http://127.1.0.2:80")
A1, A2 = Endpoint("http://127.2.0.1:80"), Endpoint("http://127.2.0.2:80")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _route(
    weight: int, home: tuple[Endpoint, ...] = (H1, H2), away: tuple[Endpoint, ...] = (A1, A2)
) -> Route:
    return Route("ml", "web", 1, RouteMatch(path_prefix="/"), weight, home=home, away=away)


@pytest.mark.parametrize("weight", [0, 1, 10, 25, 50, 75, 99, 100])
def test_the_away_share_tracks_the_weight(weight: int) -> None:
    balancer = Balancer(rng=seeded(weight))
    route = _route(weight)
    draws = 10_000
    away = 0
    for _ in range(draws):
        pick = balancer.pick(route, balancer.draw())
        assert pick is not None
        away += pick.side == "away"
    assert abs(away / draws * 100 - weight) < 2.0
    if weight in (0, 100):
        assert away == draws * weight // 100


def test_the_endpoint_with_fewest_outstanding_requests_wins() -> None:
    balancer = Balancer(rng=seeded(1))
    route = _route(0)
    balancer.acquire(H1.url)
    for _ in range(50):
        pick = balancer.pick(route, balancer.draw())
        assert pick is not None
        assert pick.endpoint == H2
    balancer.release(H1.url)
    chosen = set()
    for _ in range(50):
        pick = balancer.pick(route, balancer.draw())
        assert pick is not None
        chosen.add(pick.endpoint)
    assert chosen == {H1, H2}  # ties are broken at random, not always by the first endpoint


def test_terminating_endpoints_get_no_new_requests() -> None:
    balancer = Balancer(rng=seeded(2))
    route = _route(0, home=(Endpoint(H1.url, terminating=True), H2))
    for _ in range(50):
        pick = balancer.pick(route, balancer.draw())
        assert pick is not None
        assert pick.endpoint == H2


def test_a_side_without_usable_endpoints_falls_back_to_the_other() -> None:
    balancer = Balancer(rng=seeded(3))
    route = _route(100, away=(Endpoint(A1.url, terminating=True),))
    pick = balancer.pick(route, 0.0)
    assert pick is not None
    assert (pick.side, pick.fell_back) == ("home", True)
    assert balancer.pick(_route(50, home=(), away=()), 0.0) is None
    assert balancer.pick(route, 0.0, exclude=frozenset({H1.url, H2.url})) is None


def test_ejection_doubles_up_to_the_cap_and_resets_on_success() -> None:
    clock = Clock()
    balancer = Balancer(rng=seeded(4), clock=clock, ejection=EjectionPolicy(5.0, 12.0))
    route = _route(0, home=(H1,), away=(A1,))
    assert [balancer.refused(H1.url) for _ in range(3)] == [5.0, 10.0, 12.0]
    assert balancer.is_ejected(H1.url)
    pick = balancer.pick(route, 99.0)
    assert pick is not None
    assert (pick.endpoint, pick.fell_back) == (A1, True)
    clock.now += 12.5
    assert not balancer.is_ejected(H1.url)
    pick = balancer.pick(route, 99.0)
    assert pick is not None
    assert pick.endpoint == H1
    balancer.succeeded(H1.url)
    assert balancer.refused(H1.url) == 5.0


def test_state_of_removed_idle_endpoints_is_forgotten_but_in_flight_ones_kept() -> None:
    balancer = Balancer()
    balancer.acquire(H1.url)
    balancer.refused(H2.url)
    balancer.forget_except(set())
    assert balancer.outstanding(H1.url) == 1
    assert not balancer.is_ejected(H2.url)
    counts = balancer.side_counts(_route(0, home=(H1, Endpoint(H2.url, terminating=True))))
    assert counts["home"] == {"total": 2, "usable": 1, "terminating": 1, "ejected": 0, "outstanding": 1}
