"""Keep the Node object true: registered, heartbeating, and honest about the provider's health.

Three duties, one loop each:
- the Lease in kube-node-lease renewed every `lease_renew_interval_seconds` (the heartbeat the
  node-lifecycle controller reads); on each pass the Node is also checked and recreated if someone
  deleted it;
- node status patched every `node_status_interval_seconds`, and at once when health changes;
- the provider's health checked every `health_check_interval_seconds`. A failing provider is *not* a
  dead node: the lease keeps renewing (so nothing is evicted), but the node gets
  ProviderAvailable=False and a NoSchedule taint so no new pods land, both lifted on recovery.

The serving certificate's state (`kubelet.certificates.state`) is the ServingCertificate condition: the
status loop listens to it, patches the status at once on a change and records an Event (a Warning for
a self-signed fallback, a denied CSR, broken files, or clients refusing the certificate).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import UTC, datetime
from typing import Any

from vk_provider._kube.events import EventRecorder, InvolvedObject
from vk_provider.errors import CapabilityMissingError, ProviderError, ProviderUnavailableError
from vk_provider.kit.kube import MERGE_PATCH, KubeApi, KubeApiError, resource_path
from vk_provider.kit.timestamps import format_micro_timestamp
from vk_provider.kubelet.certificates import CertificateState, ServingCertificate
from vk_provider.node import nodeobject
from vk_provider.node.metrics import DaemonMetrics
from vk_provider.node.nodeobject import Health
from vk_provider.node.settings import NodeSettings
from vk_provider.provider import PodLifecycle, SupportsHealthNote, SupportsNodeCapacity

logger = logging.getLogger(__name__)

LEASE_NAMESPACE = "kube-node-lease"
HEALTH_CHECK_TIMEOUT_SECONDS = 10.0


class NodeKeeper:
    def __init__(
        self,
        api: KubeApi,
        settings: NodeSettings,
        provider: PodLifecycle,
        events: EventRecorder,
        *,
        metrics: DaemonMetrics,
        certificate: ServingCertificate | None = None,
    ) -> None:
        self._api = api
        self._certificate = certificate
        self._settings = settings
        self._provider = provider
        self._events = events
        self._metrics = metrics
        self._node_path = resource_path("v1", "nodes", name=settings.node_name)
        self._lease_path = resource_path(
            "coordination.k8s.io/v1", "leases", namespace=LEASE_NAMESPACE, name=settings.node_name
        )
        self.health = Health(ready=False)
        self.node_uid: str | None = None
        self._status_due = asyncio.Event()
        self._conditions: list[dict[str, Any]] = []
        self.lease_renewals = 0
        self.recreations = 0
        self._capacity: dict[str, str] = {}
        """The provider's capacity as it last said it."""

    async def _provider_capacity(self) -> dict[str, str]:
        """What the provider advertises; when it cannot say (its backend is down), what it said last,
        so a provider outage shows in ProviderAvailable, never as a node that stops reporting."""
        if not isinstance(self._provider, SupportsNodeCapacity):
            return {}
        try:
            self._capacity = dict(await self._provider.node_capacity())
        except CapabilityMissingError as error:  # a plugin that turns out not to offer it
            logger.debug("node %s: %s", self._settings.node_name, error)
        except Exception as error:  # a provider's bug must not stop the node's status either
            logger.warning(
                "node %s: the provider cannot say its capacity (%s); advertising what it said last",
                self._settings.node_name,
                error,
                exc_info=not isinstance(error, ProviderError),
            )
        return dict(self._capacity)

    def _involved(self) -> InvolvedObject:
        return InvolvedObject("Node", self._settings.node_name, "", self.node_uid or self._settings.node_name)

    async def register(self) -> None:
        """Create the Node, or re-apply our labels, taints and status to the one left by an earlier run."""
        now = datetime.now(UTC)
        capacity = await self._provider_capacity()
        try:
            current = await self._api.get(self._node_path)
        except KubeApiError as error:
            if not error.not_found:
                raise
            created = await self._api.create(
                resource_path("v1", "nodes"), nodeobject.new_node(self._settings, self.health, now, capacity)
            )
            self.node_uid = created["metadata"]["uid"]
            logger.info("registered node %s", self._settings.node_name)
        else:
            self.node_uid = current["metadata"]["uid"]
            self._take_over_conditions(current)
            await self._apply_metadata(current)
            logger.info(
                "node %s exists (Ready=%s); re-applied labels, taints, capacity and our address and port",
                self._settings.node_name,
                self.health.ready,
            )
        await self._patch_status(now)

    def _take_over_conditions(self, current: dict[str, Any]) -> None:
        """Carry a Ready node's health over from the daemon (or replica) that wrote it.

        Patching Ready=False for the second a takeover or restart takes would make the node lifecycle
        controller mark every pod of the node not Ready, and the router drop them all, for a blip their
        workloads never see: they keep running at the provider and are adopted at once. A node already
        NotReady or Unknown stays so until this daemon is ready.
        """
        conditions = list((current.get("status") or {}).get("conditions") or [])
        by_type = {condition.get("type"): condition for condition in conditions}
        ready = (by_type.get("Ready") or {}).get("status") == "True"
        provider = by_type.get(nodeobject.PROVIDER_AVAILABLE_CONDITION) or {}
        available = provider.get("status") != "False"
        if ready:
            self._conditions = conditions
            self.health = Health(
                ready=True,
                provider_available=available,
                provider_message="" if available else str(provider.get("message") or ""),
            )

    async def _apply_metadata(self, current: dict[str, Any]) -> None:
        """Labels and taints, keeping taints others own; resourceVersion guards against a lost update."""
        for _ in range(5):
            taints = nodeobject.merged_taints(
                current.get("spec", {}).get("taints") or [], self._settings, self.health
            )
            patch = {
                "metadata": {
                    "labels": nodeobject.labels(self._settings),
                    "resourceVersion": current["metadata"]["resourceVersion"],
                },
                "spec": {"taints": taints},
            }
            try:
                await self._api.patch(self._node_path, patch, content_type=MERGE_PATCH)
                return
            except KubeApiError as error:
                if not error.conflict:
                    raise
                current = await self._api.get(self._node_path)
        raise RuntimeError(f"node {self._settings.node_name} kept changing under us; taints not applied")

    async def _patch_status(self, now: datetime) -> None:
        status = nodeobject.status(
            self._settings,
            self.health,
            now,
            provider_capacity=await self._provider_capacity(),
            previous_conditions=self._conditions,
            certificate=None if self._certificate is None else self._certificate.state,
        )
        await self._api.patch(self._node_path + "/status", {"status": status})
        self._conditions = status["conditions"]

    def set_ready(self) -> None:
        self._set_health(Health(True, self.health.provider_available, self.health.provider_message))

    def _set_health(self, health: Health) -> None:
        self._metrics.set_provider_available(health.provider_available)
        if health != self.health:
            self.health = health
            self._status_due.set()

    async def _ensure_node(self) -> None:
        try:
            node = await self._api.get(self._node_path)
        except KubeApiError as error:
            if not error.not_found:
                raise
            logger.warning(
                "node %s was deleted while the daemon runs; registering it again", self._settings.node_name
            )
            self.recreations += 1
            await self.register()
            return
        if node["metadata"]["uid"] != self.node_uid:
            self.node_uid = node["metadata"]["uid"]

    async def _renew_lease(self) -> None:
        now = format_micro_timestamp(datetime.now(UTC))
        owner = [{"apiVersion": "v1", "kind": "Node", "name": self._settings.node_name, "uid": self.node_uid}]
        spec = {
            "holderIdentity": self._settings.node_name,
            "leaseDurationSeconds": self._settings.lease_duration_seconds,
            "renewTime": now,
        }
        try:
            await self._api.patch(
                self._lease_path,
                {"metadata": {"ownerReferences": owner}, "spec": spec},
                content_type=MERGE_PATCH,
            )
        except KubeApiError as error:
            if not error.not_found:
                raise
            body = {
                "metadata": {"name": self._settings.node_name, "ownerReferences": owner},
                "spec": {**spec, "acquireTime": now},
            }
            await self._api.create(
                resource_path("coordination.k8s.io/v1", "leases", namespace=LEASE_NAMESPACE), body
            )
        self.lease_renewals += 1

    async def run_heartbeat(self) -> None:
        """Lease renewal and the node-exists check; failures are logged and retried on the next beat."""
        while True:
            try:
                await self._ensure_node()
                await self._renew_lease()
            except (KubeApiError, OSError, TimeoutError) as error:
                logger.warning(
                    "heartbeat failed (%s); retrying in %ss",
                    error,
                    self._settings.lease_renew_interval_seconds,
                )
            await asyncio.sleep(self._settings.lease_renew_interval_seconds)

    def _certificate_changed(self, state: CertificateState) -> None:
        self._events.record(
            self._involved(),
            "Warning" if state.warning else "Normal",
            f"ServingCertificate{state.reason}",
            state.message,
        )
        self._status_due.set()

    async def run_status(self) -> None:
        """Node status at least every interval, and at once when health or the certificate changes."""
        certificate = self._certificate
        if certificate is None:
            await self._run_status()
            return
        # Subscribed for this term of leadership only: a later leader's keeper subscribes anew.
        certificate.subscribe(self._certificate_changed)
        try:
            if certificate.state.warning:  # what went wrong before this node ran must be heard too
                self._certificate_changed(certificate.state)
            await self._run_status()
        finally:
            certificate.unsubscribe(self._certificate_changed)

    async def _run_status(self) -> None:
        while True:
            self._status_due.clear()
            try:
                await self._ensure_taints()
                await self._patch_status(datetime.now(UTC))
            except (KubeApiError, OSError, TimeoutError) as error:
                logger.warning("node status update failed (%s)", error)
                self._status_due.set()
                await asyncio.sleep(1.0)
                continue
            # asyncio.timeout, not wait_for: on Python 3.11, wait_for loses a cancellation that comes as
            # the awaited event is set, and the status loop then outlived the daemon's stop (a CI run
            # saw a node ignore SIGTERM for 30 s while pods were being deleted).
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._settings.node_status_interval_seconds):
                    await self._status_due.wait()

    async def _ensure_taints(self) -> None:
        current = await self._api.get(self._node_path)
        taints = current.get("spec", {}).get("taints") or []
        wanted = nodeobject.merged_taints(taints, self._settings, self.health)
        if sorted(map(str, taints)) != sorted(map(str, wanted)):
            await self._apply_metadata(current)

    async def run_health_checks(self) -> None:
        while True:
            await self.check_health_once()
            await asyncio.sleep(self._settings.health_check_interval_seconds)

    async def check_health_once(self) -> None:
        """Ask the provider once; ProviderAvailable, its reason and the node's Events follow."""
        try:
            async with (
                self._metrics.time_provider_call("check_health"),
                asyncio.timeout(HEALTH_CHECK_TIMEOUT_SECONDS),  # not wait_for: see run_status
            ):
                await self._provider.check_health()
        except Exception as error:
            if not isinstance(error, ProviderError | TimeoutError | OSError):
                logger.exception("the provider's health check raised an unexpected error")
            message = str(error) or type(error).__name__
            # A provider may say why (InsufficientBalance, QuotaExceeded): the condition's reason,
            # and the Warning's, posted again when the reason changes.
            reason = error.reason if isinstance(error, ProviderUnavailableError) else ""
            if self.health.provider_available or reason != self.health.provider_reason:
                self._events.record(self._involved(), "Warning", reason or "ProviderUnavailable", message)
            self._set_health(
                Health(
                    self.health.ready,
                    provider_available=False,
                    provider_message=message,
                    provider_reason=reason,
                )
            )
        else:
            if not self.health.provider_available:
                self._events.record(self._involved(), "Normal", "ProviderAvailable", "the provider recovered")
            note = self._provider.health_note() if isinstance(self._provider, SupportsHealthNote) else ""
            self._set_health(Health(self.health.ready, provider_available=True, provider_message=note))
