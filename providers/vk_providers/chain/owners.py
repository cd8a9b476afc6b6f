"""Which member of the chain holds each pod, and how the chain placed it.

Which member holds a pod is learnt from the members themselves, never from a file: at start-up the node
lists the chain (`list_pods`), which lists every member; after that the chain knows the owner of every pod
it created or saw listed. Looking for a pod it does not know (`Owners.locate`), the chain asks the members
it has not listed yet (by listing them) and the members whose create failed in a way that may have made
the pod anyway (a timeout, a lost answer: "maybe" holders). While one of those cannot answer, the chain
says so (`TemporaryProviderError`) rather than report the pod missing and risk placing it twice; once
every member has been listed, a pod it does not know costs no call at all.

Should a pod still end up on two members (a create that timed out but went through, then a fall-through
to the next member), the next list finds both copies: the owner's copy is kept and the other deleted,
provided the two members report different container ids. Copies that cannot be told apart are only
logged (two members on one backend account would report the same workload twice; members must be
distinct backends).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TypeVar

from vk_provider.errors import (
    InvalidPodError,
    NotFoundError,
    ProviderRefusesWorkError,
    TemporaryProviderError,
)
from vk_provider.kit.placement import CHOSEN_ANNOTATION, parse_chosen_annotation
from vk_provider.provider import Placement, PodLifecycle, PodRef, PodRequest, PodState, SupportsGpuCatalog
from vk_providers.chain.directing import Director

logger = logging.getLogger(__name__)

T = TypeVar("T")
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


class Owners:
    """The owner of each pod the chain knows, the members that may hold it too, and its placement."""

    def __init__(self, members: Sequence[Member], node_name: str) -> None:
        self.members = tuple(members)
        self.node_name = node_name
        self._owners: dict[str, Member] = {}
        """Pod UID -> the member that holds it, as last confirmed."""
        self._maybe: dict[str, set[str]] = {}
        """Pod UID -> members that may hold it too (a create that failed ambiguously; a second copy)."""
        self._placements: dict[str, Placement] = {}
        self._indexed: set[str] = set()
        """Members whose pods have been listed since this instance started."""
        self._index_locks = {member.name: asyncio.Lock() for member in self.members}
        self._locks: dict[str, asyncio.Lock] = {}

    def lock(self, uid: str) -> asyncio.Lock:
        """Held while the chain creates, updates or deletes the pod."""
        return self._locks.setdefault(uid, asyncio.Lock())

    def owner(self, uid: str) -> Member | None:
        return self._owners.get(uid)

    def holders(self, uid: str) -> list[Member]:
        """The members that hold or may hold the pod: its owner, the "maybe" holders, and every member not
        listed yet; in the chain's order."""
        owner = self._owners.get(uid)
        maybe = self._maybe.get(uid, set())
        return [
            member
            for member in self.members
            if member is owner or member.name in maybe or member.name not in self._indexed
        ]

    async def locate(self, ref: PodRef) -> tuple[Member, PodState] | None:
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
        asked = [member for member in self.holders(uid) if member is not owner]
        found: list[tuple[Member, PodState]] = []
        failures: list[tuple[Member, Exception]] = []
        for member, outcome in await each(asked, lambda member: self._probe(member, ref)):
            if isinstance(outcome, Exception):
                failures.append((member, outcome))
            elif outcome is None:
                self.not_held(uid, member)
            else:
                found.append((member, outcome))
        if found:
            member, state = min(found, key=lambda item: _phase_rank(item[1]))  # min is stable: chain order
            self._owners[uid] = member
            self.not_held(uid, member)
            return member, state
        if failures:
            raise temporary(f"cannot tell whether pod {pod_name(ref)} is held by", failures)
        return None

    async def owner_of(self, ref: PodRef) -> Member:
        """The member holding the pod; NotFoundError when none does."""
        located = await self.locate(ref)
        if located is None:
            raise NotFoundError(f"pod {pod_name(ref)} is held by no provider of node {self.node_name}")
        return located[0]

    async def list_pods(self) -> list[PodState]:
        """Every member's pods, one state per pod (the owner's); partial when some members fail to answer."""
        outcomes = await each(self.members, lambda member: member.provider.list_pods())
        failures = [(member, outcome) for member, outcome in outcomes if isinstance(outcome, Exception)]
        listings = [(member, outcome) for member, outcome in outcomes if not isinstance(outcome, Exception)]
        if not listings:
            raise temporary("no provider of the chain could list its pods:", failures)
        for member, error in failures:
            logger.warning("chain member %s could not list its pods: %s", member.name, describe(error))
        holders: dict[str, list[tuple[Member, PodState]]] = {}
        for member, states in listings:
            self._record_listing(member, states)
            for state in states:
                holders.setdefault(state.ref.uid, []).append((member, state))
        return [self.with_placement(await self._settle(uid, held)) for uid, held in holders.items()]

    # -- what a create, an update and a delete learn -----------------------------------------------

    def trying(self, uid: str, member: Member) -> None:
        """A create at `member` is under way: until it is known to have failed, the member may hold it."""
        self._maybe.setdefault(uid, set()).add(member.name)

    async def holds_after_all(self, member: Member, ref: PodRef) -> bool:
        """After a failed create that may have gone through: does the member hold the pod now?"""
        try:
            state = await member.provider.get_pod_state(ref)
        except Exception as error:
            logger.info(
                "cannot tell whether chain member %s holds %s after its failed create (%s); will ask again",
                member.name,
                ref,
                describe(error),
            )
            return False
        if state is None:
            self.not_held(ref.uid, member)
            return False
        logger.info("chain member %s holds %s although its create failed", member.name, ref)
        return True

    def placed(self, ref: PodRef, member: Member, placement: Placement) -> None:
        self._owners[ref.uid] = member
        self.not_held(ref.uid, member)
        self._placements[ref.uid] = placement
        logger.info("pod %s placed on %s (%s)", ref, member.name, placement)

    def recall(self, pod: PodRequest, member: Member) -> None:
        """Take the placement back from the pod's `chosen` annotation when this instance did not place it."""
        if pod.ref.uid in self._placements:
            return
        text = pod.annotations.get(CHOSEN_ANNOTATION)
        placement = parse_chosen_annotation(text) if text is not None else None
        if placement is not None and placement.provider == member.name:
            self._placements[pod.ref.uid] = placement

    def placement(self, uid: str) -> Placement | None:
        return self._placements.get(uid)

    def with_placement(self, state: PodState) -> PodState:
        placement = self._placements.get(state.ref.uid)
        if placement is None or state.placement is not None:
            return state
        return dataclasses.replace(state, placement=placement)

    def not_held(self, uid: str, member: Member) -> None:
        names = self._maybe.get(uid)
        if names is not None:
            names.discard(member.name)
            if not names:
                del self._maybe[uid]

    async def forget_if_gone(self, ref: PodRef, owner: Member) -> None:
        """After a final delete (the node asks nothing more): stop routing to the owner once it is done."""
        try:
            state = await owner.provider.get_pod_state(ref)
        except Exception:
            return  # kept: a later call finds out
        if state is None or state.terminated:
            self._forget(ref.uid)

    # -- listings and copies -----------------------------------------------------------------------

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
            self.not_held(uid, member)
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
            self.not_held(uid, kept[0])
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
            logger.warning("deleting the copy of %s at %s failed: %s", ref, member.name, describe(error))

    def _forget(self, uid: str) -> None:
        self._owners.pop(uid, None)
        self._placements.pop(uid, None)
        lock = self._locks.get(uid)
        if lock is not None and not lock.locked() and uid not in self._maybe:
            del self._locks[uid]


# -- asking every member at once, and what their failures add up to ---------------------------------


async def each(
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


def temporary(head: str, failures: Sequence[tuple[Member, Exception]]) -> TemporaryProviderError:
    reasons = "; ".join(f"{member.name}: {describe(error)}" for member, error in failures)
    return TemporaryProviderError(
        f"{head} {reasons}", retry_after_seconds=retry_after(e for _, e in failures)
    )


def retry_after(errors: Iterable[BaseException]) -> float | None:
    """When to try again: the soonest any member that may take the pod asked for, or None (the node's own
    backoff) when one of them did not ask to wait."""
    waits: list[float] = []
    for error in errors:
        if isinstance(error, InvalidPodError):
            continue  # that member will not take it whenever asked
        wait = (
            error.retry_after_seconds
            if isinstance(error, TemporaryProviderError | ProviderRefusesWorkError)
            else None
        )
        if wait is None:
            return None
        waits.append(wait)
    return min(waits, default=None)


def describe(error: BaseException) -> str:
    return str(error) or type(error).__name__


def pod_name(ref: PodRef) -> str:
    return f"{ref.namespace}/{ref.name}"


def _phase_rank(state: PodState) -> int:
    return len(_PHASE_RANK) + 1 if state.terminated else _PHASE_RANK.get(state.phase, len(_PHASE_RANK))


def _container_id(state: PodState) -> str:
    return next((container.container_id for container in state.containers if container.container_id), "")
