"""The KeptRoute: written and read back, and what a reader refuses."""

from __future__ import annotations

from typing import Any

from vk_provider.offload.retained import RetainedRoute, retained_route, retained_routes

ROUTE = RetainedRoute(
    "default", "tokens", "tokens-offload", ("tokens.demo",), "/v1", ("team",), "2026-01-01T10:00:00Z"
)


def test_a_written_route_reads_back_the_same_and_is_owned_by_its_service() -> None:
    kept = ROUTE.to_object("uid-svc")
    assert retained_route(kept) == ROUTE
    assert ROUTE.key == "default/tokens-offload"
    assert kept["metadata"]["name"] == "tokens-offload"
    bare = RetainedRoute("default", "tokens", "t", ("tokens.demo",), "", (), "2026-01-01T10:00:00Z")
    assert bare.spec() == {
        "service": "tokens",
        "hosts": ["tokens.demo"],
        "claimedSince": "2026-01-01T10:00:00Z",
    }
    assert retained_route(bare.to_object("uid-svc")) == bare
    (owner,) = kept["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Service", "tokens", "uid-svc")


def test_unreadable_kept_routes_keep_nothing() -> None:
    def kept(**spec: Any) -> dict[str, Any]:
        return {"metadata": {"namespace": "default", "name": "x"}, "spec": spec}

    since = "2026-01-01T10:00:00Z"
    unreadable = [
        kept(service="s", claimedSince=since),  # neither hosts nor a prefix
        kept(service="s", hosts=[""], claimedSince=since),
        kept(service="s", pathPrefix="v1", claimedSince=since),
        kept(hosts=["a.test"], claimedSince=since),  # to which Service?
        kept(service="s", hosts=["a.test"]),  # of what age?
        {"metadata": None, "spec": ROUTE.spec()},
    ]
    assert retained_routes([*unreadable, ROUTE.to_object("uid")]) == [ROUTE]
