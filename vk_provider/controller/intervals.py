"""A step's interval: its start (in memory only), the severe gate's short windows within it, and the
gates' judgement once it is over.

Once every router applies a step's weight, the interval counts; the gates then judge the receiving
side's traffic over it (against the other side's over the same interval while the weight sends it
traffic too, `vk_provider.controller.baseline`) and the pure plan (`vk_provider.offload.plan`) says
advance, hold, roll back or finish. Until it is over, each short window is judged by the severe gate
alone, so a side failing badly is left at once.
"""

from __future__ import annotations

import dataclasses
import math

from vk_provider.controller.gates import Judgement, judge, judge_severe
from vk_provider.controller.passes import POLL_SECONDS, Pass, receiving_side
from vk_provider.controller.reconcilerbase import ReconcilerBase
from vk_provider.controller.scrapes import Scrape, counted_since
from vk_provider.kit.timestamps import format_timestamp
from vk_provider.offload import plan
from vk_provider.offload.plan import Action
from vk_provider.offload.spec import OffloadSpec
from vk_provider.runtime.queueing import Requeue

GATES_PASSING = {
    plan.Verdict.HEALTHY: "True",
    plan.Verdict.UNHEALTHY: "False",
    plan.Verdict.SEVERE: "False",
}
"""The GatesPassing condition's status for each verdict (not enough data: Unknown)."""


@dataclasses.dataclass
class IntervalStart:
    """The sample taken when a step's interval began (in memory only)."""

    step_key: tuple[int, int, int]
    """(step index, weight, consecutive failures): a new key means a new interval."""
    started: float
    samples: Scrape
    """The counters when the interval began."""
    window_started: float
    window_samples: Scrape
    """The start of the current short window in which the severe gate is checked."""


class StepIntervals(ReconcilerBase):
    """The interval of the step a migration is at: begun, watched for a severe failure, judged."""

    def _begin_interval(self, work: Pass, step_key: tuple[int, int, int], samples: Scrape) -> None:
        now = self._monotonic()
        self._intervals[work.spec.key] = IntervalStart(step_key, now, samples, now, samples)
        work.set(step_started_at=work.now)

    def _within_interval(self, work: Pass, started: IntervalStart, samples: Scrape) -> Requeue:
        """Judge the interval once it is over; until then, check each short window for a severe failure."""
        spec = work.spec
        remaining = work.step_interval_seconds - (self._monotonic() - started.started)
        if remaining <= 0:
            return self._judge(work, started, samples)
        severe = self._severe_window(work, started, samples)
        if severe is not None:
            return self._act_on_severe(work, severe)
        # Looked at every POLL_SECONDS, not once per window: a window that already holds enough
        # requests at a severe error rate need not run out before it counts.
        return min(remaining, severe_poll_seconds(spec))

    def _severe_window(self, work: Pass, started: IntervalStart, samples: Scrape) -> Judgement | None:
        """Judge the short window so far by the severe gate alone; a new window starts when it is over."""
        side = receiving_side(work.direction)
        gates = work.spec.strategy.gates
        severe_gate = gates.severe
        judgement = None
        counted, baseline = counted_since(samples, started.window_samples)
        if counted is not None:
            judgement = judge_severe(counted, gates, side, baseline)
        if judgement is None and self._monotonic() - started.window_started >= severe_gate.window_seconds:
            started.window_started, started.window_samples = self._monotonic(), samples
        return judgement

    def _act_on_severe(self, work: Pass, judgement: Judgement) -> Requeue:
        side = receiving_side(work.direction)
        work.set(last_check={**judgement.as_status(), "side": side, "at": format_timestamp(work.now)})
        work.condition("GatesPassing", "False", judgement.verdict.value, judgement.message)
        self._metrics.severe_rollback(work.spec.namespace, work.spec.name)
        decision = plan.next_step(work.state(), judgement.verdict)
        return self._decide(work, decision, judged=judgement.message, outcome_reason="SevereFailure")

    def _judge(self, work: Pass, started: IntervalStart, samples: Scrape) -> Requeue:
        """The interval is over: judge it and act on the plan's decision."""
        spec = work.spec
        side = receiving_side(work.direction)
        interval, baseline = counted_since(samples, started.samples)  # None unless the same routers
        judgement = judge(interval, spec.strategy.gates, side, baseline)
        work.set(last_check={**judgement.as_status(), "side": side, "at": format_timestamp(work.now)})
        work.condition(
            "GatesPassing",
            GATES_PASSING.get(judgement.verdict, "Unknown"),
            judgement.verdict.value,
            judgement.message,
        )
        if judgement.verdict is plan.Verdict.SEVERE:
            return self._act_on_severe(work, judgement)
        decision = plan.next_step(work.state(), judgement.verdict)
        if decision.action is not Action.HOLD:
            return self._decide(work, decision, judged=judgement.message)
        # Held: a new interval starts now, from the sample just taken.
        step_key = (started.step_key[0], started.step_key[1], decision.state.consecutive_failures)
        self._begin_interval(work, step_key, samples)
        interval_seconds = float(work.step_interval_seconds)
        if judgement.verdict is plan.Verdict.UNHEALTHY:
            self._event(work.offload, "Warning", "GateFailed", f"{decision.reason}: {judgement.message}")
            work.set(
                consecutive_failures=decision.state.consecutive_failures,
                progress_at=work.now,
                message=decision.reason,
            )
            return interval_seconds
        if self._deadline_passed(work):
            return self._waiting(work, "NotEnoughData", judgement.message)
        work.set(message=f"holding away weight {started.step_key[1]}: {judgement.message}")
        return interval_seconds


def severe_poll_seconds(spec: OffloadSpec) -> float:
    """How soon to look again within a step's interval: every second while the severe gate is on."""
    return POLL_SECONDS if spec.strategy.gates.severe.enabled else math.inf
