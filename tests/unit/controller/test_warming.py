"""Away replicas kept warm while an Offload serves at home: the pilot light (`spec.away.warmReplicas`)
and warm-ups (the warm-until annotation), driven pass by pass through the Reconciler on an in-memory
apiserver (`offload_plane`), with a manual clock."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.unit.controller.offload_plane import (
    AWAY,
    HOME,
    OFFLOAD,
    START,
    MemoryApi,
    controller,
    serving_home,
)
from vk_provider.controller import deriving
from vk_provider.controller.warming import (
    EXPIRY_MARGIN_SECONDS,
    WARMING_POLL_SECONDS,
    WarmReason,
    move_away_replicas,
    next_look,
    serves_at_home,
    warm_target,
)
from vk_provider.kit.timestamps import format_timestamp
from vk_provider.offload.names import TEMPLATE_HASH_ANNOTATION, WARM_UNTIL_ANNOTATION, WARMED_BY_ANNOTATION
from vk_provider.offload.spec import parse_offload
from vk_provider.offload.status import OffloadStatus

pytestmark = pytest.mark.unit

HOME_STATUS = OffloadStatus(target_placement="home", away_weight=0)


def annotated(api: MemoryApi, *, until_seconds: float, by: str = "policy/train") -> str:
    until = format_timestamp(START + timedelta(seconds=until_seconds))
    api.annotate(**{WARM_UNTIL_ANNOTATION: until, WARMED_BY_ANNOTATION: by})
    return until


async def test_a_pilot_light_runs_ready_away_replicas_while_home_keeps_all_the_traffic() -> None:
    api = serving_home(away={"warmReplicas": 1})
    control = controller(api)
    requeue = await control.reconcile()
    away = api.objects[AWAY]
    assert away["spec"]["replicas"] == 1
    # Derived exactly as a migration derives it: a flip reuses this Deployment as it is.
    derived = deriving.away_deployment(
        parse_offload(api.offload()),
        api.objects[HOME],
        api.objects["/api/v1/namespaces/team/services/chat"],
        1,
    )
    assert (
        away["metadata"]["annotations"][TEMPLATE_HASH_ANNOTATION]
        == (derived["metadata"]["annotations"][TEMPLATE_HASH_ANNOTATION])
    )
    assert api.status()["warm"] == {"replicas": 1, "ready": 0, "reason": "PilotLight"}
    assert api.condition("AwayWarm")["reason"] == "Warming"
    assert requeue is not None
    assert requeue <= WARMING_POLL_SECONDS  # it follows the cold start

    api.settle()
    await control.reconcile()
    await control.reconcile()
    assert api.status()["warm"] == {"replicas": 1, "ready": 1, "reason": "PilotLight"}
    assert (api.condition("AwayWarm")["status"], api.condition("AwayWarm")["reason"]) == (
        "True",
        "PilotLight",
    )
    assert control.events.reasons().count("AwayWarm") == 1
    assert api.status()["awayWeight"] == 0
    assert set(control.routes.applied) == {0}  # the warm replicas get no traffic
    assert api.scales_of(AWAY) == [1]


async def test_a_warm_up_scales_away_to_a_move_s_count_at_weight_0_then_expires_back_to_the_pilot_light() -> (
    None
):
    api = serving_home(home_replicas=2, away={"warmReplicas": 1})
    until = annotated(api, until_seconds=40)
    control = controller(api)
    await control.reconcile()
    assert api.objects[AWAY]["spec"]["replicas"] == 2  # what a move away would run: the home count
    assert api.status()["warm"] == {"replicas": 2, "ready": 0, "until": until, "reason": "WarmUp"}
    started = [event for event in control.events.posted if event.reason == "WarmUpStarted"]
    assert len(started) == 1, control.events.posted
    assert "policy/train" in started[0].message

    api.settle()
    await control.reconcile()
    assert (api.condition("AwayWarm")["status"], api.condition("AwayWarm")["reason"]) == ("True", "WarmUp")
    assert api.status()["awayWeight"] == 0
    assert set(control.routes.applied) == {0}

    control.clock.advance(41)
    await control.reconcile()
    assert api.condition("AwayWarm")["status"] == "True"  # the pilot light's replica stayed ready
    api.settle()
    await control.reconcile()
    assert api.scales_of(AWAY) == [2, 1]
    assert control.events.reasons().count("AwayWarm") == 1
    assert api.status()["warm"] == {"replicas": 1, "ready": 1, "reason": "PilotLight"}
    assert control.events.reasons().count("WarmUpExpired") == 1
    assert control.events.reasons().count("WarmUpStarted") == 1


async def test_a_flip_during_a_warm_up_finds_the_away_replicas_ready_and_only_shifts_traffic() -> None:
    api = serving_home(home_replicas=2)
    annotated(api, until_seconds=600)
    control = controller(api)
    await control.reconcile()
    api.settle()
    await control.reconcile()
    assert api.condition("AwayWarm")["status"] == "True"
    scaled_before = api.scales_of(AWAY)

    api.change_spec(placement="away")
    await control.reconcile()  # the migration starts
    assert api.status()["phase"] == "Preparing"
    assert "warm" not in api.status()
    assert api.condition("AwayWarm")["reason"] == "NotAtHome"
    await control.reconcile()  # Preparing passes at once: the replicas are ready
    assert api.status()["phase"] in ("Shifting", "Finalizing"), api.status()
    assert api.status()["awayWeight"] == 100
    assert api.scales_of(AWAY) == scaled_before  # nothing was scaled or created for the flip
    assert control.events.reasons().count("WarmUpExpired") == 0


async def test_a_move_home_ends_with_the_pilot_light_running_instead_of_nothing() -> None:
    api = serving_home(home_replicas=2, away={"warmReplicas": 1})
    spec = parse_offload(api.offload())
    api.objects[AWAY] = deriving.away_deployment(
        spec, api.objects[HOME], api.objects["/api/v1/namespaces/team/services/chat"], 2
    )
    api.objects[AWAY]["metadata"]["generation"] = 1
    api.settle()
    api.objects[OFFLOAD]["status"] = {
        "phase": "Finalizing",
        "targetPlacement": "home",
        "awayWeight": 0,
        "outcome": "Succeeded",
        "outcomeReason": "Succeeded",
        "homeReplicas": 2,
        "observedGeneration": 1,
    }
    control = controller(api)
    await control.reconcile()
    assert api.scales_of(AWAY) == [1]
    scaled = [event for event in control.events.posted if event.reason == "AwayScaledDown"]
    assert len(scaled) == 1
    assert "pilot light" in scaled[0].message
    api.settle()  # one pod left, the kept one: nothing more to wait for
    await control.reconcile()
    assert api.status()["phase"] == "Succeeded"
    await control.reconcile()
    assert api.status()["warm"] == {"replicas": 1, "ready": 1, "reason": "PilotLight"}
    assert api.objects[AWAY]["spec"]["replicas"] == 1


async def test_a_deleted_offload_still_scales_its_away_side_to_0_and_lets_go() -> None:
    api = serving_home(away={"warmReplicas": 1})
    control = controller(api)
    await control.reconcile()
    api.settle()
    await control.reconcile()
    api.objects[OFFLOAD]["metadata"]["deletionTimestamp"] = "2026-12-07T02:00:05Z"
    for _ in range(10):
        if not api.objects[OFFLOAD]["metadata"].get("finalizers"):
            break
        await control.reconcile()
        api.settle()
    assert not api.objects[OFFLOAD]["metadata"].get("finalizers"), control.events.posted
    assert api.scales_of(AWAY) == [1, 0]
    assert AWAY not in api.objects
    assert "Released" in control.events.reasons()


async def test_an_unreadable_warm_until_is_one_warning_and_is_otherwise_ignored() -> None:
    api = serving_home()
    api.annotate(**{WARM_UNTIL_ANNOTATION: "tomorrow morning"})
    control = controller(api)
    for _ in range(3):
        await control.reconcile()
    warnings = [event for event in control.events.posted if event.reason == "InvalidWarmUntil"]
    assert [warning.type for warning in warnings] == ["Warning"]
    assert "tomorrow morning" in warnings[0].message
    condition = api.condition("AwayWarm")
    assert (condition["status"], condition["reason"]) == ("False", "InvalidWarmUntil")
    assert api.condition("Ready")["status"] == "True"  # the Offload is acted on as ever
    assert AWAY not in api.objects
    assert api.status()["warm"] == {"replicas": 0, "ready": 0, "reason": "Cold"}


async def test_an_offload_with_nothing_warm_wanted_says_cold_and_creates_no_away_side() -> None:
    api = serving_home()
    control = controller(api)
    assert await control.reconcile() is not None
    assert AWAY not in api.objects
    assert AWAY in api.reads
    api.reads.clear()
    await control.reconcile()
    assert AWAY not in api.reads  # known cold: no read of its own on every pass
    condition = api.condition("AwayWarm")
    assert (condition["status"], condition["reason"]) == ("False", "Cold")
    assert not [reason for reason in control.events.reasons() if "Warm" in reason]


# -- the decisions alone ------------------------------------------------------------------------


def test_a_warm_up_wants_a_move_away_s_count_never_below_the_pilot_light() -> None:
    ahead = {WARM_UNTIL_ANNOTATION: format_timestamp(START + timedelta(seconds=60))}
    assert move_away_replicas(parse_offload(serving_home(away={"replicas": 3}).offload()), 2) == 3
    assert move_away_replicas(parse_offload(serving_home().offload()), 0) == 1
    for away, home, wanted in (
        ({}, 2, 2),
        ({"replicas": 3}, 2, 3),
        ({"replicas": 1, "warmReplicas": 2}, 2, 2),
    ):
        offload = serving_home(away=away).offload()
        offload["metadata"]["annotations"] = ahead
        target = warm_target(parse_offload(offload), START, home)
        assert (target.replicas, target.reason) == (wanted, WarmReason.WARM_UP), away


def test_the_warmer_looks_again_just_after_a_warm_up_ends_and_often_while_replicas_start() -> None:
    offload = serving_home().offload()
    offload["metadata"]["annotations"] = {
        WARM_UNTIL_ANNOTATION: format_timestamp(START + timedelta(seconds=40))
    }
    target = warm_target(parse_offload(offload), START, 2)
    assert next_look(START, target, ready=2) == 40 + EXPIRY_MARGIN_SECONDS
    assert next_look(START, target, ready=1) == WARMING_POLL_SECONDS
    assert next_look(START + timedelta(seconds=39), target, ready=2) == 1 + EXPIRY_MARGIN_SECONDS
    pilot = warm_target(parse_offload(serving_home(away={"warmReplicas": 1}).offload()), START, 2)
    assert next_look(START, pilot, ready=1) is None  # nothing to wait for


def test_a_passed_warm_up_leaves_the_pilot_light_or_nothing() -> None:
    passed = {WARM_UNTIL_ANNOTATION: format_timestamp(START - timedelta(seconds=1))}
    for away, wanted, reason in (({"warmReplicas": 2}, 2, WarmReason.PILOT_LIGHT), ({}, 0, WarmReason.COLD)):
        offload = serving_home(away=away).offload()
        offload["metadata"]["annotations"] = passed
        target = warm_target(parse_offload(offload), START, 2)
        assert (target.replicas, target.reason, target.ignored) == (wanted, reason, "")


def test_warmth_applies_only_while_home_serves_all_the_traffic() -> None:
    spec = parse_offload(serving_home(away={"warmReplicas": 1}).offload())
    assert serves_at_home(spec, HOME_STATUS, in_emergency=False)
    assert not serves_at_home(spec, HOME_STATUS, in_emergency=True)
    assert not serves_at_home(
        spec, OffloadStatus(target_placement="home", away_weight=50), in_emergency=False
    )
    assert not serves_at_home(spec, OffloadStatus(target_placement="away", away_weight=0), in_emergency=False)
    deleted = serving_home(away={"warmReplicas": 1}).offload()
    deleted["metadata"]["deletionTimestamp"] = "2026-12-07T02:00:00Z"
    assert not serves_at_home(parse_offload(deleted), HOME_STATUS, in_emergency=False)
    away = serving_home(away={"warmReplicas": 1}).offload()
    away["spec"]["placement"] = "away"
    assert not serves_at_home(parse_offload(away), HOME_STATUS, in_emergency=False)
