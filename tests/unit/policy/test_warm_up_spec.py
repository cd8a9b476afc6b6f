"""`spec.warmUp`: its defaults, the schedule's cron read by cronsim, and errors naming the field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.unit.policy.test_spec import raw
from vk_provider.policy.schedule import ScheduledRun, scheduled_gpus, window_open
from vk_provider.policy.spec import InvalidPolicy, parse_policy

pytestmark = pytest.mark.unit

NIGHTLY = ScheduledRun(cron="0 2 * * *", gpus=8, lead_seconds=600, duration_seconds=1800)
RUN = datetime(2026, 12, 3, 2, 0, tzinfo=UTC)


def test_defaults_warm_for_ten_minutes_with_no_schedule() -> None:
    warm_up = parse_policy(raw()).warm_up
    assert (warm_up.enabled, warm_up.hold_seconds, warm_up.schedule) == (True, 600, ())


def test_a_schedule_entry_takes_the_crd_s_defaults() -> None:
    warm_up = parse_policy(
        raw(warmUp={"holdSeconds": 120, "schedule": [{"cron": "30 1 * * 1-5", "gpus": 4}]})
    )
    assert warm_up.warm_up.hold_seconds == 120
    assert warm_up.warm_up.schedule == (ScheduledRun(cron="30 1 * * 1-5", gpus=4),)


@pytest.mark.parametrize(
    ("warm_up", "message"),
    [
        ({"enabled": "yes"}, "spec.warmUp.enabled must be true or false"),
        ({"holdSeconds": 0}, "spec.warmUp.holdSeconds must be at least 1"),
        ({"schedule": {"cron": "0 2 * * *"}}, "spec.warmUp.schedule must be a list"),
        ({"schedule": ["0 2 * * *"]}, "spec.warmUp.schedule[0] must be an object"),
        ({"schedule": [{"gpus": 2}]}, "spec.warmUp.schedule[0].cron is required"),
        (
            {"schedule": [{"cron": "0 2 * *", "gpus": 2}]},
            "spec.warmUp.schedule[0].cron '0 2 * *' is not a 5-field",
        ),
        (
            {"schedule": [{"cron": "61 2 * * *", "gpus": 2}]},
            "spec.warmUp.schedule[0].cron '61 2 * * *': Bad minute",
        ),
        ({"schedule": [{"cron": "0 2 * * *"}]}, "spec.warmUp.schedule[0].gpus is required"),
        ({"schedule": [{"cron": "0 2 * * *", "gpus": 0}]}, "spec.warmUp.schedule[0].gpus must be at least 1"),
        (
            {
                "schedule": [
                    {"cron": "0 2 * * *", "gpus": 1},
                    {"cron": "0 3 * * *", "gpus": 1, "leadSeconds": -5},
                ]
            },
            "spec.warmUp.schedule[1].leadSeconds must be at least 0",
        ),
    ],
)
def test_bad_warm_up_names_the_field(warm_up: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidPolicy) as error:
        parse_policy(raw(warmUp=warm_up))
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("offset", "open_"),
    [
        (timedelta(seconds=-601), False),  # before the lead
        (timedelta(seconds=-600), True),  # the lead begins
        (timedelta(0), True),  # the run starts
        (timedelta(seconds=1800), True),  # its duration's last second
        (timedelta(seconds=1801), False),  # over
        (timedelta(hours=12), False),
    ],
)
def test_a_window_opens_lead_seconds_before_a_run_and_closes_duration_seconds_after(
    offset: timedelta, open_: bool
) -> None:
    assert window_open(RUN + offset, NIGHTLY) is open_


def test_only_the_open_windows_count_their_gpus() -> None:
    weekly = ScheduledRun(cron="0 2 * * 0", gpus=4)  # Sundays; 2026-12-03 is a Thursday
    assert scheduled_gpus(RUN, (NIGHTLY, weekly)) == 8
    assert scheduled_gpus(datetime(2026, 12, 6, 2, 5, tzinfo=UTC), (NIGHTLY, weekly)) == 12
