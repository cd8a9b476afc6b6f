"""An ordered list of providers behind one node: placement across them, and routing each call to the one
that holds the pod (who holds which pod is `owners`' part).

Creating a pod places it: the members it may use (`placement.vk-provider.dev/providers`), then either
placement by price (the offers of the members' GPU catalogs that match, cheapest first, see
`vk_provider.kit.placement.choice`) or trial in order, and each attempt in turn until a member takes it.
A member whose create failed is asked whether it holds the pod after all before the next is tried.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import cast

from vk_provider.errors import (
    CapabilityMissingError,
    InvalidPodError,
    NotFoundError,
    ProviderError,
    ProviderRefusesWorkError,
    ProviderUnavailableError,
    TemporaryProviderError,
)
from vk_provider.kit.placement import Catalog, PlacementError, PlacementRequest, choose, parse_placement
from vk_provider.kit.placement.capacity import GPU_TYPE_RESOURCE_PREFIX
from vk_provider.kit.quantity import InvalidQuantityError, parse_quantity
from vk_provider.kit.resilience import BreakerOpenError
from vk_provider.plugins import build as build_installed
from vk_provider.provider import (
    ByteSink,
    ContainerStreams,
    ContainerUsage,
    GpuOffer,
    LogOptions,
    Placement,
    PodLifecycle,
    PodRef,
    PodRequest,
    PodState,
    PricedPod,
    ProviderContext,
    SupportsAttach,
    SupportsExec,
    SupportsGpuCatalog,
    SupportsLogs,
    SupportsNodeCapacity,
    SupportsPodPrice,
    SupportsPortForward,
    SupportsUsage,
)
from vk_providers.chain.config import ChainSettings, MemberSettings, parse_settings
from vk_providers.chain.directing import Director, director_for
from vk_providers.chain.owners import Member, Owners, describe, each, pod_name, retry_after, temporary

logger = logging.getLogger(__name__)

REFUSED_EVENT_REASON = "ProviderRefused"
"""The pod Event telling which member refused the pod, why, and which is tried next."""

Builder = Callable[[str, ProviderContext], PodLifecycle]
"""(provider name, context) -> provider: how members are made (the node's plugin loading by default)."""


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
        build: Builder = build_installed,
    ) -> None:
        """Builds every member (through `build`); raises ValueError naming the member that cannot be built."""
        self.node_name = context.node_name
        self._settings = settings if settings is not None else parse_settings(context.config)
        self.members = tuple(_build_member(context, member, build) for member in self._settings.members)
        self._by_name = {member.name: member for member in self.members}
        self._owners = Owners(self.members, self.node_name)
        self.unavailable: dict[str, str] = {}
        """Member name -> why its last health check failed."""
        self._refusing: dict[str, ProviderRefusesWorkError] = {}
        """Member name -> its refusal of all new work (no balance, no quota), as its last health check
        said: new pods pass it over without asking it, until a health check passes again."""
        self._pod_events = context.pod_events
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
        async with self._owners.lock(pod.ref.uid):
            located = await self._owners.locate(pod.ref)
            if located is not None:
                self._owners.recall(pod, located[0])
                return
            attempts, refusals = await self._plan(pod, request, allowed)
            await self._try(pod.ref, attempts, refusals)

    async def update_pod(self, pod: PodRequest) -> None:
        async with self._owners.lock(pod.ref.uid):
            located = await self._owners.locate(pod.ref)
            if located is None:
                return  # nothing holds it: the node creates it again
            member = located[0]
            self._owners.recall(pod, member)
            await member.provider.update_pod(self._as_placed(pod, member))

    async def delete_pod(self, ref: PodRef, *, grace_period_seconds: float) -> None:
        """Delete at the owner, and wherever else the pod may be (members never listed included)."""
        async with self._owners.lock(ref.uid):
            owner = self._owners.owner(ref.uid)
            outcomes = await each(
                self._owners.holders(ref.uid),
                lambda member: member.provider.delete_pod(ref, grace_period_seconds=grace_period_seconds),
            )
            failures = [(member, outcome) for member, outcome in outcomes if isinstance(outcome, Exception)]
            for member, outcome in outcomes:
                if member is not owner and not isinstance(outcome, Exception):
                    self._owners.not_held(ref.uid, member)
            if failures:
                raise temporary(f"deleting pod {pod_name(ref)} failed at", failures)
            if owner is not None and grace_period_seconds == 0:
                await self._owners.forget_if_gone(ref, owner)

    async def get_pod_state(self, ref: PodRef) -> PodState | None:
        located = await self._owners.locate(ref)
        return None if located is None else self._owners.with_placement(located[1])

    async def list_pods(self) -> Sequence[PodState]:
        """Every member's pods, one state per pod (the owner's); partial when some members fail to answer."""
        return await self._owners.list_pods()

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

        outcomes = await each(self.members, check)
        failures = {member.name: outcome for member, outcome in outcomes if isinstance(outcome, Exception)}
        unavailable = {name: describe(failure) for name, failure in failures.items()}
        if unavailable != self.unavailable:
            for name, why in unavailable.items():
                logger.info("chain member %s is unavailable: %s", name, why)
            for name in self.unavailable.keys() - unavailable.keys():
                logger.info("chain member %s is available again", name)
        self.unavailable = unavailable
        self._refusing = {
            name: failure
            for name, failure in failures.items()
            if isinstance(failure, ProviderRefusesWorkError)
        }
        if len(unavailable) == len(self.members):
            reasons = "; ".join(f"{name}: {why}" for name, why in unavailable.items())
            raise ProviderUnavailableError(
                f"no provider of the chain is available: {reasons}", reason=_shared_reason(failures.values())
            )

    def health_note(self) -> str:
        """While the chain is available: which members are not, and why (a refusal's reason, such as
        InsufficientBalance or QuotaExceeded); worded without times, so the node's condition changes only
        when a member's state does."""
        notes = [
            f"{name} refuses new work ({self._refusing[name].reason or 'no reason given'})"
            if name in self._refusing
            else f"{name} is unavailable"
            for name in self.unavailable
        ]
        return f"{', '.join(notes)}; the other members take new pods" if notes else ""

    async def aclose(self) -> None:
        for member, outcome in await each(self.members, lambda member: member.provider.aclose()):
            if isinstance(outcome, Exception):
                logger.warning("closing chain member %s failed: %s", member.name, describe(outcome))

    # -- SupportsPodPrice ----------------------------------------------------------------------

    def pod_price_per_hour(self, pod: PricedPod) -> float | None:
        """The price of the member that holds the pod; before it is placed, the dearest member's, since it
        may land on any of them. None when one of those members cannot price it. (A pod placed by price
        costs what its placement chose; the node does not ask then.)"""
        owner = self._owners.owner(pod.ref.uid)
        prices = [_member_price(member, pod) for member in ([owner] if owner else self.members)]
        known = [price for price in prices if price is not None]
        return max(known) if known and len(known) == len(prices) else None

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
        member = await self._owners.owner_of(ref)
        if not isinstance(member.provider, SupportsLogs):
            raise CapabilityMissingError(f"{member.name}, which holds pod {pod_name(ref)}, serves no logs")
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
        member = await self._owners.owner_of(ref)
        if not isinstance(member.provider, SupportsUsage):
            raise NotFoundError(f"{member.name}, which holds pod {pod_name(ref)}, reports no usage")
        return await member.provider.usage(ref)

    # -- SupportsExec, SupportsAttach, SupportsPortForward: the owner's, or its refusal ----------

    async def exec_in_container(
        self, ref: PodRef, container: str, command: Sequence[str], streams: ContainerStreams
    ) -> int:
        member = await self._owners.owner_of(ref)
        if not isinstance(member.provider, SupportsExec):
            raise CapabilityMissingError(
                f"exec is not supported by {member.name}, which holds pod {pod_name(ref)}"
            )
        return await member.provider.exec_in_container(ref, container, command, streams)

    async def attach_to_container(self, ref: PodRef, container: str, streams: ContainerStreams) -> None:
        member = await self._owners.owner_of(ref)
        if not isinstance(member.provider, SupportsAttach):
            raise CapabilityMissingError(
                f"attach is not supported by {member.name}, which holds pod {pod_name(ref)}"
            )
        await member.provider.attach_to_container(ref, container, streams)

    async def port_forward(
        self, ref: PodRef, port: int, incoming: AsyncIterator[bytes], send: ByteSink
    ) -> None:
        member = await self._owners.owner_of(ref)
        if not isinstance(member.provider, SupportsPortForward):
            raise CapabilityMissingError(
                f"port-forward is not supported by {member.name}, which holds pod {pod_name(ref)}"
            )
        await member.provider.port_forward(ref, port, incoming, send)

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
                raise temporary(message + "; and no answer from", failures)
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
        for member, outcome in await each(members, offers):
            if isinstance(outcome, Exception):
                logger.warning("chain member %s: no GPU catalog (%s)", member.name, describe(outcome))
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
            refusing = self._refusing.get(member.name)
            if refusing is not None:  # not asked: it refuses all work until a health check passes
                skipped = ProviderRefusesWorkError(
                    f"not asked, it refuses all new work ({refusing.reason}): {describe(refusing)}",
                    reason=refusing.reason,
                    retry_after_seconds=refusing.retry_after_seconds,
                )
                refusals.append(_Refusal(attempt.description, skipped))
                down.add(member.name)
                self._tell_refusal(ref, attempt, skipped, _next(attempts[index + 1 :], down))
                continue
            tried += 1
            self._owners.trying(ref.uid, member)
            try:
                await member.provider.create_pod(attempt.request())
            except Exception as error:  # any refusal (even for good, by this member) moves on
                if not isinstance(error, ProviderError):
                    logger.warning("chain member %s failed to create %s", member.name, ref, exc_info=True)
                refusals.append(_Refusal(attempt.description, error))
                if isinstance(error, ProviderUnavailableError | BreakerOpenError):
                    down.add(member.name)
                if await self._owners.holds_after_all(member, ref):
                    self._owners.placed(ref, member, attempt.placement)
                    return
                self._tell_refusal(ref, attempt, error, _next(attempts[index + 1 :], down))
                continue
            self._owners.placed(ref, member, attempt.placement)
            return
        raise _refused(ref, refusals)

    def _tell_refusal(
        self, ref: PodRef, attempt: _Attempt, error: BaseException, following: _Attempt | None
    ) -> None:
        """A pod Event for each refusal: which member (and offer) refused, why, and what comes next."""
        then = f"; trying {following.description}" if following is not None else "; no other provider left"
        self._pod_events.record(
            ref, "Warning", REFUSED_EVENT_REASON, f"{attempt.description} refused: {describe(error)}{then}"
        )

    def _as_placed(self, pod: PodRequest, member: Member) -> PodRequest:
        """The pod as its member received it at creation (its offer applied), for updates."""
        placement = self._owners.placement(pod.ref.uid)
        if placement is None or placement.gpu_type is None or member.director is None:
            return pod
        offer = GpuOffer(
            gpu_type=placement.gpu_type,
            gpu_count=placement.gpu_count,
            price_per_hour=placement.price_per_hour or 0.0,
            tier=placement.tier,
        )
        return member.director(pod, offer, placement.locations, None)


def _next(attempts: Sequence[_Attempt], down: set[str]) -> _Attempt | None:
    return next((attempt for attempt in attempts if attempt.member.name not in down), None)


def _build_member(context: ProviderContext, settings: MemberSettings, build: Builder) -> Member:
    state_dir = context.state_dir / "members" / settings.name
    state_dir.mkdir(parents=True, exist_ok=True)
    member_context = ProviderContext(
        node_name=context.node_name,
        config=settings.config,
        host_ip=context.host_ip,
        state_dir=state_dir,
        pod_events=context.pod_events,
    )
    try:
        provider = build(settings.provider, member_context)
    except (LookupError, TypeError, ValueError) as error:
        raise ValueError(
            f"chain provider: member {settings.name!r} ({settings.provider}): {error}"
        ) from error
    return Member(settings.name, settings.provider, provider, director_for(provider))


def _shared_reason(failures: Iterable[BaseException]) -> str:
    """The reason every member gives for being unavailable (e.g. all InsufficientBalance), or "" when
    they differ or one gives none: the chain's own ProviderAvailable reason."""
    reasons = {
        failure.reason if isinstance(failure, ProviderUnavailableError) else "" for failure in failures
    }
    return reasons.pop() if len(reasons) == 1 else ""


def _refused(ref: PodRef, refusals: Sequence[_Refusal]) -> ProviderError:
    """All attempts failed: for good if every one was refused for good, else worth another try."""
    reasons = "; ".join(f"{refusal.description}: {describe(refusal.error)}" for refusal in refusals)
    message = f"no provider could take pod {pod_name(ref)}: {reasons or 'none was tried'}"
    if refusals and all(isinstance(refusal.error, InvalidPodError) for refusal in refusals):
        return InvalidPodError(message)
    return TemporaryProviderError(
        message, retry_after_seconds=retry_after(refusal.error for refusal in refusals)
    )


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


def _member_price(member: Member, pod: PricedPod) -> float | None:
    provider = member.provider
    return provider.pod_price_per_hour(pod) if isinstance(provider, SupportsPodPrice) else None
