"""An ordered list of providers behind one node: placement across them, and routing to the one that holds
each pod.

Which member holds a pod is learnt from the members themselves, never from a file: at start-up the node
lists the chain (`list_pods`), which lists every member; after that the chain knows the owner of every pod
it created or saw listed. Looking for a pod it does not know (`_locate`), the chain asks the members it has
not listed yet (by listing them) and the members whose create failed in a way that may have made the pod
anyway (a timeout, a lost answer: "maybe" holders). While one of those cannot answer, the chain says so
(`TemporaryProviderError`) rather than report the pod missing and risk placing it twice; once every
member has been listed, a pod it does not know costs no call at all.

Should a pod still end up on two members (a create that timed out but went through, then a fall-through
to the next member), the next list finds both copies: the owner's copy is kept and the other deleted,
provided the two members report different container ids. Copies that cannot be told apart are only
logged (two members on one backend account would report the same workload twice; members must be
distinct backends).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import TypeVar, cast

from vk_provider import plugins
from vk_provider.errors import (
    CapabilityMissingError,
    InvalidPodError,
    NotFoundError,
    ProviderError,
    ProviderUnavailableError,
    TemporaryProviderError,
)
from vk_provider.kit.placement import (
    CHOSEN_ANNOTATION,
    Catalog,
    PlacementError,
    PlacementRequest,
    choose,
    parse_chosen_annotation,
    parse_placement,
)
from vk_provider.kit.placement.capacity import GPU_TYPE_RESOURCE_PREFIX
from vk_provider.kit.quantity import InvalidQuantityError, parse_quantity
from vk_provider.kit.resilience import BreakerOpenError
from vk_provider.provider import (
    ContainerUsage,
    GpuOffer,
    LogOptions,
    Placement,
    PodLifecycle,
    PodRef,
    PodRequest,
    PodState,
    ProviderContext,
    SupportsGpuCatalog,
    SupportsLogs,
    SupportsNodeCapacity,
    SupportsUsage,
)
from vk_providers.chain.config import ChainSettings, MemberSettings, parse_settings
from vk_providers.chain.directing import Director, director_for

logger = logging.getLogger(__name__)

T = TypeVar("T")
Builder = Callable[[str, ProviderContext], PodLifecycle]
"""(provider name, context) -> provider: how members are made (the node's plugin loading by default)."""
_PHASE_RANK = {"Running": 0, "Pending": 1}


@dataclasses.dataclass(eq=False, slots=True)
class Member:
    name: str
    kind: str
    """The member's provider name (its entry point)."""
    provider: PodLifecycle
    director: Director | None

    @property
    def priced(self) -> bool:
        """Whether placement by price can use this member: it has a catalog, and can be told an offer."""
        return self.director is not None and isinstance(self.provider, SupportsGpuCatalog)


@dataclasses.dataclass(frozen=True, slots=True)
class _Attempt:
    member: Member
    placement: Placement
    description: str
    request: Callable[[], PodRequest]
    """The pod as the member must receive it; made when tried, so a member that cannot take the offer
    refuses like any other refusal."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Refusal:
    description: str
    error: BaseException


class ChainProvider:
    def __init__(
        self,
        context: ProviderContext,
        *,
        settings: ChainSettings | None = None,
        build: Builder = plugins.build,
    ) -> None:
        """Builds every member (through `build`); raises ValueError naming the member that cannot be built."""
        self.node_name = context.node_name
        self._settings = settings if settings is not None else parse_settings(context.config)
        self.members = tuple(_build_member(context, member, build) for member in self._settings.members)
        self._by_name = {member.name: member for member in self.members}
        self._owners: dict[str, Member] = {}
        """Pod UID -> the member that holds it, as last confirmed."""
        self._maybe: dict[str, set[str]] = {}
        """Pod UID -> members that may hold it too (a create that failed ambiguously; a second copy)."""
        self._placements: dict[str, Placement] = {}
        self._indexed: set[str] = set()
        """Members whose pods have been listed since this instance started."""
        self._index_locks = {member.name: asyncio.Lock() for member in self.members}
        self._locks: dict[str, asyncio.Lock] = {}
        self.unavailable: dict[str, str] = {}
        """Member name -> why its last health check failed."""
        for member in self.members:
            if isinstance(member.provider, SupportsGpuCatalog) and member.director is None:
                logger.warning(
                    "chain member %s (%s) publishes GPU offers but cannot be told which to use; "
                    "placement by price does not use it",
                    member.name,
                    member.kind,
                )

    def __repr__(self) -> str:
        members = ", ".join(f"{member.name}={member.kind}" for member in self.members)
        return f"ChainProvider(node={self.node_name!r}, members=[{members}])"

    # -- PodLifecycle --------------------------------------------------------------------------

    async def create_pod(self, pod: PodRequest) -> None:
        """Place the pod on the first member that takes it (see the package docstring for the order)."""
        request = parse_placement(pod)
        allowed = self._allowed(request)
        async with self._lock(pod.ref.uid):
            located = await self._locate(pod.ref)
            if located is not None:
                self._recall(pod, located[0])
                return
            attempts, refusals = await self._plan(pod, request, allowed)
            await self._try(pod.ref, attempts, refusals)

    async def update_pod(self, pod: PodRequest) -> None:
        async with self._lock(pod.ref.uid):
            located = await self._locate(pod.ref)
            if located is None:
                return  # nothing holds it: the node creates it again
            member = located[0]
            self._recall(pod, member)
            await member.provider.update_pod(self._as_placed(pod, member))

    async def delete_pod(self, ref: PodRef, *, grace_period_seconds: float) -> None:
        """Delete at the owner, and wherever else the pod may be (members never listed included)."""
        async with self._lock(ref.uid):
            owner = self._owners.get(ref.uid)
            maybe = self._maybe.get(ref.uid, set())
            targets = [
                member
                for member in self.members
                if member is owner or member.name in maybe or member.name not in self._indexed
            ]
            outcomes = await _each(
                targets,
                lambda member: member.provider.delete_pod(ref, grace_period_seconds=grace_period_seconds),
            )
            failures = [(member, outcome) for member, outcome in outcomes if isinstance(outcome, Exception)]
            for member, outcome in outcomes:
                if member is not owner and not isinstance(outcome, Exception):
                    self._not_held(ref.uid, member)
            if failures:
                raise _temporary(f"deleting pod {_name(ref)} failed at", failures)
            if owner is not None and grace_period_seconds == 0:
                await self._forget_if_gone(ref, owner)

    async def get_pod_state(self, ref: PodRef) -> PodState | None:
        located = await self._locate(ref)
        return None if located is None else self._with_placement(located[1])

    async def list_pods(self) -> Sequence[PodState]:
        """Every member's pods, one state per pod (the owner's); partial when some members fail to answer."""
        outcomes = await _each(self.members, lambda member: member.provider.list_pods())
        failures = [(member, outcome) for member, outcome in outcomes if isinstance(outcome, Exception)]
        listings = [(member, outcome) for member, outcome in outcomes if not isinstance(outcome, Exception)]
        if not listings:
            raise _temporary("no provider of the chain could list its pods:", failures)
        for member, error in failures:
            logger.warning("chain member %s could not list its pods: %s", member.name, _describe(error))
        holders: dict[str, list[tuple[Member, PodState]]] = {}
        for member, states in listings:
            self._record_listing(member, states)
            for state in states:
                holders.setdefault(state.ref.uid, []).append((member, state))
        return [self._with_placement(await self._settle(uid, held)) for uid, held in holders.items()]

    async def check_health(self) -> None:
        """Available while any member is; each member's check may take `health_timeout_seconds`."""
        timeout = self._settings.health_timeout_seconds

        async def check(member: Member) -> None:
            try:
                async with asyncio.timeout(timeout):
                    await member.provider.check_health()
            except TimeoutError:
                raise ProviderUnavailableError(
                    f"its health check gave no answer within {timeout:g}s"
                ) from None

        outcomes = await _each(self.members, check)
        unavailable = {
            member.name: _describe(outcome) for member, outcome in outcomes if isinstance(outcome, Exception)
        }
        if unavailable != self.unavailable:
            for name, why in unavailable.items():
                logger.info("chain member %s is unavailable: %s", name, why)
            for name in self.unavailable.keys() - unavailable.keys():
                logger.info("chain member %s is available again", name)
        self.unavailable = unavailable
        if len(unavailable) == len(self.members):
            reasons = "; ".join(f"{name}: {why}" for name, why in unavailable.items())
            raise ProviderUnavailableError(f"no provider of the chain is available: {reasons}")

    async def aclose(self) -> None:
        for member, outcome in await _each(self.members, lambda member: member.provider.aclose()):
            if isinstance(outcome, Exception):
                logger.warning("closing chain member %s failed: %s", member.name, _describe(outcome))

    # -- SupportsNodeCapacity, SupportsLogs, SupportsUsage -------------------------------------

    async def node_capacity(self) -> Mapping[str, str]:
        """The members' capacities added up, resource by resource; GPUs per type
        (`gpu.vk-provider.dev/<type>`) are the largest pod any member can take, so the most of them."""
        totals: dict[str, Fraction] = {}
        binary: set[str] = set()
        for member in self.members:
            if not isinstance(member.provider, SupportsNodeCapacity):
                continue
            try:
                capacity = await member.provider.node_capacity()
            except Exception as error:
                logger.warning("chain member %s did not report its capacity: %s", member.name, error)
                continue
            for resource, quantity in capacity.items():
                try:
                    value = parse_quantity(str(quantity).strip())
                except InvalidQuantityError as error:
                    logger.warning("chain member %s: capacity %s: %s; ignored", member.name, resource, error)
                    continue
                earlier = totals.get(resource, Fraction(0))
                largest_pod = resource.startswith(GPU_TYPE_RESOURCE_PREFIX)
                totals[resource] = max(earlier, value) if largest_pod else earlier + value
                if str(quantity).strip().endswith("i"):
                    binary.add(resource)
        return {
            resource: format_quantity(value, binary=resource in binary) for resource, value in totals.items()
        }

    def stream_logs(self, ref: PodRef, container: str, options: LogOptions) -> AsyncIterator[bytes]:
        return self._stream_logs(ref, container, options)

    async def _stream_logs(self, ref: PodRef, container: str, options: LogOptions) -> AsyncIterator[bytes]:
        member = await self._owner_of(ref)
        if not isinstance(member.provider, SupportsLogs):
            raise CapabilityMissingError(f"{member.name}, which holds pod {_name(ref)}, serves no logs")
        stream = member.provider.stream_logs(ref, container, options)
        try:
            async for chunk in stream:
                yield chunk
        finally:
            if isinstance(stream, AsyncGenerator):
                await stream.aclose()

    async def usage(self, ref: PodRef) -> Sequence[ContainerUsage]:
        """The owner's usage. An owner without usage raises NotFoundError, not CapabilityMissingError: the
        kubelet's stats then leave the pod out quietly, as they would on a node of that provider alone,
        instead of logging a failure for it at every scrape."""
        member = await self._owner_of(ref)
        if not isinstance(member.provider, SupportsUsage):
            raise NotFoundError(f"{member.name}, which holds pod {_name(ref)}, reports no usage")
        return await member.provider.usage(ref)

    # -- placement -----------------------------------------------------------------------------

    def _allowed(self, request: PlacementRequest) -> list[Member]:
        """The members the pod may use, in the order to try them."""
        if not request.providers:
            return list(self.members)
        unknown = [name for name in request.providers if name.casefold() not in self._by_name]
        if unknown:
            raise PlacementError(
                f"{', '.join(unknown)}: no such provider on node {self.node_name} "
                f"(its providers: {', '.join(self._by_name)})"
            )
        return [self._by_name[name.casefold()] for name in request.providers]

    async def _plan(
        self, pod: PodRequest, request: PlacementRequest, allowed: Sequence[Member]
    ) -> tuple[list[_Attempt], list[_Refusal]]:
        """The attempts to make, in order, and the refusals already known (catalogs that failed)."""
        if not request.uses_catalog:
            return [
                _Attempt(
                    member,
                    Placement(member.name, gpu_count=request.gpu_count),
                    f"{member.name} (its own defaults)",
                    lambda: pod,
                )
                for member in allowed
            ], []
        priced = [member for member in allowed if member.priced]
        if not priced:
            raise InvalidPodError(
                f"the pod asks for placement by price ({request.describe()}), but none of its providers "
                f"({', '.join(member.name for member in allowed)}) publishes GPU offers the chain can use"
            )
        catalogs, failures = await self._catalogs(priced, request.gpu_count)
        refusals = [_Refusal(f"{member.name} (its GPU catalog)", error) for member, error in failures]
        choice = choose(request, catalogs)
        if not choice.candidates:
            message = choice.explain()
            if failures:
                raise _temporary(message + "; and no answer from", failures)
            if choice.may_free_up:
                raise TemporaryProviderError(message)
            raise InvalidPodError(message)
        attempts = []
        for candidate in choice.candidates:
            member = self._by_name[candidate.provider]
            director = cast(Director, member.director)
            directed = functools.partial(
                director, pod, candidate.offer, candidate.locations, request.max_price_per_hour
            )
            attempts.append(_Attempt(member, candidate.placement(), candidate.describe(), directed))
        return attempts, refusals

    async def _catalogs(
        self, members: Sequence[Member], gpu_count: int
    ) -> tuple[list[Catalog], list[tuple[Member, Exception]]]:
        timeout = self._settings.catalog_timeout_seconds

        async def offers(member: Member) -> tuple[GpuOffer, ...]:
            catalog = cast(SupportsGpuCatalog, member.provider)
            try:
                async with asyncio.timeout(timeout):
                    return tuple(await catalog.gpu_offers(gpu_count=gpu_count))
            except TimeoutError:
                raise TemporaryProviderError(f"no answer within {timeout:g}s") from None

        catalogs: list[Catalog] = []
        failures: list[tuple[Member, Exception]] = []
        for member, outcome in await _each(members, offers):
            if isinstance(outcome, Exception):
                logger.warning("chain member %s: no GPU catalog (%s)", member.name, _describe(outcome))
                failures.append((member, outcome))
            else:
                catalogs.append(Catalog(member.name, outcome))
        return catalogs, failures

    async def _try(self, ref: PodRef, attempts: Sequence[_Attempt], refusals: list[_Refusal]) -> None:
        """Create at each attempt's member in turn until one takes the pod; a refusal moves on."""
        down: set[str] = set()
        tried = 0
        for index, attempt in enumerate(attempts):
            member = attempt.member
            if member.name in down:
                continue
            if tried == self._settings.max_offers_per_create:
                left = sum(1 for later in attempts[index:] if later.member.name not in down)
                refusals.append(
                    _Refusal(
                        f"{left} more offer{'' if left == 1 else 's'}",
                        TemporaryProviderError("not tried in this attempt"),
                    )
                )
                break
            tried += 1
            self._maybe.setdefault(ref.uid, set()).add(member.name)
            try:
                await member.provider.create_pod(attempt.request())
            except Exception as error:  # any refusal (even for good, by this member) moves on
                if not isinstance(error, ProviderError):
                    logger.warning("chain member %s failed to create %s", member.name, ref, exc_info=True)
                refusals.append(_Refusal(attempt.description, error))
                if isinstance(error, ProviderUnavailableError | BreakerOpenError):
                    down.add(member.name)
                if await self._holds_after_all(member, ref):
                    self._placed(ref, member, attempt.placement)
                    return
                continue
            self._placed(ref, member, attempt.placement)
            return
        raise _refused(ref, refusals)

    async def _holds_after_all(self, member: Member, ref: PodRef) -> bool:
        """After a failed create that may have gone through: does the member hold the pod now?"""
        try:
            state = await member.provider.get_pod_state(ref)
        except Exception as error:
            logger.info(
                "cannot tell whether chain member %s holds %s after its failed create (%s); will ask again",
                member.name,
                ref,
                _describe(error),
            )
            return False
        if state is None:
            self._not_held(ref.uid, member)
            return False
        logger.info("chain member %s holds %s although its create failed", member.name, ref)
        return True

    def _placed(self, ref: PodRef, member: Member, placement: Placement) -> None:
        self._owners[ref.uid] = member
        self._not_held(ref.uid, member)
        self._placements[ref.uid] = placement
        logger.info("pod %s placed on %s (%s)", ref, member.name, placement)

    def _recall(self, pod: PodRequest, member: Member) -> None:
        """Take the placement back from the pod's `chosen` annotation when this instance did not place it."""
        if pod.ref.uid in self._placements:
            return
        text = pod.annotations.get(CHOSEN_ANNOTATION)
        placement = parse_chosen_annotation(text) if text is not None else None
        if placement is not None and placement.provider == member.name:
            self._placements[pod.ref.uid] = placement

    def _as_placed(self, pod: PodRequest, member: Member) -> PodRequest:
        """The pod as its member received it at creation (its offer applied), for updates."""
        placement = self._placements.get(pod.ref.uid)
        if placement is None or placement.gpu_type is None or member.director is None:
            return pod
        offer = GpuOffer(
            gpu_type=placement.gpu_type,
            gpu_count=placement.gpu_count,
            price_per_hour=placement.price_per_hour or 0.0,
            tier=placement.tier,
        )
        return member.director(pod, offer, placement.locations, None)

    def _with_placement(self, state: PodState) -> PodState:
        placement = self._placements.get(state.ref.uid)
        if placement is None or state.placement is not None:
            return state
        return dataclasses.replace(state, placement=placement)

    # -- who holds what ------------------------------------------------------------------------

    async def _locate(self, ref: PodRef) -> tuple[Member, PodState] | None:
        """The member holding the pod and its state; None when no member can hold it.

        Raises TemporaryProviderError when a member that may hold it cannot be asked.
        """
        uid = ref.uid
        owner = self._owners.get(uid)
        if owner is not None:
            state = await owner.provider.get_pod_state(ref)
            if state is not None:
                return owner, state
            self._forget(uid)
        maybe = self._maybe.get(uid, set())
        asked = [
            member
            for member in self.members
            if member is not owner and (member.name in maybe or member.name not in self._indexed)
        ]
        found: list[tuple[Member, PodState]] = []
        failures: list[tuple[Member, Exception]] = []
        for member, outcome in await _each(asked, lambda member: self._probe(member, ref)):
            if isinstance(outcome, Exception):
                failures.append((member, outcome))
            elif outcome is None:
                self._not_held(uid, member)
            else:
                found.append((member, outcome))
        if found:
            member, state = min(found, key=lambda item: _phase_rank(item[1]))  # min is stable: chain order
            self._owners[uid] = member
            self._not_held(uid, member)
            return member, state
        if failures:
            raise _temporary(f"cannot tell whether pod {_name(ref)} is held by", failures)
        return None

    async def _probe(self, member: Member, ref: PodRef) -> PodState | None:
        """The member's state of the pod; a member never listed is listed first (once)."""
        if member.name not in self._indexed:
            async with self._index_locks[member.name]:
                if member.name not in self._indexed:
                    states = await member.provider.list_pods()
                    self._record_listing(member, states)
                    if all(state.ref.uid != ref.uid for state in states):
                        return None
        return await member.provider.get_pod_state(ref)

    def _record_listing(self, member: Member, states: Sequence[PodState]) -> None:
        """A full list of `member`: it is indexed; the pods it no longer holds are no longer "maybe" its."""
        self._indexed.add(member.name)
        listed = {state.ref.uid for state in states}
        for uid in [uid for uid, names in self._maybe.items() if member.name in names and uid not in listed]:
            self._not_held(uid, member)
        for uid in listed:
            if self._owners.get(uid) is not member:
                self._maybe.setdefault(uid, set()).add(member.name)

    async def _settle(self, uid: str, held: Sequence[tuple[Member, PodState]]) -> PodState:
        """The state to report for a pod some members listed; its owner set, and a copy deleted."""
        owner = self._owners.get(uid)
        kept = next(((member, state) for member, state in held if member is owner), None)
        if kept is None:
            if owner is not None:
                return held[0][1]  # the owner did not list it (yet): report what is there, change nothing
            kept = min(held, key=lambda item: _phase_rank(item[1]))
            self._owners[uid] = kept[0]
            self._not_held(uid, kept[0])
        for member, state in held:
            if member is not kept[0]:
                await self._remove_copy(member, state, kept)
        return kept[1]

    async def _remove_copy(self, member: Member, copy: PodState, kept: tuple[Member, PodState]) -> None:
        ref = copy.ref
        ours, theirs = _container_id(kept[1]), _container_id(copy)
        if ours == theirs:
            return  # one workload seen through two members (a shared backend)
        if not ours or not theirs:
            logger.warning(
                "pod %s is listed by %s and %s, which cannot be told apart; keeping both",
                ref,
                kept[0].name,
                member.name,
            )
            return
        logger.warning(
            "pod %s is held twice: by %s (%s, kept) and by %s (%s); deleting the copy at %s",
            ref,
            kept[0].name,
            ours,
            member.name,
            theirs,
            member.name,
        )
        try:
            await member.provider.delete_pod(ref, grace_period_seconds=0)
        except Exception as error:
            logger.warning("deleting the copy of %s at %s failed: %s", ref, member.name, _describe(error))

    async def _owner_of(self, ref: PodRef) -> Member:
        located = await self._locate(ref)
        if located is None:
            raise NotFoundError(f"pod {_name(ref)} is held by no provider of node {self.node_name}")
        return located[0]

    async def _forget_if_gone(self, ref: PodRef, owner: Member) -> None:
        """After a final delete (the node asks nothing more): stop routing to the owner once it is done."""
        try:
            state = await owner.provider.get_pod_state(ref)
        except Exception:
            return  # kept: a later call finds out
        if state is None or state.terminated:
            self._forget(ref.uid)

    def _forget(self, uid: str) -> None:
        self._owners.pop(uid, None)
        self._placements.pop(uid, None)
        lock = self._locks.get(uid)
        if lock is not None and not lock.locked() and uid not in self._maybe:
            del self._locks[uid]

    def _not_held(self, uid: str, member: Member) -> None:
        names = self._maybe.get(uid)
        if names is not None:
            names.discard(member.name)
            if not names:
                del self._maybe[uid]

    def _lock(self, uid: str) -> asyncio.Lock:
        return self._locks.setdefault(uid, asyncio.Lock())


def _build_member(context: ProviderContext, settings: MemberSettings, build: Builder) -> Member:
    state_dir = context.state_dir / "members" / settings.name
    state_dir.mkdir(parents=True, exist_ok=True)
    member_context = ProviderContext(
        node_name=context.node_name, config=settings.config, host_ip=context.host_ip, state_dir=state_dir
    )
    try:
        provider = build(settings.provider, member_context)
    except (LookupError, TypeError, ValueError) as error:
        raise ValueError(
            f"chain provider: member {settings.name!r} ({settings.provider}): {error}"
        ) from error
    return Member(settings.name, settings.provider, provider, director_for(provider))


async def _each(
    members: Sequence[Member], call: Callable[[Member], Awaitable[T]]
) -> list[tuple[Member, T | Exception]]:
    """`call` for every member at once; each outcome a result or the exception it raised."""
    outcomes = await asyncio.gather(*(call(member) for member in members), return_exceptions=True)
    results: list[tuple[Member, T | Exception]] = []
    for member, outcome in zip(members, outcomes, strict=True):
        if isinstance(outcome, BaseException) and not isinstance(outcome, Exception):
            raise outcome
        results.append((member, outcome))
    return results


def _phase_rank(state: PodState) -> int:
    return len(_PHASE_RANK) + 1 if state.terminated else _PHASE_RANK.get(state.phase, len(_PHASE_RANK))


def _container_id(state: PodState) -> str:
    return next((container.container_id for container in state.containers if container.container_id), "")


def _name(ref: PodRef) -> str:
    return f"{ref.namespace}/{ref.name}"


def _describe(error: BaseException) -> str:
    return str(error) or type(error).__name__


def _temporary(head: str, failures: Sequence[tuple[Member, Exception]]) -> TemporaryProviderError:
    reasons = "; ".join(f"{member.name}: {_describe(error)}" for member, error in failures)
    return TemporaryProviderError(
        f"{head} {reasons}", retry_after_seconds=_retry_after(e for _, e in failures)
    )


def _refused(ref: PodRef, refusals: Sequence[_Refusal]) -> ProviderError:
    """All attempts failed: for good if every one was refused for good, else worth another try."""
    reasons = "; ".join(f"{refusal.description}: {_describe(refusal.error)}" for refusal in refusals)
    message = f"no provider could take pod {_name(ref)}: {reasons or 'none was tried'}"
    if refusals and all(isinstance(refusal.error, InvalidPodError) for refusal in refusals):
        return InvalidPodError(message)
    return TemporaryProviderError(
        message, retry_after_seconds=_retry_after(refusal.error for refusal in refusals)
    )


def _retry_after(errors: Iterable[BaseException]) -> float | None:
    """When to try again: the soonest any member that may take the pod asked for, or None (the node's own
    backoff) when one of them did not ask to wait."""
    waits: list[float] = []
    for error in errors:
        if isinstance(error, InvalidPodError):
            continue  # that member will not take it whenever asked
        if not isinstance(error, TemporaryProviderError) or error.retry_after_seconds is None:
            return None
        waits.append(error.retry_after_seconds)
    return min(waits, default=None)


def format_quantity(value: Fraction, *, binary: bool = False) -> str:
    """A sum of quantities as a Kubernetes quantity: whole numbers plain (or with the largest binary
    suffix that divides them exactly, when the parts used binary suffixes), fractions in m, u or n."""
    if value.denominator == 1:
        whole = int(value)
        if binary and whole:
            for suffix, power in (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)):
                if whole % (1 << power) == 0:
                    return f"{whole >> power}{suffix}"
        return str(whole)
    for suffix, exponent in (("m", 3), ("u", 6), ("n", 9)):
        scaled = value * 10**exponent
        if scaled.denominator == 1:
            return f"{int(scaled)}{suffix}"
    return f"{int(value * 10**9)}n"  # finer than Kubernetes counts: round down to nanos
