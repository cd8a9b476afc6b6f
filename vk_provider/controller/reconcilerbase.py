"""What every part of the reconciler shares: the collaborators and the memories kept between passes,
the acts each part makes (an Event, a status write, a problem reported, the data plane asked), and
the phase machine's moves a part may call for (`reconciler.Reconciler` makes them).

The parts are mixed into `Reconciler`, each a module of its own: a step's interval (`intervals`), the
serving side's watch and the emergency migration (`emergency`), the deletion path (`deletion`), home
pods on unhealthy nodes (`unhealthyhome`), spilling over (`spillingover`). What one part asks of
another is declared here too, so each is checked on its own.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from vk_provider._kube.events import EventRecorder, EventType, InvolvedObject
from vk_provider.controller import warming
from vk_provider.controller.claims import RouteClaims
from vk_provider.controller.dataplanes import DataPlane, DataPlanes
from vk_provider.controller.deployments import Deployments
from vk_provider.controller.metrics import ControllerMetrics
from vk_provider.controller.passes import Pass, first_status
from vk_provider.controller.routekeeping import RouteKeeper
from vk_provider.controller.routers import RouteView
from vk_provider.controller.serving import LossClock
from vk_provider.kit.kube import MERGE_PATCH, KubeApi, RawObject
from vk_provider.offload.names import API_VERSION, KIND, PROMOTE_ANNOTATION, offload_path
from vk_provider.offload.plan import Decision, Direction
from vk_provider.offload.spec import OffloadSpec
from vk_provider.offload.status import OffloadStatus, set_condition, status_patch
from vk_provider.policy.names import UNHEALTHY_TAINT_KEY
from vk_provider.runtime.queueing import Requeue

if TYPE_CHECKING:
    from vk_provider.controller.intervals import IntervalStart  # a part of its own, built on this


class ReconcilerBase(abc.ABC):
    """What the reconciler's parts share (see the module's docstring); `Reconciler` is the one to build."""

    def __init__(
        self,
        api: KubeApi,
        data_planes: DataPlanes,
        events: EventRecorder,
        *,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        monotonic: Callable[[], float] = time.monotonic,
        claims: RouteClaims | None = None,
        metrics: ControllerMetrics | None = None,
        unhealthy_taint_key: str = UNHEALTHY_TAINT_KEY,
    ) -> None:
        self._claims = claims
        self._unhealthy_taint_key = unhealthy_taint_key
        """The taint the OffloadPolicy puts on a home node it judges unhealthy (see `homehealth`)."""
        self._api = api
        self._deployments = Deployments(api)
        self._warmer = warming.Warmer(self._deployments, self._event)
        self._routes = RouteKeeper(api, self._deployments.get, claims)
        self._data_planes = data_planes
        self._events = events
        self._wall_clock = wall_clock
        self._monotonic = monotonic
        self._intervals: dict[str, IntervalStart] = {}
        self._metrics = metrics if metrics is not None else ControllerMetrics()
        self._lost = LossClock(monotonic)
        """Since when the serving side has been lost, per Offload."""
        self._back = LossClock(monotonic)
        """Since when the side left in an emergency has been ready again, per Offload."""

    # -- what every part does -------------------------------------------------------------------

    async def _report_problem(
        self, offload: RawObject, status: Mapping[str, Any], now: datetime, reason: str, message: str
    ) -> None:
        generation = int((offload.get("metadata") or {}).get("generation") or 0)
        current = OffloadStatus.from_raw(status)
        conditions = list(current.conditions)
        updated = set_condition(conditions, "Ready", "False", reason, message, now=now, generation=generation)
        if updated == conditions and current.observed_generation == generation:
            return
        patch = status_patch(conditions=tuple(updated), observed_generation=generation, message=message)
        if current.phase is None:
            # The whole first status, not just a phase: an Offload that starts out blocked (its route
            # claimed, its Deployment not there yet) must later read as serving home, or the pass
            # after the problem clears would take it for a move home and rescale the home side.
            annotations = (offload.get("metadata") or {}).get("annotations") or {}
            promotion = str(annotations.get(PROMOTE_ANNOTATION) or "")
            patch.update(status_patch(**first_status(generation, promotion)))
            patch.update(status_patch(message=message))
        metadata = offload.get("metadata") or {}
        self._event(offload, "Warning", reason, message)
        await self._api.patch(
            offload_path(metadata["namespace"], metadata["name"], status=True),
            {"status": patch},
            content_type=MERGE_PATCH,
        )

    async def _write(self, work: Pass) -> None:
        patch = work.changes()
        if not patch or work.gone:
            return
        await self._api.patch(
            offload_path(work.spec.namespace, work.spec.name, status=True),
            {"status": patch},
            content_type=MERGE_PATCH,
        )

    def _event(self, offload: RawObject, kind: EventType, reason: str, message: str) -> None:
        metadata = offload.get("metadata") or {}
        involved = InvolvedObject(
            kind=KIND,
            name=str(metadata.get("name")),
            namespace=str(metadata.get("namespace")),
            uid=str(metadata.get("uid")),
            api_version=API_VERSION,
        )
        self._events.record(involved, kind, reason, message)

    def _announcer(self, work: Pass) -> Callable[[str, str], None]:
        return lambda reason, message: self._event(work.offload, "Normal", reason, message)

    def _plane(self, spec: OffloadSpec) -> DataPlane:
        return self._data_planes.of(spec)  # `reconcile` reported an unknown one before any step

    async def _views(self, spec: OffloadSpec, weight: int) -> list[RouteView]:
        """Every replica's view of the route, once the data plane was asked to carry `weight`."""
        plane = self._plane(spec)
        await plane.apply(spec, weight)
        return await plane.views(spec)

    # -- the phase machine's moves (`reconciler.Reconciler`) -------------------------------------

    @abc.abstractmethod
    def _start(
        self, work: Pass, direction: Direction | None = None, steps: tuple[int, ...] | None = None
    ) -> Requeue:
        """Start a migration toward `direction` (default: the spec's placement)."""

    @abc.abstractmethod
    def _deadline_passed(self, work: Pass) -> bool:
        """Whether the running migration has made no progress for its progress deadline."""

    @abc.abstractmethod
    def _waiting(self, work: Pass, reason: str, message: str) -> Requeue:
        """Wait for something outside our control, within the progress deadline."""

    @abc.abstractmethod
    def _decide(
        self,
        work: Pass,
        decision: Decision,
        *,
        judged: str = "",
        outcome: str | None = None,
        outcome_reason: str | None = None,
    ) -> Requeue:
        """Record a decision that moves the weight (advance, roll back, abort, finish)."""

    # -- what one part asks of another ----------------------------------------------------------

    @abc.abstractmethod
    def _in_emergency(self, work: Pass) -> bool:
        """Whether an emergency migration moved traffic off `spec.placement` (`emergency`)."""

    @abc.abstractmethod
    async def _replace_stranded(self, work: Pass, base: int) -> str:
        """Replace home pods on unhealthy nodes (`unhealthyhome`): why home is not ready yet, or ''."""
