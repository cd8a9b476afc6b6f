"""The controller's claims mirror: who is queued again when standings change, and who is held back."""

from __future__ import annotations

from typing import Any, cast

import pytest

from vk_provider.controller import claims as claims_module
from vk_provider.controller.claims import RouteClaims
from vk_provider.kit.kube import KubeApi
from vk_provider.offload.claims import resolve_claims
from vk_provider.offload.retained import RetainedRoute


def _offload(namespace: str, created: str, *, deleting: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "namespace": namespace,
        "name": "tokens",
        "uid": f"uid-{namespace}",
        "creationTimestamp": created,
    }
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T11:00:00Z"
    return {"metadata": metadata, "spec": {"route": {"hosts": ["chat.test"]}}}


def _claims(namespace: str | None, *offloads: dict[str, Any]) -> tuple[RouteClaims, list[str]]:
    # The mirror is filled by hand: the API is never called in these tests.
    claims = RouteClaims(cast(KubeApi, None), namespace=namespace)
    claims.offloads.objects = {offload["metadata"]["uid"]: offload for offload in offloads}
    claims.offloads.synced.set()
    claims.kept_routes.synced.set()
    queued: list[str] = []
    claims._requeue = queued.append
    return claims, queued


async def test_a_new_loser_and_the_heir_of_a_deleted_winner_are_queued_in_scope_only() -> None:
    first = _offload("default", "2026-01-01T10:00:00Z")
    second = _offload("team", "2026-01-01T10:00:01Z")
    claims, queued = _claims("team", first, second)
    await claims._changed("uid-team")
    assert queued == ["team/tokens"]  # it lost: reconciled again to say so
    await claims._changed("uid-team")
    assert queued == ["team/tokens"]  # nothing changed for it
    del claims.offloads.objects["uid-default"]
    await claims._changed("uid-default")
    assert queued == ["team/tokens", "team/tokens"]  # the winner is gone: it takes the route over

    everywhere, queued_everywhere = _claims(None, first, second)
    await everywhere._changed("uid-team")
    assert queued_everywhere == ["team/tokens"]
    only_default, queued_default = _claims("default", first, second)
    await only_default._changed("uid-team")
    assert queued_default == []


async def test_the_offload_as_read_is_judged_even_before_the_mirror_has_it() -> None:
    first = _offload("default", "2026-01-01T10:00:00Z")
    claims, _ = _claims("team", first)
    conflict = await claims.conflict(_offload("team", "2026-01-01T10:00:01Z"))
    assert conflict is not None
    assert conflict.winner == "default/tokens"
    assert await claims.conflict(first) is None


async def test_an_offload_being_deleted_is_never_held_back() -> None:
    first = _offload("default", "2026-01-01T10:00:00Z")
    claims, _ = _claims("team", first)
    assert await claims.conflict(_offload("team", "2026-01-01T10:00:01Z", deleting=True)) is None


async def test_a_kept_route_holds_the_host_and_its_deletion_requeues_the_loser() -> None:
    kept = RetainedRoute("default", "svc", "tokens", ("chat.test",), "", (), "2026-01-01T10:00:00Z")
    kept_object = kept.to_object("uid-svc")
    kept_object["metadata"]["uid"] = "uid-kept"
    rival = _offload("team", "2026-01-01T10:00:01Z")
    claims, queued = _claims("team", rival)
    claims.kept_routes.objects = {"uid-kept": kept_object}
    await claims._changed("uid-kept")
    assert queued == ["team/tokens"]
    conflict = await claims.conflict(rival)
    assert conflict is not None
    assert conflict.kept_on == "default/svc"
    assert not await claims.holds(rival)
    assert await claims.kept_in("default") == [kept]
    assert await claims.kept_in("team") == []
    del claims.kept_routes.objects["uid-kept"]  # the operator lets the host go
    await claims._changed("uid-kept")
    assert queued == ["team/tokens", "team/tokens"]
    assert await claims.holds(rival)


async def test_an_offload_being_deleted_still_holds_its_route_or_not() -> None:
    first = _offload("default", "2026-01-01T10:00:00Z", deleting=True)
    second = _offload("team", "2026-01-01T10:00:01Z", deleting=True)
    claims, _ = _claims(None, first, second)
    assert await claims.holds(first)
    assert not await claims.holds(second)


def _twenty_offloads() -> list[dict[str, Any]]:
    offloads = [_offload(f"ns{index}", f"2026-01-01T10:00:{index:02d}Z") for index in range(20)]
    for index, offload in enumerate(offloads):
        offload["metadata"]["resourceVersion"] = str(100 + index)
    return offloads


def _counting_resolutions(monkeypatch: pytest.MonkeyPatch) -> list[None]:
    """One entry per resolution of the claims from now on."""
    resolutions: list[None] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        resolutions.append(None)
        return resolve_claims(*args, **kwargs)

    monkeypatch.setattr(claims_module, "resolve_claims", counted)
    return resolutions


async def test_passes_over_offloads_the_mirror_already_judged_resolve_no_claims_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    offloads = _twenty_offloads()
    claims, _ = _claims(None, *offloads)
    resolutions = _counting_resolutions(monkeypatch)
    await claims._changed("uid-ns0")
    verdicts = [await claims.conflict(offload) for offload in offloads for _ in range(5)]
    assert len(resolutions) == 1  # the change's own; a hundred passes read it
    assert [verdict.winner if verdict else None for verdict in verdicts[5::5]] == ["ns0/tokens"] * 19
    newer = {**offloads[3], "metadata": {**offloads[3]["metadata"], "resourceVersion": "999"}}
    await claims.conflict(newer)  # read fresher than the mirror: judged anew
    assert len(resolutions) == 2


async def test_a_status_change_resolves_nothing_and_a_route_change_resolves_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A wave writes every Offload's status many times: each write must not resolve every claim."""
    offloads = _twenty_offloads()
    claims, queued = _claims(None, *offloads)
    resolutions = _counting_resolutions(monkeypatch)
    await claims._offload_changed("uid-ns0")
    assert len(resolutions) == 1
    for version in range(200, 300):  # the status of ns5 moves on, its route does not
        claims.offloads.objects["uid-ns5"] = {
            **offloads[5],
            "metadata": {**offloads[5]["metadata"], "resourceVersion": str(version)},
            "status": {"awayWeight": version % 100},
        }
        await claims._offload_changed("uid-ns5")
    assert len(resolutions) == 1
    assert (await claims.conflict(claims.offloads.objects["uid-ns5"])) is not None  # still ns0's host
    assert len(resolutions) == 1  # the read of the latest version reused the resolution
    rerouted = {**offloads[5], "spec": {"route": {"hosts": ["own.test"]}}}
    rerouted["metadata"] = {**offloads[5]["metadata"], "resourceVersion": "400"}
    claims.offloads.objects["uid-ns5"] = rerouted
    await claims._offload_changed("uid-ns5")
    assert len(resolutions) == 2
    assert await claims.conflict(rerouted) is None  # its own host now: it wins
    assert "ns5/tokens" in queued  # its standing changed, so it is queued again
