"""Reconcile each pod bound to this node with its workload at the provider.

Level-based: a worker takes a pod UID, looks at the pod as the API has it now and at what the provider
holds for that UID, and does whatever closes the gap: create, write status, stop, remove. It never
acts on an event's content, so a missed or repeated event cannot make it wrong, and a restart simply
reconciles everything again.

Failures never stop a pod from being retried and never delay other pods: each UID has its own
backoff, and the queue keeps serving the rest.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, cast

from vk_provider._kube.combined import Mirror
from vk_provider._kube.events import EventRecorder, InvolvedObject
from vk_provider.environment import MandatoryReferenceError, ReferenceReader
from vk_provider.errors import (
    InvalidPodError,
    ProviderError,
    ProviderRefusesWorkError,
    TemporaryProviderError,
)
from vk_provider.kit.kube import KubeApi, KubeApiError, resource_path
from vk_provider.kit.placement.annotations import CHOSEN_ANNOTATION
from vk_provider.kit.placement.record import (
    PLACED_EVENT_REASON,
    chosen_annotation,
    placement_message,
    recorded_placement,
)
from vk_provider.kit.timestamps import parse_timestamp
from vk_provider.kit.traffic_signature import TrafficKey
from vk_provider.node import admission, podstatus
from vk_provider.node.costs import PodCosts
from vk_provider.node.metrics import DaemonMetrics
from vk_provider.node.podrequest import build_pod_request, pod_ref
from vk_provider.node.pricing import provider_quote
from vk_provider.node.settings import NodeSettings
from vk_provider.node.tokens import ServiceAccountTokens
from vk_provider.offload.names import TRAFFIC_ADDRESS_ANNOTATION, TRAFFIC_AUTH_ANNOTATION
from vk_provider.provider import (
    PodLifecycle,
    PodRef,
    PodRequest,
    PodState,
    SupportsPodAddress,
    SupportsServiceAccountTokens,
)
from vk_provider.runtime.queueing import Backoff, KeyedQueue, Requeue, Retry, WorkLoop

logger = logging.getLogger(__name__)

DEFAULT_GRACE_SECONDS = 30.0


def _deletion_time(metadata: Mapping[str, Any]) -> datetime:
    deleted_at = parse_timestamp(metadata.get("deletionTimestamp"))
    if deleted_at is None:
        raise ValueError(f"deletionTimestamp {metadata.get('deletionTimestamp')!r} is not an RFC 3339 time")
    return deleted_at


def _involved(pod: Mapping[str, Any]) -> InvolvedObject:
    metadata = pod["metadata"]
    return InvolvedObject("Pod", metadata["name"], metadata["namespace"], metadata["uid"])


OWN_ANNOTATIONS = frozenset({TRAFFIC_ADDRESS_ANNOTATION, TRAFFIC_AUTH_ANNOTATION, CHOSEN_ANNOTATION})
"""The chosen placement, which we write, and the traffic annotations older nodes wrote (left over, or
forged: the router ignores them), none of which is the workload's business."""


def spec_fingerprint(pod: Mapping[str, Any]) -> str:
    """What a provider may need to update in a running pod: labels, annotations, container images.

    Our own annotations are left out: writing the chosen placement must not look like a change, nor
    must an old traffic annotation appearing or going.
    """
    metadata = pod["metadata"]
    annotations = {
        key: value for key, value in (metadata.get("annotations") or {}).items() if key not in OWN_ANNOTATIONS
    }
    spec = pod["spec"]
    images = [
        (c["name"], c.get("image", ""))
        for c in [*spec.get("initContainers", []), *spec.get("containers", [])]
    ]
    return json.dumps([metadata.get("labels") or {}, annotations, images], sort_keys=True)


def _with_recorded_placement(request: PodRequest, pod: Mapping[str, Any]) -> PodRequest:
    """The request with the placement recorded in the pod's status as its `chosen` annotation, where
    providers (the chain) look for it after a restart, as they did when nodes wrote the annotation."""
    recorded = recorded_placement(pod)
    if recorded is None or CHOSEN_ANNOTATION in request.annotations:
        return request
    annotations = {**request.annotations, CHOSEN_ANNOTATION: chosen_annotation(recorded)}
    return dataclasses.replace(request, annotations=annotations)


@dataclasses.dataclass(frozen=True, slots=True)
class _Written:
    """A status write of the node, remembered until the watch cache shows it."""

    over: str
    """The resourceVersion the cache showed when it was written."""
    version: str
    """The resourceVersion the API answered with ("" when it did not say)."""
    status: dict[str, Any]
    """The status the API holds since."""


def _caught_up(cached: str, written: _Written) -> bool:
    """Whether the cache's version of the pod includes the write.

    resourceVersions are etcd revisions on every apiserver there is, so the cache has caught up when it
    shows the version the write made or a later one; an event from before the write (another change the
    watch is still delivering) must not make the node write the same status again. Should a version not
    be a number, any version other than the one written over counts (at worst one repeated write).
    """
    if cached.isdigit() and written.version.isdigit():
        return int(cached) >= int(written.version)
    return cached != written.over


def _pod_path(ref: PodRef) -> str:
    return resource_path("v1", "pods", namespace=ref.namespace, name=ref.name)


def provider_wait_seconds(error: BaseException) -> float:
    """How long the provider asked us to wait (e.g. a 429's Retry-After, or the rest of a refusal of all
    new work, see `ProviderRefusesWorkError`); 0 when it did not say."""
    hint = (
        error.retry_after_seconds
        if isinstance(error, TemporaryProviderError | ProviderRefusesWorkError)
        else None
    )
    return hint if hint is not None and hint > 0 else 0.0


def retry_delay(backoff_seconds: float, error: BaseException) -> float:
    """The backoff, or longer when the provider said how long to wait."""
    return max(backoff_seconds, provider_wait_seconds(error))


EXPECTED_ERRORS = (MandatoryReferenceError, ProviderError, KubeApiError, ValueError, OSError, TimeoutError)
"""Failures a pod's pass is expected to meet; any other is logged with its traceback."""


class PodReconciler:
    def __init__(
        self,
        *,
        api: KubeApi,
        settings: NodeSettings,
        provider: PodLifecycle,
        pods: Mirror,
        reader: ReferenceReader,
        events: EventRecorder,
        queue: KeyedQueue,
        node_allocatable: Mapping[str, str],
        metrics: DaemonMetrics,
    ) -> None:
        self._api = api
        self._settings = settings
        self._provider = provider
        self._pods = pods
        self._reader = reader
        self._events = events
        self._node_allocatable = node_allocatable
        self._metrics = metrics
        self.work = WorkLoop(
            queue,
            self._timed_reconcile,
            backoff=Backoff(
                initial_seconds=settings.retry_initial_seconds, max_seconds=settings.retry_max_seconds
            ),
            what="pod",
            on_failure=self._failed,
            expected_errors=EXPECTED_ERRORS,
        )
        self.traffic_key: TrafficKey | None = None
        """What the traffic addresses this node publishes are sealed with: set by the daemon before any
        pod is reconciled (`vk_provider.node.traffickey`)."""
        self._applied: dict[str, str] = {}
        """What each pod looked like when last handed to the provider (see `spec_fingerprint`)."""
        self.known: dict[str, PodRef] = {}
        self._unserved_reported: set[str] = set()
        """UIDs of the workloads already reported as kept for a namespace this node does not serve."""
        """Pods the provider holds a workload for, by UID: created by us, or adopted at start-up."""
        self._stopping: dict[str, float] = {}
        """Pods asked to stop at the provider, with the grace period they were given, by UID."""
        quote = provider_quote(provider)
        self._costs = PodCosts(metrics, quote=quote, provider_name=settings.provider)
        self._admissions = admission.Admissions(
            node_name=settings.node_name,
            allocatable=node_allocatable,
            ceilings=admission.Ceilings(
                settings.max_provider_pods, settings.max_spend_per_hour, settings.allow_unpriced_pods
            ),
            quote=quote,
        )
        self._announced: dict[str, str] = {}
        """The placement (its JSON record) each pod's Placed event announced, by UID: until the watch
        brings the record back, the cache does not show it written, and the event must not be posted
        again."""
        self._written: dict[str, _Written] = {}
        """The node's last status write of each pod while the watch cache may lag it, by UID."""
        self._tokens = (
            ServiceAccountTokens(api, refresh_fraction=settings.token_refresh_fraction)
            if isinstance(provider, SupportsServiceAccountTokens) and provider.mounts_service_account_tokens()
            else None
        )
        """Set when the provider mounts ServiceAccount tokens: the node requests and rotates them."""
        self._tokenless: set[str] = set()
        """Pods (by UID) whose volumes hold no token: nothing to rotate."""
        self.reconciles = 0
        self.failures = 0

    # -- the worker loop -------------------------------------------------------------------------

    async def run_worker(self) -> None:
        await self.work.run_worker()

    async def _timed_reconcile(self, uid: str) -> Requeue:
        self.reconciles += 1
        started = time.perf_counter()
        try:
            requeue_after = await self.reconcile(uid)
        except MandatoryReferenceError:
            self._metrics.observe_reconcile(time.perf_counter() - started, ok=False)
            raise
        self._metrics.observe_reconcile(time.perf_counter() - started, ok=True)
        return requeue_after

    async def _failed(self, uid: str, error: Exception) -> Retry | None:
        """Make a failed pass visible on the pod, and say when to try again (never for a Failed pod)."""
        pod = self._pods.objects.get(uid)
        if isinstance(error, MandatoryReferenceError):
            # Nothing was created; the pod waits, as with a kubelet, until the reference appears.
            if pod is not None:
                for event in (*error.earlier_events, error.event):
                    self._events.record(_involved(pod), event.type, event.reason, event.message)
        else:
            self.failures += 1
            if (
                pod is not None
                and not isinstance(error, KubeApiError)
                and not pod["metadata"].get("deletionTimestamp")
            ):
                await self._report_provider_failure(pod, error)
        pod = self._pods.objects.get(uid)
        if pod is not None and pod.get("status", {}).get("phase") == "Failed":
            return None  # terminal: a Failed pod is never run again
        return Retry(not_before_seconds=provider_wait_seconds(error))

    async def _report_provider_failure(self, pod: Mapping[str, Any], error: BaseException) -> None:
        message = str(error) or type(error).__name__
        reason = (
            "ProviderDeleteFailed" if pod["metadata"].get("deletionTimestamp") else "ProviderCreateFailed"
        )
        self._events.record(_involved(pod), "Warning", reason, message)
        final = isinstance(error, InvalidPodError)
        status = podstatus.provider_failed_status(
            pod, message, host_ip=self._settings.host_ip, now=datetime.now(UTC), final=final
        )
        if final:
            logger.warning("pod %s cannot run here: %s", pod_ref(pod), message)
        try:
            await self._patch_status(pod, status)
        except KubeApiError as patch_error:
            logger.warning("could not write the ProviderFailed status of %s: %s", pod_ref(pod), patch_error)

    # -- one reconcile ---------------------------------------------------------------------------

    async def reconcile(self, uid: str) -> float | None:
        """Bring the provider and the pod's status in line. Returns seconds until a re-check, or None."""
        pod = self._pods.objects.get(uid)
        if pod is None:
            await self._forget(uid)
            return None
        ref = pod_ref(pod)
        if pod["metadata"].get("deletionTimestamp"):
            return await self._reconcile_deletion(pod, ref)
        phase = pod.get("status", {}).get("phase")
        async with self._metrics.time_provider_call("get_pod_state"):
            state = await self._provider.get_pod_state(ref)
        if state is None:
            if phase in ("Succeeded", "Failed"):
                return None  # finished before; nothing to run again
            if uid in self.known:
                # We created it and the provider lost it: report, and create it again below.
                logger.warning("the provider no longer holds pod %s; creating it again", ref)
            elif not await self._admit(pod):
                return None  # refused as a kubelet refuses: Failed, and nothing created
            await self._create(pod, ref)
            async with self._metrics.time_provider_call("get_pod_state"):
                state = await self._provider.get_pod_state(ref) or PodState(ref=ref, phase="Pending")
        else:
            await self._update_if_changed(pod, ref)
        self.known[uid] = ref
        self._applied.setdefault(uid, spec_fingerprint(pod))
        if phase in ("Succeeded", "Failed"):
            return None
        await self._write_status(pod, state)
        return await self._rotate_tokens(pod, ref, state)

    async def _rotate_tokens(self, pod: dict[str, Any], ref: PodRef, state: PodState) -> float | None:
        """Hand the provider fresh tokens when they are due (or unknown: adopted after a restart), and
        say when to look again."""
        if self._tokens is None or ref.uid in self._tokenless or state.phase in ("Succeeded", "Failed"):
            return None
        due = self._tokens.seconds_until_due(ref.uid)
        if due is None or due <= 0:
            await self._hand_volume_files(ref, await self._request_for(pod, ref))
            due = self._tokens.seconds_until_due(ref.uid)
            if due is None:
                self._tokenless.add(ref.uid)
        return due

    async def _admit(self, pod: dict[str, Any]) -> bool:
        """The node's admission (`admission`); a refused pod is Failed with the kubelet's reason."""
        refusal = self._admissions.decide(
            pod, self._pods.objects.values(), held=self.known.keys(), prices=self._costs.prices
        )
        if refusal is None:
            return True
        if self._admissions.announce(pod["metadata"]["uid"]):
            self._events.record(_involved(pod), "Warning", refusal.reason, refusal.message)
            self._metrics.count_admission_refusal(refusal.reason, refusal.check)
        state = PodState(pod_ref(pod), "Failed", reason=refusal.reason, message=refusal.status_message)
        status = podstatus.pod_status(pod, state, host_ip=self._settings.host_ip, now=datetime.now(UTC))
        await self._patch_status(pod, status)
        return False

    async def _update_if_changed(self, pod: dict[str, Any], ref: PodRef) -> None:
        """Hand the provider what changed in a pod it already runs (labels, annotations, images)."""
        fingerprint = spec_fingerprint(pod)
        applied = self._applied.get(ref.uid)
        if applied is None or applied == fingerprint:
            # Adopted after a restart: what runs is what was asked for then; compare from now on.
            return
        request = await self._request_for(pod, ref)
        async with self._metrics.time_provider_call("update_pod"):
            await self._provider.update_pod(request)
        if self._tokens is not None:
            # The request came with fresh tokens, and the next rotation is timed from them: mount them.
            await self._hand_volume_files(ref, request)
        self._applied[ref.uid] = fingerprint

    async def _create(self, pod: dict[str, Any], ref: PodRef) -> None:
        request = admission.capped(await self._request_for(pod, ref), self._admissions.price_cap(ref.uid))
        async with self._metrics.time_provider_call("create_pod"):
            await self._provider.create_pod(request)
        self.known[ref.uid] = ref
        self._applied[ref.uid] = spec_fingerprint(pod)
        self._events.record(_involved(pod), "Normal", "ProviderCreateSuccess", "created in the provider")

    async def _request_for(self, pod: dict[str, Any], ref: PodRef) -> PodRequest:
        """The provider's view of the pod, environment resolved; its events recorded."""
        pod_ip = ""
        if isinstance(self._provider, SupportsPodAddress):
            async with self._metrics.time_provider_call("pod_address"):
                pod_ip = await self._provider.pod_address(ref)
        if self._tokens is not None:
            self._tokens.start_over(ref.uid)  # every token of the pod is requested afresh below
        request, environment_events = await build_pod_request(
            pod,
            reader=self._reader,
            tokens=self._tokens,
            pod_ip=pod_ip,
            host_ip=self._settings.host_ip,
            node_allocatable=self._node_allocatable,
        )
        for event in environment_events:
            self._events.record(_involved(pod), event.type, event.reason, event.message)
        return _with_recorded_placement(request, pod)

    async def _write_status(self, pod: dict[str, Any], state: PodState) -> None:
        """One status patch when the pod's status must change, carrying all the node publishes of it:
        the state, the traffic address and auth marker of a pod an Offload routes to, and where a
        provider placed it (see `podstatus`). Never a metadata write: the kubelet writes a pod's status
        once per transition, and every pod write is an update each watcher of pods receives."""
        ref = pod_ref(pod)
        seen = {**pod, "status": self._status_seen(pod)}
        status = podstatus.pod_status(
            seen,
            state,
            host_ip=self._settings.host_ip,
            now=datetime.now(UTC),
            traffic_key=self.traffic_key,
        )
        if state.placement is not None:
            recorded = recorded_placement(seen)
            chosen = chosen_annotation(state.placement)
            if (recorded is None or chosen_annotation(recorded) != chosen) and self._announced.get(
                ref.uid
            ) != chosen:
                self._announced[ref.uid] = chosen
                self._events.record(
                    _involved(pod), "Normal", PLACED_EVENT_REASON, placement_message(state.placement)
                )
        await self._patch_status(pod, status, seen["status"])
        self._costs.observe(seen, state)

    def _status_seen(self, pod: Mapping[str, Any]) -> dict[str, Any]:
        """The pod's status as the API holds it, as far as this node knows: the watch cache's, with the
        node's last write merged in until the cache shows it (`_caught_up`).

        Without this, a reconcile that comes before the watch brings the write back (the provider's own
        push of the state it just reported does) writes the same status again; and since a first write
        stamps transition and start times with `now`, the second one, a second later, is a real change,
        another pod update for every watcher.
        """
        current = dict(pod.get("status") or {})
        uid = pod["metadata"]["uid"]
        record = self._written.get(uid)
        if record is None:
            return current
        if _caught_up(str(pod["metadata"].get("resourceVersion", "")), record):
            del self._written[uid]
            return current
        return podstatus.merged(current, record.status)

    async def _patch_status(
        self, pod: Mapping[str, Any], status: dict[str, Any], seen: Mapping[str, Any] | None = None
    ) -> None:
        """Patch the pod's status if `status` changes what it holds (`seen`, else the cache's), and
        remember the write until the watch brings it back."""
        current = dict(seen if seen is not None else self._status_seen(pod))
        if not podstatus.differs(current, status):
            return
        written = await self._api.patch(_pod_path(pod_ref(pod)) + "/status", {"status": status})
        metadata = pod["metadata"]
        self._written[metadata["uid"]] = _Written(
            over=str(metadata.get("resourceVersion", "")),
            version=str((written.get("metadata") or {}).get("resourceVersion", "")),
            status=podstatus.merged(current, status),
        )

    async def _reconcile_deletion(self, pod: dict[str, Any], ref: PodRef) -> float | None:
        """Stop the workload, then remove the API object as soon as the provider says it has stopped."""
        metadata = pod["metadata"]
        grace = float(metadata.get("deletionGracePeriodSeconds", DEFAULT_GRACE_SECONDS))
        remaining = (_deletion_time(metadata) - datetime.now(UTC)).total_seconds()
        async with self._metrics.time_provider_call("get_pod_state"):
            state = await self._provider.get_pod_state(ref)
        if state is not None and not state.terminated:
            if ref.uid not in self._stopping:
                given = max(0.0, min(grace, remaining))
                await self._delete_in_provider(ref, grace_period_seconds=given)
                self._stopping[ref.uid] = given
                self._events.record(
                    _involved(pod), "Normal", "Killing", f"stopping the workload (grace {given:g}s)"
                )
            if remaining > 0:
                # A pushed state wakes us earlier; this is the backstop at the end of the grace period.
                return min(remaining, self._settings.status_poll_interval_seconds)
            if self._stopping[ref.uid] > 0:
                # Only a workload given a grace period can overrun it; a forced deletion (grace 0, or
                # first met after its grace ran out) was asked to stop at once, and that is no news.
                logger.warning("pod %s did not stop within its grace period; forcing it", ref)
            await self._delete_in_provider(ref, grace_period_seconds=0)
        elif state is not None:
            # Stopped: one more (idempotent) delete lets the provider drop what it kept of the pod.
            await self._delete_in_provider(ref, grace_period_seconds=0)
        await self._remove_api_object(ref)
        return None

    async def _remove_api_object(self, ref: PodRef) -> None:
        body = {"gracePeriodSeconds": 0, "preconditions": {"uid": ref.uid}}
        try:
            await self._api.delete(_pod_path(ref), body)
        except KubeApiError as error:
            # Gone already, or a new pod took the name (the UID precondition protects it).
            if not (error.not_found or error.conflict):
                raise
        self._stopping.pop(ref.uid, None)
        self._applied.pop(ref.uid, None)
        self._announced.pop(ref.uid, None)
        self._written.pop(ref.uid, None)
        self.known.pop(ref.uid, None)
        self._costs.stop(ref.uid)
        self._admissions.forget(ref.uid)

    async def _forget(self, uid: str) -> None:
        """The API object is gone (force delete, or our own final delete): make sure nothing runs."""
        ref = self.known.pop(uid, None)
        self._applied.pop(uid, None)
        self._announced.pop(uid, None)
        self._written.pop(uid, None)
        self._costs.stop(uid)
        self._admissions.forget(uid)
        self._stopping.pop(uid, None)
        self._forget_tokens(uid)
        self.work.forget(uid)
        if ref is not None:
            await self._delete_in_provider(ref, grace_period_seconds=0)

    async def _hand_volume_files(self, ref: PodRef, request: PodRequest) -> None:
        provider = cast(SupportsServiceAccountTokens, self._provider)
        async with self._metrics.time_provider_call("update_volume_files"):
            await provider.update_volume_files(ref, request.volume_files)

    def _forget_tokens(self, uid: str) -> None:
        self._tokenless.discard(uid)
        if self._tokens is not None:
            self._tokens.start_over(uid)

    async def _delete_in_provider(self, ref: PodRef, *, grace_period_seconds: float) -> None:
        async with self._metrics.time_provider_call("delete_pod"):
            await self._provider.delete_pod(ref, grace_period_seconds=grace_period_seconds)

    # -- start-up and garbage collection -------------------------------------------------------

    def _missing_from(self, states: Sequence[PodState]) -> set[str]:
        """The pods we hold a workload for, still meant to run, that the provider did not list."""
        listed = {state.ref.uid for state in states}
        missing = set()
        for uid in self.known.keys() - listed:
            pod = self._pods.objects.get(uid)
            if pod is None or pod["metadata"].get("deletionTimestamp"):
                continue
            if pod.get("status", {}).get("phase") not in ("Succeeded", "Failed"):
                missing.add(uid)
        return missing

    async def adopt(self) -> int:
        """After the pod cache is synced: take back what the provider already runs for existing pods."""
        adopted = 0
        async with self._metrics.time_provider_call("list_pods"):
            states = await self._provider.list_pods()
        for state in states:
            if state.ref.uid in self._pods.objects:
                self.known[state.ref.uid] = state.ref
                adopted += 1
        return adopted

    def _served(self, states: Sequence[PodState]) -> list[PodState]:
        """The workloads of the namespaces this node serves. Another namespace's pod is invisible to
        it (it watches its own namespaces only), so its workload, left from before the node was
        limited, is kept, not collected as an orphan: said once, for an operator to decide."""
        served = []
        for state in states:
            if self._settings.serves(state.ref.namespace):
                served.append(state)
            elif state.ref.uid not in self._unserved_reported:
                self._unserved_reported.add(state.ref.uid)
                logger.warning(
                    "keeping workload %s at the provider: this node serves only the namespaces %s, so it "
                    "cannot see whether its pod exists; serve %s again, or delete it at the provider",
                    state.ref,
                    ", ".join(self._settings.namespaces),
                    state.ref.namespace,
                )
        return served

    async def run_orphan_sweeps(self) -> None:
        """Delete provider workloads without a pod, but only once seen in two consecutive lists; and
        reconcile the pods the provider has lost (a plugin that restarted with its pods in memory,
        say), also once missing from two lists, since a push may never say they are gone."""
        await self._pods.synced.wait()
        suspects: set[str] = set()
        lost: set[str] = set()
        while True:
            try:
                async with self._metrics.time_provider_call("list_pods"):
                    states = await self._provider.list_pods()
            except Exception as error:
                logger.warning("listing the provider's pods failed (%s); orphan sweep skipped", error)
                states = []
                suspects, lost = set(), set()
            else:
                missing = self._missing_from(states)
                for uid in missing & lost:
                    logger.warning("the provider no longer lists pod %s; reconciling it", self.known[uid])
                    self.work.queue.add(uid)
                lost = missing - lost
                orphans = {
                    state.ref.uid: state.ref
                    for state in self._served(states)
                    if state.ref.uid not in self._pods.objects
                }
                for uid in orphans.keys() & suspects:
                    logger.info("deleting orphan workload %s: no pod exists for it", orphans[uid])
                    try:
                        await self._delete_in_provider(orphans[uid], grace_period_seconds=0)
                        self.known.pop(uid, None)
                    except Exception as error:
                        logger.warning("deleting orphan %s failed: %s", orphans[uid], error)
                suspects = set(orphans) - (orphans.keys() & suspects)
            await asyncio.sleep(self._settings.orphan_sweep_interval_seconds)
