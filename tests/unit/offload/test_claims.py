"""Route claims: the oldest Offload holding a host and path prefix keeps it, whatever the order."""

from __future__ import annotations

import itertools
from typing import Any

from vk_provider.offload.claims import Conflict, claim_keys, resolve_claims
from vk_provider.offload.retained import RetainedRoute


def offload(
    key: str,
    created: str | None,
    *,
    hosts: list[str] | None = None,
    prefix: str | None = None,
    allowed: list[str] | None = None,
    service: str = "svc",
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
    if allowed is not None:
        route["allowedNamespaces"] = allowed
    return {"metadata": metadata, "spec": {"home": {"service": service}, "route": route}}


def kept(
    key: str, since: str, *, hosts: tuple[str, ...] = ("chat.test",), service: str = "svc"
) -> RetainedRoute:
    namespace, name = key.split("/")
    return RetainedRoute(namespace, service, name, hosts, "", (), since)


def test_the_older_claim_wins_in_any_namespace_and_any_order() -> None:
    first = offload("default/tokens", "2026-01-01T10:00:00Z", hosts=["chat.test"], prefix="/v1")
    second = offload("attacker/tokens", "2026-01-01T10:00:01Z", hosts=["chat.test"], prefix="/v1")
    for order in ([first, second], [second, first]):
        claims = resolve_claims(order)
        assert claims.winners == {"default/tokens"}
        assert claims.conflict("attacker", "tokens") == Conflict(
            "attacker/tokens", "default/tokens", ("chat.test", "/v1"), foreign_host=True
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


def test_in_one_namespace_only_identical_matches_conflict() -> None:
    base = offload("a/base", "2026-01-01T10:00:00Z", hosts=["chat.test"], prefix="/v1")
    longer = offload("a/longer", "2026-01-01T10:00:01Z", hosts=["chat.test"], prefix="/v1/chat")
    other_host = offload("c/other", "2026-01-01T10:00:02Z", hosts=["other.test"], prefix="/v1")
    any_host = offload("d/any", "2026-01-01T10:00:03Z", prefix="/v1")
    claims = resolve_claims([base, longer, other_host, any_host])
    assert claims.winners == {"a/base", "a/longer", "c/other", "d/any"}
    assert not claims.losers
    assert claims.owners == {"chat.test": "a", "other.test": "c", "": "d"}


def test_another_namespace_takes_no_path_of_an_owned_host_whatever_its_prefix() -> None:
    owner = offload("default/tokens", "2026-01-01T10:00:00Z", hosts=["tokens.demo"])
    for prefix in ("/v1", "/v1/completions", "/", None):
        rival = offload("team/tokens", "2026-01-01T10:00:01Z", hosts=["Tokens.Demo."], prefix=prefix)
        claims = resolve_claims([rival, owner])
        assert claims.winners == {"default/tokens"}, prefix
        conflict = claims.conflict("team", "tokens")
        assert conflict is not None
        assert conflict.foreign_host
        assert conflict.winner == "default/tokens"


def test_the_owner_lets_a_namespace_in_by_name_and_only_its_own_claim_counts() -> None:
    owner = offload("default/tokens", "2026-01-01T10:00:00Z", hosts=["tokens.demo"], allowed=["team"])
    carved = offload("team/v1", "2026-01-01T10:00:01Z", hosts=["tokens.demo"], prefix="/v1")
    same_key = offload("team/root", "2026-01-01T10:00:02Z", hosts=["tokens.demo"])
    stranger = offload("other/v2", "2026-01-01T10:00:03Z", hosts=["tokens.demo"], prefix="/v2")
    # An allowance written by someone who does not own the host lets nobody in.
    self_allowed = offload(
        "other/v3", "2026-01-01T10:00:04Z", hosts=["tokens.demo"], prefix="/v3", allowed=["other"]
    )
    claims = resolve_claims([stranger, same_key, carved, owner, self_allowed])
    assert claims.winners == {"default/tokens", "team/v1"}
    assert not claims.losers["team/root"].foreign_host  # allowed in, but the key is held
    assert claims.losers["other/v2"].foreign_host
    assert claims.losers["other/v3"].foreign_host
    assert claims.owners == {"tokens.demo": "default"}


def test_every_host_is_owned_like_a_host_and_does_not_own_named_hosts() -> None:
    catch_all = offload("a/all", "2026-01-01T10:00:00Z", prefix="/")
    other_catch_all = offload("b/all", "2026-01-01T10:00:01Z", prefix="/v1")
    named = offload("b/named", "2026-01-01T10:00:02Z", hosts=["chat.test"], prefix="/v1")
    claims = resolve_claims([named, other_catch_all, catch_all])
    assert claims.winners == {"a/all", "b/named"}
    assert claims.losers["b/all"].foreign_host
    assert claims.owners == {"": "a", "chat.test": "b"}


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
    foreign = Conflict("b/x", "a/y", ("chat.test", "/v1"), foreign_host=True).message
    assert "host chat.test belongs to namespace a" in foreign
    assert "namespace b in spec.route.allowedNamespaces" in foreign
    kept_message = Conflict("b/x", "a/y", ("chat.test", "/"), foreign_host=True, kept_on="a/svc").message
    assert "deleted Offload a/y left (KeptRoute a/y, for Service a/svc)" in kept_message


def test_a_kept_route_holds_its_hosts_at_its_age_after_the_offload_is_gone() -> None:
    rival = offload("team/tokens", "2026-01-01T10:00:05Z", hosts=["chat.test"], prefix="/v1")
    route = kept("default/tokens", "2026-01-01T10:00:00Z")
    claims = resolve_claims([rival], [route])
    assert claims.kept == {route}
    assert claims.winners == {"default/tokens"}
    conflict = claims.conflict("team", "tokens")
    assert conflict is not None
    assert conflict.kept_on == "default/svc"
    # Without it, the rival would have the host.
    assert resolve_claims([rival]).winners == {"team/tokens"}


def test_a_new_offload_of_the_same_service_takes_a_kept_route_over_at_its_age() -> None:
    route = kept("default/tokens", "2026-01-01T10:00:00Z")
    rival = offload("team/tokens", "2026-01-01T10:00:05Z", hosts=["chat.test"])
    heir = offload("default/tokens-v2", "2026-01-01T10:00:09Z", hosts=["chat.test"], allowed=["team"])
    claims = resolve_claims([heir, rival], [route])
    # The kept route no longer routes; the heir does, and owns the host at the kept route's age,
    # so the rival created in between is let in only because the heir allows its namespace.
    assert claims.kept == frozenset()
    assert claims.winners == {"default/tokens-v2"}
    assert not claims.losers["team/tokens"].foreign_host  # allowed in, but `/` is the heir's
    without_allowance = offload("default/tokens-v2", "2026-01-01T10:00:09Z", hosts=["chat.test"])
    claims = resolve_claims([without_allowance, rival], [route])
    assert claims.winners == {"default/tokens-v2"}
    assert claims.losers["team/tokens"].foreign_host
    # A recreated Offload of the same name takes it over whatever Service it names.
    same_name = offload("default/tokens", "2026-01-01T10:00:09Z", hosts=["chat.test"], service="new")
    assert resolve_claims([same_name, rival], [route]).winners == {"default/tokens"}


def test_a_kept_route_loses_like_an_offload_and_one_marker_per_offload_routes() -> None:
    owner = offload("default/tokens", "2026-01-01T10:00:00Z", hosts=["chat.test"])
    late = kept("team/tokens", "2026-01-01T10:00:05Z")
    claims = resolve_claims([owner], [late])
    assert claims.kept == frozenset()
    assert claims.losers["team/tokens"].foreign_host
    older = kept("team/api", "2026-01-01T09:00:00Z", hosts=("api.test",), service="a")
    newer = kept("team/api", "2026-01-01T09:30:00Z", hosts=("other.test",), service="b")
    assert resolve_claims([], [newer, older]).kept == {older}
