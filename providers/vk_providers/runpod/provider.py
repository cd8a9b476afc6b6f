"""RunPod pods for the pods of a virtual node: create, watch, delete, list, logs, the GPU catalog.

Every call to RunPod goes through one `ResilientCaller` (timeouts, retries with backoff honouring
Retry-After, the provider's circuit breaker); see `vk_provider.kit.resilience`.

Idempotence: a pod UID maps to the RunPod pod whose environment carries it (see `translate`). Before
creating, the provider looks for one; a create that may have reached RunPod without an answer (a
timeout, a dropped connection) looks again before trying once more. Should two RunPod pods ever carry
the same UID, the one furthest along is kept and the others are terminated. Deletion terminates every
RunPod pod carrying the UID; one RunPod no longer knows counts as deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import aiohttp

from vk_provider.errors import (
    CapacityUnavailableError,
    InvalidPodError,
    NotFoundError,
    ProviderError,
    ProviderRefusesWorkError,
)
from vk_provider.kit.credentials import MissingSecretError, SecretSource
from vk_provider.kit.placement.capacity import gpu_type_capacity
from vk_provider.kit.resilience import (
    ApiStatusError,
    BreakerStatus,
    ResilientCaller,
    default_status_error,
)
from vk_provider.kit.resilience.health import probe_health
from vk_provider.kit.resilience.refusal import WorkRefusal
from vk_provider.provider import (
    Availability,
    GpuOffer,
    LocationAvailability,
    LogOptions,
    PodRef,
    PodRequest,
    PodState,
    PricedPod,
    ProviderContext,
)
from vk_providers.runpod.api import LogEvent, RunPodApi, RunPodGpuType, RunPodPod, server_sent_events
from vk_providers.runpod.candidates import Candidate, candidates, in_stock, is_capacity_refusal
from vk_providers.runpod.config import CLOUDS, Cloud, RunPodSettings, parse_settings
from vk_providers.runpod.readiness import ReadinessChecker
from vk_providers.runpod.translate import (
    ENV_CONTAINER_NAME,
    CreateRequest,
    Placement,
    create_request,
    is_gone,
    owner_uid,
    pod_state,
    readiness_url,
    ref_of,
    request_for_offer,
)

logger = logging.getLogger(__name__)

MAX_LOG_TAIL = 5000
"""RunPod backfills at most this many lines."""
_STATUS_PREFERENCE = {"RUNNING": 0, "STARTING": 1, "PROVISIONING": 2, "EXITED": 3, "ERROR": 4}
_LEVELS: Mapping[str, Availability] = {"NONE": "none", "LOW": "low", "MEDIUM": "medium", "HIGH": "high"}
_FAR_FUTURE = datetime.max.replace(tzinfo=UTC)
CAPACITY_EVENT_REASON = "NoCapacity"
"""The pod Event telling which candidate RunPod had no capacity for, and which is tried next."""
INSUFFICIENT_BALANCE_REASON = "InsufficientBalance"
"""The node's ProviderAvailable reason while RunPod refuses the account's new pods (402)."""


def _preference(pod: RunPodPod) -> tuple[int, datetime]:
    """Sort key: the pod furthest along first, then the oldest."""
    return (_STATUS_PREFERENCE.get(pod.status, 5), pod.created_at or _FAR_FUTURE)


def _create_error(error: ApiStatusError, context: str) -> ProviderError:
    """Create's statuses, as RunPod's reference explains them.

    400 means either a rule the body breaks or no capacity for this GPU here, with no code to tell
    them apart but the words (`candidates.is_capacity_refusal`): capacity is worth another candidate,
    a broken rule fails the pod. 402 is a balance that cannot pay: no create can pass until it is topped
    up. 403 is an account that cannot use this GPU pool: this pod cannot run here as asked.
    """
    if error.status == 400:
        if is_capacity_refusal(error.detail):
            return CapacityUnavailableError(str(error), retry_after_seconds=error.retry_after_seconds)
        return InvalidPodError(f"{context}: RunPod refuses the request ({error})")
    if error.status == 402:
        return ProviderRefusesWorkError(
            f"{context}: {error} (the RunPod account's balance cannot pay for new pods)",
            reason=INSUFFICIENT_BALANCE_REASON,
            retry_after_seconds=0.0,
        )
    if error.status == 403:
        return InvalidPodError(f"{context}: {error} (the account cannot use this GPU pool)")
    return default_status_error(error, context)


def _kubelet_timestamp(moment: datetime) -> str:
    utc = moment.astimezone(UTC)
    return f"{utc:%Y-%m-%dT%H:%M:%S}.{utc.microsecond:06d}000Z"


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class RunPodProvider:
    def __init__(
        self,
        context: ProviderContext,
        *,
        settings: RunPodSettings | None = None,
        environ: Mapping[str, str] | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`environ`, `sleep` and `clock` are for tests: where env keys come from, retry waits, breaker time.

        Raises ValueError when the settings are wrong or no API key can be read.
        """
        self.node_name = context.node_name
        self._settings = settings if settings is not None else parse_settings(context.config)
        self._keys = SecretSource(
            file=self._settings.api_key_file,
            env_var=self._settings.api_key_env,
            environ=environ,
            description="RunPod API key",
        )
        try:
            self._keys.current()
        except MissingSecretError as error:
            raise ValueError(f"runpod provider: {error}") from None
        self._clock = clock
        self.breaker = self._settings.calls.breaker("RunPod", clock)
        self._caller = ResilientCaller(
            "RunPod",
            policy=self._settings.calls.call_policy(),
            breaker=self.breaker,
            sleep=sleep,
            redact=self._keys.redact,
        )
        self._api = RunPodApi(self._settings.api_url, self._keys)
        self._refusal = WorkRefusal("RunPod", clock=clock)
        self._pod_events = context.pod_events
        self._ids: dict[str, str] = {}
        """Pod UID -> RunPod pod id, as last seen."""
        self._locks: dict[str, asyncio.Lock] = {}
        self._error_messages: dict[str, str] = {}
        """RunPod pod id -> the message read from its system log when it went into ERROR."""
        self._catalog: dict[tuple[int, str], tuple[float, list[RunPodGpuType]]] = {}
        self._gpu_capacity: dict[str, str] = {}
        self._readiness = ReadinessChecker(
            timeout_seconds=self._settings.readiness_timeout_seconds,
            min_interval_seconds=self._settings.readiness_interval_seconds,
            clock=clock,
        )

    def __repr__(self) -> str:
        source = self._keys.describe()
        return f"RunPodProvider(node={self.node_name!r}, api={self._settings.api_url!r}, key from {source})"

    @property
    def settings(self) -> RunPodSettings:
        return self._settings

    def breaker_status(self) -> BreakerStatus:
        """The circuit breaker's state: what the health check reports as ProviderAvailable."""
        return self.breaker.status()

    # -- PodLifecycle --------------------------------------------------------------------------

    async def create_pod(self, pod: PodRequest) -> None:
        """Create at the pod's first candidate RunPod has capacity for (see `candidates`), each refusal
        told in a pod Event; while RunPod refuses the account (402), no create is sent (`WorkRefusal`)."""
        request = create_request(pod, self._settings, self.node_name)
        uid = pod.ref.uid
        async with self._lock(uid):
            # First: while RunPod refuses the account, not even the look-up is sent (the node only
            # creates a pod it found missing a moment ago).
            self._refusal.check()
            try:
                await self._find_or_place(pod.ref, request)
            finally:
                self._refusal.released()  # a trial that ended in no verdict: the next call is one

    async def _find_or_place(self, ref: PodRef, request: CreateRequest) -> None:
        uid = ref.uid
        existing = await self._caller.call("find_pod", functools.partial(self._find_all, uid))
        if existing:
            await self._terminate_duplicates(uid, existing)
            return
        if request.placement.max_price_per_hour is not None:
            await self._check_price(request.placement)
        placement = request.placement
        queue = candidates(placement.gpu_types, placement.data_center_ids)
        refused: list[str] = []
        candidate: Candidate | None = queue.pop(0)
        while candidate is not None:
            try:
                created = await self._create_at(uid, candidate.body(request.body))
            except CapacityUnavailableError as error:
                what = candidate.describe(placement.gpu_count, placement.cloud)
                refused.append(f"{what}: {error}")
                candidate = await self._next_in_stock(queue, placement)
                self._tell_refusal(ref, what, candidate, placement)
                continue
            self._ids[uid] = created.id
            logger.info(
                "pod %s: RunPod pod %s (%d x %s, %s)",
                ref,
                created.id,
                placement.gpu_count,
                candidate.gpu_type,
                placement.cloud,
            )
            return
        refusals = "; ".join(refused)
        raise CapacityUnavailableError(
            f"RunPod create_pod: RunPod could not place the pod: no capacity for {refusals}; "
            "trying again later"
        )

    async def _create_at(self, uid: str, body: Mapping[str, Any]) -> RunPodPod:
        """One candidate's create, under the call policy; a 402 starts the account's refusal."""
        just_looked = True

        async def find_or_create() -> RunPodPod:
            # After an attempt whose answer was lost, RunPod may have made the pod: look first.
            nonlocal just_looked
            if not just_looked:
                found = await self._find_all(uid)
                if found:
                    return found[0]
            just_looked = False
            return await self._api.create_pod(body)

        try:
            created = await self._caller.call("create_pod", find_or_create, map_status=_create_error)
        except ProviderRefusesWorkError as error:
            raise self._refusal.refused(error.reason, str(error)) from None
        self._refusal.accepted()
        return created

    async def _next_in_stock(self, queue: list[Candidate], placement: Placement) -> Candidate | None:
        """The next candidate the freshly read catalog has stock for (within the pod's price cap), taken
        from `queue`; None when none is left. When the catalog cannot be read, the next one as it is: its
        create will say (and the first candidate's price was checked before any create)."""
        if not queue:
            return None
        key = (placement.gpu_count, placement.cloud)
        self._catalog.pop(key, None)  # the refusal says it was stale
        try:
            catalog: list[RunPodGpuType] | None = await self._gpu_types(*key)
        except ProviderError as error:
            logger.info("RunPod's GPU catalog is unreadable (%s); trying the next GPU type as it is", error)
            catalog = None
        while queue:
            candidate = queue.pop(0)
            stocked = (
                candidate
                if catalog is None
                else in_stock(
                    candidate,
                    catalog,
                    gpu_count=placement.gpu_count,
                    cloud=placement.cloud,
                    max_price_per_hour=placement.max_price_per_hour,
                )
            )
            if stocked is not None:
                return stocked
        return None

    def _tell_refusal(
        self, ref: PodRef, what: str, following: Candidate | None, placement: Placement
    ) -> None:
        if following is None:
            message = f"RunPod has no capacity for {what}, the pod's last candidate in stock"
        else:
            nxt = following.describe(placement.gpu_count, placement.cloud)
            message = f"RunPod has no capacity for {what}; trying {nxt}"
        self._pod_events.record(ref, "Warning", CAPACITY_EVENT_REASON, message)

    async def update_pod(self, pod: PodRequest) -> None:
        """Only the image of a running pod can change (as in Kubernetes); RunPod restarts the container."""
        request = create_request(pod, self._settings, self.node_name)
        async with self._lock(pod.ref.uid):
            existing = await self._caller.call("get_pod", functools.partial(self._lookup, pod.ref.uid))
            if existing is None or existing.image == request.image:
                return
            await self._caller.call(
                "update_pod", functools.partial(self._api.update_pod, existing.id, {"image": request.image})
            )
            logger.info("pod %s: RunPod pod %s now runs %s", pod.ref, existing.id, request.image)

    async def delete_pod(self, ref: PodRef, *, grace_period_seconds: float) -> None:
        """Terminate at once: RunPod has no graceful stop with a deadline, so the grace period is not used."""
        async with self._lock(ref.uid):
            # The id we know too: a pod created a moment ago may not be listed yet.
            known = self._ids.get(ref.uid)
            found = await self._caller.call("find_pod", functools.partial(self._find_all, ref.uid))
            ids = [pod.id for pod in found]
            if known is not None and known not in ids:
                ids.append(known)
            for pod_id in ids:
                if await self._caller.call("delete_pod", functools.partial(self._api.delete_pod, pod_id)):
                    logger.info("pod %s: terminated RunPod pod %s", ref, pod_id)
                self._error_messages.pop(pod_id, None)
                self._readiness.forget(pod_id)
            self._ids.pop(ref.uid, None)

    async def get_pod_state(self, ref: PodRef) -> PodState | None:
        pod = await self._caller.call("get_pod", functools.partial(self._lookup, ref.uid))
        if pod is None:
            return None
        message = await self._error_message(pod) if pod.status == "ERROR" else None
        template = self._settings.proxy_url_template
        ready = True
        if pod.status == "RUNNING" and (url := readiness_url(pod, template)) is not None:
            ready = await self._readiness.check(pod.id, url)
        return pod_state(ref, pod, proxy_url_template=template, error_message=message, ready=ready)

    async def list_pods(self) -> Sequence[PodState]:
        """The node's pods at RunPod, one per pod UID; a UID's extra RunPod pods are terminated here.

        RunPod's create has no idempotency key: a create that timed out here but went through there
        late makes a second RunPod pod, which nothing else would see until the pod is deleted (and it
        costs money meanwhile). The listing the node's orphan sweep runs is where it shows up.
        """
        pods = await self._caller.call("list_pods", self._api.list_pods)
        by_uid: dict[str, list[RunPodPod]] = {}
        for pod in pods:
            uid = owner_uid(pod, self.node_name)
            if uid is not None and not is_gone(pod):
                by_uid.setdefault(uid, []).append(pod)
        chosen: dict[str, RunPodPod] = {}
        for uid, held in by_uid.items():
            held.sort(key=_preference)
            chosen[uid] = held[0]
            if len(held) > 1:
                async with self._lock(uid):  # not while a create of this UID is looking
                    await self._terminate_duplicates(uid, held)
        states = []
        for uid, pod in chosen.items():
            self._ids[uid] = pod.id
            states.append(
                pod_state(
                    ref_of(pod),
                    pod,
                    proxy_url_template=self._settings.proxy_url_template,
                    error_message=self._error_messages.get(pod.id),
                    ready=readiness_url(pod, self._settings.proxy_url_template) is None
                    or self._readiness.last(pod.id),
                )
            )
        return states

    async def check_health(self) -> None:
        """Unavailable while the breaker is open, or when RunPod refuses the key or account.

        One failed probe does not make the provider unavailable (`vk_provider.kit.resilience.health`).
        While RunPod refuses the account's new pods (402), unavailable with the reason
        InsufficientBalance, until a create may try again (`WorkRefusal`).
        """
        refusal = self._refusal.health_error()
        if refusal is not None:
            raise refusal
        await probe_health(
            self._caller,
            self.breaker,
            self._api.probe,
            provider="RunPod",
            timeout_seconds=self._settings.calls.health_probe_timeout_seconds,
        )

    async def aclose(self) -> None:
        await self._readiness.aclose()
        await self._api.aclose()

    # -- SupportsPodPrice ----------------------------------------------------------------------

    def pod_price_per_hour(self, pod: PricedPod) -> float | None:
        """The most the pod may cost: `max_price_per_hour`, above which no offer is taken (a pod's own
        max-price-per-hour annotation is counted by the node before it asks). None without a cap: the
        offer is not chosen before the pod is created, so its price is not known before."""
        return self._settings.max_price_per_hour

    # -- SupportsNodeCapacity, SupportsGpuCatalog, SupportsOfferPlacement ----------------------

    async def node_capacity(self) -> Mapping[str, str]:
        """The configured capacity, plus GPUs per type from the catalog (`gpu.vk-provider.dev/<type>`).

        When the catalog cannot be read, the last types read stay advertised (the failure is counted by
        the breaker and logged): a node whose GPU types come and go with every API hiccup would make the
        scheduler's view flap.
        """
        try:
            self._gpu_capacity = gpu_type_capacity(await self.gpu_offers(gpu_count=1))
        except ProviderError as error:
            logger.info("RunPod's GPU catalog is unreadable (%s); advertising the last types read", error)
        return {**self._settings.capacity, **self._gpu_capacity}

    async def gpu_offers(self, *, gpu_count: int = 1, clouds: Sequence[Cloud] = CLOUDS) -> Sequence[GpuOffer]:
        """RunPod's pod offers for `gpu_count` GPUs: one per GPU type and cloud that has it, with stock."""
        offers = []
        for cloud in clouds:
            for gpu in await self._gpu_types(gpu_count, cloud):
                price = gpu.price_per_gpu.get(cloud)
                ceiling = gpu.max_count.get(cloud, 0)
                if not gpu.offered.get(cloud) or price is None or ceiling < gpu_count:
                    continue
                offers.append(
                    GpuOffer(
                        gpu_type=gpu.id,
                        gpu_count=gpu_count,
                        price_per_hour=round(price * gpu_count, 6),
                        display_name=gpu.name,
                        memory_gb=gpu.memory_gb,
                        tier=cloud,
                        availability=_LEVELS.get(gpu.availability or ""),
                        locations=tuple(
                            LocationAvailability(center_id, _LEVELS[level], name)
                            for center_id, name, level in gpu.data_centers
                            if level in _LEVELS
                        ),
                        max_count=ceiling,
                    )
                )
        return offers

    def request_for_offer(
        self,
        pod: PodRequest,
        offer: GpuOffer,
        *,
        locations: Sequence[str] = (),
        max_price_per_hour: float | None = None,
    ) -> PodRequest:
        """`pod` placed on `offer` through its RunPod annotations (see `translate.request_for_offer`)."""
        return request_for_offer(pod, offer, locations, max_price_per_hour)

    async def _gpu_types(self, gpu_count: int, cloud: str) -> list[RunPodGpuType]:
        key = (gpu_count, cloud)
        cached = self._catalog.get(key)
        if cached is not None and self._clock() - cached[0] < self._settings.catalog_ttl_seconds:
            return cached[1]
        types = await self._caller.call(
            "gpu_catalog", functools.partial(self._api.gpu_types, gpu_count=gpu_count, cloud=cloud)
        )
        self._catalog[key] = (self._clock(), types)
        return types

    async def _check_price(self, placement: Placement) -> None:
        cap = placement.max_price_per_hour
        offers = await self.gpu_offers(gpu_count=placement.gpu_count, clouds=(placement.cloud,))
        offer = next((offer for offer in offers if offer.gpu_type == placement.gpu_type), None)
        what = f"{placement.gpu_count} x {placement.gpu_type} in RunPod's {placement.cloud} cloud"
        if offer is None:
            raise InvalidPodError(f"RunPod's catalog does not offer {what}")
        if cap is not None and offer.price_per_hour > cap:
            raise InvalidPodError(
                f"{what} costs ${offer.price_per_hour:.2f}/h, above the cap of ${cap:.2f}/h"
            )

    # -- SupportsLogs --------------------------------------------------------------------------

    def stream_logs(self, ref: PodRef, container: str, options: LogOptions) -> AsyncIterator[bytes]:
        """The container's log through RunPod's log stream (`source=container`).

        RunPod backfills at most 5000 lines and its stream has no end: a log that is not followed ends
        when the stream has been quiet for `log_idle_seconds` (or once `tail_lines` lines came). With
        `since_time`, RunPod ignores `tail`; without following, the tail is then cut here.
        """
        if options.previous:
            raise NotFoundError(f"previous terminated container {container!r} in pod {ref} not found")
        return self._stream_logs(ref, container, options)

    async def _stream_logs(self, ref: PodRef, container: str, options: LogOptions) -> AsyncIterator[bytes]:
        pod = await self._caller.call("get_pod", functools.partial(self._lookup, ref.uid))
        if pod is None:
            raise NotFoundError(f"pod {ref} is not held by RunPod")
        if container != pod.env.get(ENV_CONTAINER_NAME):
            raise NotFoundError(f"pod {ref} has no container {container!r}")
        params = {"source": "container"}
        stop_after: int | None = None
        keep_last: int | None = None
        if options.since_time is not None:
            params["since"] = _rfc3339(options.since_time)
            if options.tail_lines is not None and not options.follow:
                keep_last = options.tail_lines
        else:
            tail = MAX_LOG_TAIL if options.tail_lines is None else min(options.tail_lines, MAX_LOG_TAIL)
            params["tail"] = str(tail)
            if not options.follow:
                stop_after = tail
        if stop_after == 0 or keep_last == 0:
            return
        response = await self._caller.call(
            "stream_logs", functools.partial(self._api.open_logs, pod.id, params)
        )
        remaining = options.limit_bytes
        try:
            events = self._events(response, idle=None if options.follow else self._settings.log_idle_seconds)
            if keep_last is not None:
                events = _last(events, keep_last)
            sent = 0
            async for event in events:
                chunk = _log_line(event, options.timestamps)
                if remaining is not None:
                    chunk = chunk[:remaining]
                    remaining -= len(chunk)
                yield chunk
                sent += 1
                if remaining == 0 or (stop_after is not None and sent >= stop_after):
                    return
        finally:
            response.close()

    async def _events(
        self, response: aiohttp.ClientResponse, *, idle: float | None
    ) -> AsyncIterator[LogEvent]:
        """The stream's events; with `idle`, the stream ends after that long without one."""
        events = server_sent_events(response.content)
        try:
            while True:
                try:
                    async with asyncio.timeout(idle):
                        event = await anext(events)
                except (StopAsyncIteration, TimeoutError):
                    return
                except aiohttp.ClientError as error:
                    logger.info("RunPod log stream broke off: %s", self._keys.redact(str(error)))
                    return
                yield event
        finally:
            await events.aclose()

    async def _error_message(self, pod: RunPodPod) -> str | None:
        """The last lines of the pod's system log, read once per pod: RunPod's Pod has no message field."""
        lines = self._settings.error_log_lines
        if lines == 0:
            return None
        cached = self._error_messages.get(pod.id)
        if cached is not None:
            return cached
        params = {"source": "system", "tail": str(lines)}
        try:
            response = await self._caller.call(
                "read system log", functools.partial(self._api.open_logs, pod.id, params), retry=False
            )
        except ProviderError as error:
            logger.info("could not read the system log of RunPod pod %s: %s", pod.id, error)
            return None
        try:
            texts = []
            async for event in self._events(response, idle=self._settings.log_idle_seconds):
                if event.line.strip():
                    texts.append(event.line.strip())
                if len(texts) >= lines:
                    break
        finally:
            response.close()
        if not texts:
            return None
        message = self._keys.redact(
            f"RunPod reports the pod in ERROR; its system log ends: {' / '.join(texts)}"
        )
        self._error_messages[pod.id] = message
        return message

    # -- finding our RunPod pods ---------------------------------------------------------------

    def _lock(self, uid: str) -> asyncio.Lock:
        return self._locks.setdefault(uid, asyncio.Lock())

    async def _find_all(self, uid: str) -> list[RunPodPod]:
        """Every live RunPod pod carrying `uid` for this node, the one to keep first."""
        pods = [
            pod
            for pod in await self._api.list_pods()
            if owner_uid(pod, self.node_name) == uid and not is_gone(pod)
        ]
        pods.sort(key=_preference)
        if pods:
            self._ids[uid] = pods[0].id
        else:
            self._ids.pop(uid, None)
        return pods

    async def _lookup(self, uid: str) -> RunPodPod | None:
        """The RunPod pod for `uid`: by its known id if it still has one, else from the list."""
        pod_id = self._ids.get(uid)
        if pod_id is not None:
            pod = await self._api.get_pod(pod_id)
            if pod is not None and owner_uid(pod, self.node_name) == uid and not is_gone(pod):
                return pod
        found = await self._find_all(uid)
        return found[0] if found else None

    async def _terminate_duplicates(self, uid: str, pods: Sequence[RunPodPod]) -> None:
        for extra in pods[1:]:
            logger.warning(
                "pod %s has a second RunPod pod %s (keeping %s); terminating it", uid, extra.id, pods[0].id
            )
            with contextlib.suppress(ProviderError):
                await self._caller.call("delete_pod", functools.partial(self._api.delete_pod, extra.id))


async def _last(events: AsyncIterator[LogEvent], count: int) -> AsyncIterator[LogEvent]:
    kept: list[LogEvent] = []
    async for event in events:
        kept.append(event)
        del kept[:-count]
    for event in kept:
        yield event


def _log_line(event: LogEvent, timestamps: bool) -> bytes:
    line = event.line if event.line.endswith("\n") else event.line + "\n"
    if timestamps:
        line = f"{_kubelet_timestamp(event.ts or datetime.now(UTC))} {line}"
    return line.encode()
