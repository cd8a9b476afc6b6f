"""Leader election through a coordination.k8s.io Lease, so only one controller replica acts.

The rules are client-go's: a candidate takes the Lease when nobody holds it, or when its holder has
not renewed it for `lease_seconds` as measured on the candidate's own monotonic clock since it last
saw the record change (so clock skew between machines does not matter). Writes carry the
resourceVersion read, so two candidates cannot both win. The leader renews every `renew_seconds`;
if it has not renewed for its renew deadline (client-go's RenewDeadline, by default
`lease_seconds - renew_seconds`) it stops leading at once, before another replica can take over.
On a clean stop the leader releases the Lease, so its successor does not wait out the duration.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine, Mapping
from datetime import UTC, datetime
from typing import Any

import aiohttp

from vk_provider.kit.kube import KubeApi, KubeApiError, RawObject, resource_path
from vk_provider.kit.timestamps import format_micro_timestamp

logger = logging.getLogger(__name__)


class LeaderElector:
    def __init__(
        self,
        api: KubeApi,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_seconds: float = 15.0,
        renew_seconds: float = 5.0,
        retry_seconds: float = 2.0,
        renew_deadline_seconds: float | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        """`annotations` go on the Lease with every write of this replica's, so what it publishes there
        (its version) is the current leader's."""
        if not renew_seconds < lease_seconds:
            raise ValueError("the renew interval must be shorter than the lease duration")
        deadline = lease_seconds - renew_seconds if renew_deadline_seconds is None else renew_deadline_seconds
        if not 0 < deadline < lease_seconds:
            raise ValueError("the renew deadline must be shorter than the lease duration")
        self._api = api
        self._path = resource_path("coordination.k8s.io/v1", "leases", namespace=namespace, name=name)
        self._collection = resource_path("coordination.k8s.io/v1", "leases", namespace=namespace)
        self._name = name
        self._namespace = namespace
        self.identity = identity
        self._lease_seconds = lease_seconds
        self._renew_seconds = renew_seconds
        self._retry_seconds = retry_seconds
        self._renew_deadline_seconds = deadline
        self._monotonic = monotonic
        self._annotations = dict(annotations or {})
        self._observed: tuple[Any, Any] | None = None
        self._observed_at = 0.0
        self._held: RawObject | None = None
        """The Lease as this replica last wrote it while holding it: what the fast path renews."""
        self.leading = asyncio.Event()
        self.answered = asyncio.Event()
        """Set once the apiserver has answered an attempt (leading or not): a standby is running too."""

    def _spec(self, previous: RawObject | None) -> dict[str, Any]:
        now = format_micro_timestamp(datetime.now(UTC))
        old = (previous or {}).get("spec") or {}
        transitions = int(old.get("leaseTransitions") or 0)
        same_holder = old.get("holderIdentity") == self.identity
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self._lease_seconds)),
            "acquireTime": old.get("acquireTime") if same_holder else now,
            "renewTime": now,
            "leaseTransitions": transitions
            if same_holder or not old.get("holderIdentity")
            else transitions + 1,
        }

    def _written(self, lease: RawObject) -> RawObject:
        """`lease` as this replica writes it: its spec, and its annotations over the ones there."""
        metadata = dict(lease.get("metadata") or {})
        if self._annotations:
            metadata["annotations"] = {**(metadata.get("annotations") or {}), **self._annotations}
        return {**lease, "metadata": metadata, "spec": self._spec(lease)}

    async def _try_acquire_or_renew(self) -> bool:
        if self._held is not None:
            # As client-go's fast path: the leader renews the Lease it last wrote, one PUT and no GET
            # (the resourceVersion makes it fail if anyone else wrote since); on any refusal, the
            # slow path below reads the Lease again.
            try:
                self._held = await self._api.request("PUT", self._path, body=self._written(self._held))
                return True
            except KubeApiError as error:
                self._held = None
                if not (error.conflict or error.not_found):
                    raise
        try:
            current = await self._api.get(self._path)
        except KubeApiError as error:
            if not error.not_found:
                raise
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self._name, "namespace": self._namespace},
            }
            self._held = await self._api.create(self._collection, self._written(body))
            return True
        spec = current.get("spec") or {}
        record = (spec.get("holderIdentity"), spec.get("renewTime"))
        if record != self._observed:
            self._observed, self._observed_at = record, self._monotonic()
        holder = spec.get("holderIdentity")
        duration = float(spec.get("leaseDurationSeconds") or self._lease_seconds)
        expired = self._monotonic() - self._observed_at > duration
        if holder and holder != self.identity and not expired:
            return False
        self._held = await self._api.request("PUT", self._path, body=self._written(current))
        return True

    async def _attempt(self) -> bool:
        try:
            acquired = await self._try_acquire_or_renew()
            self.answered.set()
            return acquired
        except KubeApiError as error:
            if error.conflict:  # someone else wrote it first
                self.answered.set()
                return False
            if error.not_found:  # the Lease was absent, and creating it found no namespace either
                logger.error(
                    "leader election: the namespace %s of the Lease %s does not exist: create it, or "
                    "name another with --leader-election-namespace (%s)",
                    self._namespace,
                    self._name,
                    error.message,
                )
                return False
            logger.warning("leader election: %s", error)
            return False
        except (aiohttp.ClientError, OSError, TimeoutError) as error:
            logger.warning("leader election: cannot reach the apiserver: %s", error)
            return False

    async def _acquire(self) -> None:
        while True:
            if await self._attempt():
                return
            await asyncio.sleep(self._retry_seconds)  # polling the Lease is the protocol: no event to wait on

    async def run(self, lead: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Forever: wait to become leader, run `lead` while leading, cancel it when leadership is lost."""
        while True:
            await self._acquire()
            logger.info("leader election: %s leads %s/%s", self.identity, self._namespace, self._name)
            self.leading.set()
            leading = asyncio.create_task(lead(), name="leading")
            try:
                await self._keep_renewing(leading)
            finally:
                self.leading.clear()
                self._held = None
                await self._stop(leading)
            logger.warning("leader election: %s lost the lease; stopped leading", self.identity)

    @staticmethod
    async def _stop(leading: asyncio.Task[None]) -> None:
        """Cancel the leader's work and wait until it has stopped.

        Not `await leading` under suppress(CancelledError): that also swallowed a cancellation of
        `run` itself arriving meanwhile (a stop just as the Lease was lost), and the elector then
        campaigned on, never stopping.
        """
        if leading.done():
            return
        leading.cancel()
        try:
            await asyncio.wait({leading})
        except asyncio.CancelledError:
            await asyncio.wait({leading})  # stopped before we are
            raise
        if not leading.cancelled() and (error := leading.exception()) is not None:
            logger.error("leader election: the leader's work failed as it stopped: %r", error)

    async def _keep_renewing(self, leading: asyncio.Task[None]) -> None:
        renewed_at = self._monotonic()
        while True:
            done, _ = await asyncio.wait({leading}, timeout=self._renew_seconds)
            if done:
                leading.result()  # the leader's work ended: raise what ended it
                return
            # A renewal that hangs (a stalled apiserver) must not outlast the deadline it is racing.
            remaining = self._renew_deadline_seconds - (self._monotonic() - renewed_at)
            renewed = False
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(remaining, 0.1)):
                    renewed = await self._attempt()
            if renewed:
                renewed_at = self._monotonic()
            elif self._monotonic() - renewed_at > self._renew_deadline_seconds:
                return  # another replica may take over any moment now: stop first

    async def release(self) -> None:
        """Give the Lease up (on a clean stop), so the next leader need not wait for it to expire."""
        try:
            current = await self._api.get(self._path)
            if (current.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            self._held = None
            spec = {**current["spec"], "holderIdentity": None, "leaseDurationSeconds": 1}
            await self._api.request("PUT", self._path, body={**current, "spec": spec})
            logger.info("leader election: released %s/%s", self._namespace, self._name)
        except (KubeApiError, aiohttp.ClientError, OSError, TimeoutError) as error:
            logger.warning("leader election: could not release the lease: %s", error)
