"""A chain's price for a pod not placed by price: its owner's, and before it is placed the dearest
member's, since it may land on any of them; unknown when a member cannot say."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from vk_provider.provider import PodLifecycle, PricedPod, ProviderContext

from .support import Backends, ScriptedMember, make_chain, pod_request

pytestmark = pytest.mark.unit


class PricedMember(ScriptedMember):
    def __init__(self, context: ProviderContext) -> None:
        super().__init__(context)
        self.price: float | None = None

    def pod_price_per_hour(self, pod: PricedPod) -> float | None:
        return self.price


class PricedBackends(Backends):
    def build(self, kind: str, context: ProviderContext) -> PodLifecycle:
        member = self.scripted.get(context.state_dir.name)
        if member is None:
            member = self.scripted[context.state_dir.name] = PricedMember(context)
        return member


def priced_members(backends: PricedBackends, **prices: float | None) -> None:
    for name, price in prices.items():
        member = backends.scripted[name]
        assert isinstance(member, PricedMember)
        member.price = price


async def test_a_pod_costs_the_dearest_members_price_until_a_member_holds_it(tmp_path: Path) -> None:
    backends = PricedBackends()
    members = [{"name": name, "provider": "scripted"} for name in ("first", "second")]
    chain = make_chain(tmp_path, members, backends=backends)
    priced_members(backends, first=2.0, second=3.0)
    request = pod_request("web")
    pod = PricedPod(request.ref, annotations={}, requests={"pods": Fraction(1)})
    assert chain.pod_price_per_hour(pod) == 3.0
    await chain.create_pod(request)  # the first member takes it
    assert chain.pod_price_per_hour(pod) == 2.0
    priced_members(backends, first=None)
    assert chain.pod_price_per_hour(pod) is None


def test_a_member_that_cannot_price_the_pod_leaves_its_price_unknown(tmp_path: Path) -> None:
    backends = PricedBackends()
    members = [{"name": name, "provider": "scripted"} for name in ("first", "second")]
    chain = make_chain(tmp_path, members, backends=backends)
    priced_members(backends, first=2.0, second=None)
    pod = PricedPod(pod_request("web").ref, annotations={}, requests={})
    assert chain.pod_price_per_hour(pod) is None
