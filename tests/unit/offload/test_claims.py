"""Route claims: the oldest Offload holding a host and path prefix keeps it, whatever the order."""

from __future__ import annotations

import itertools
from typing import Any

from vk_provider.offload.claims import Conflict, claim_keys, resolve_claims


def offload(
    key: str, created: str | None, *, hosts: list[str] | None = None, prefix: str | None = None
) -> dict[str, Any]:
    namespace, name = key.split("/")
    metadata: dict[str, Any] = {"namespace": namespace, "name": name}
    if created is not None:
        metadata["creationTimestamp"] = created
    route: dict[str, Any] = {}
    if hosts is not None:
        route["hosts"] = hosts
    if prefix is not None:
        route["pathPrefix"] = prefix
    return {"metadata": metadata, "spec": {"route": route}}


def test_the_older_claim_wins_in_any_namespace_and_any_order() -> None:
    first = offload("default/tokens", "2026-01-01T10:00:00Z", hosts=["chat.test"], prefix="/v1")
    second = offload("attacker/tokens", "2026-01-01T10:00:01Z", hosts=["chat.test"], prefix="/v1")
    for order in ([first, second], [second, first]):
        claims = resolve_claims(order)
        assert claims.winners == {"default/tokens"}
        assert claims.conflict("attacker", "tokens") == Conflict(
            "attacker/tokens", "default/tokens", ("chat.test", "/v1")
        )
        assert claims.conflict("default", "tokens") is None


def test_same_age_falls_back_to_namespace_then_name() -> None:
    same = "2026-01-01T10:00:00Z"
    offloads = [offload(key, same, hosts=["a.test"]) for key in ("zz/a", "aa/b", "aa/a")]
    for order in itertools.permutations(offloads):
        claims = resolve_claims(order)
        assert claims.winners == {"aa/a"}
        assert {conflict.winner for conflict in claims.losers.values()} == {"aa/a"}


def test_hosts_and_prefixes_compare_as_the_router_matches_them() -> None:
    assert claim_keys(offload("a/a", None, hosts=["Chat.Test."], prefix="/v1/")) == {("chat.test", "/v1")}
    assert claim_keys(offload("a/a", None, prefix="/")) == {("", "/")}
    assert claim_keys(offload("a/a", None, hosts=[])) == frozenset()
    assert claim_keys(offload("a/a", None, hosts=["x.test"])) == {("x.test", "/")}


def test_only_identical_matches_conflict() -> None:
    base = offload("a/base", "2026-01-01T10:00:00Z", hosts=["chat.test"], prefix="/v1")
    longer = offload("b/longer", "2026-01-01T10:00:01Z", hosts=["chat.test"], prefix="/v1/chat")
    other_host = offload("c/other", "2026-01-01T10:00:02Z", hosts=["other.test"], prefix="/v1")
    any_host = offload("d/any", "2026-01-01T10:00:03Z", prefix="/v1")
    claims = resolve_claims([base, longer, other_host, any_host])
    assert claims.winners == {"a/base", "b/longer", "c/other", "d/any"}
    assert not claims.losers


def test_one_shared_host_loses_the_whole_offload_and_a_loser_holds_nothing() -> None:
    oldest = offload("a/a", "2026-01-01T10:00:00Z", hosts=["one.test"])
    both = offload("b/b", "2026-01-01T10:00:01Z", hosts=["one.test", "two.test"])
    youngest = offload("c/c", "2026-01-01T10:00:02Z", hosts=["two.test"])
    claims = resolve_claims([youngest, both, oldest])
    assert claims.winners == {"a/a", "c/c"}
    assert claims.losers["b/b"].key == ("one.test", "/")


def test_deleting_the_winner_hands_the_route_to_the_next_oldest() -> None:
    first = offload("a/first", "2026-01-01T10:00:00Z", hosts=["chat.test"])
    second = offload("b/second", "2026-01-01T10:00:05Z", hosts=["chat.test"])
    third = offload("c/third", "2026-01-01T10:00:09Z", hosts=["chat.test"])
    assert resolve_claims([first, second, third]).winners == {"a/first"}
    after = resolve_claims([second, third])
    assert after.winners == {"b/second"}
    assert after.losers["c/third"].winner == "b/second"


def test_unreadable_routes_and_nameless_offloads_claim_nothing() -> None:
    good = offload("a/good", "2026-01-01T10:00:05Z", hosts=["chat.test"])
    unreadable: dict[str, Any] = offload("a/bad", "2026-01-01T10:00:00Z")
    unreadable["spec"]["route"] = {"hosts": "chat.test"}
    nameless = offload("a/x", "2026-01-01T09:00:00Z", hosts=["chat.test"])
    del nameless["metadata"]["name"]
    assert resolve_claims([good, unreadable, nameless, {"spec": None}]).winners == {"a/good"}


def test_an_offload_without_a_creation_time_counts_as_the_youngest() -> None:
    dated = offload("b/dated", "2026-01-01T10:00:00Z", hosts=["chat.test"])
    undated = offload("a/undated", None, hosts=["chat.test"])
    assert resolve_claims([undated, dated]).winners == {"b/dated"}


def test_the_message_names_the_winner_and_the_route() -> None:
    message = Conflict("b/x", "a/y", ("chat.test", "/v1")).message
    assert "a/y" in message
    assert "host chat.test path prefix /v1" in message
    assert "every host" in Conflict("b/x", "a/y", ("", "/")).message
