"""SageMaker real-time endpoints for the pods of a virtual node: create, watch, delete, list.

boto3 blocks, so every call runs on the provider's own bounded thread pool (`max_concurrent_calls`
threads, shut down by `aclose`), through `loop.run_in_executor`, and under one `ResilientCaller`
(a timeout on every attempt, retries with backoff on throttling, 5xx and connection failures, the
provider's circuit breaker); see `api` for how SageMaker's error codes are classed.

Idempotence: a pod UID maps to one name for its endpoint and its first model and endpoint configuration
(`translate.resource_name`); an update's are named by their content (`versions`). Creating looks first
and makes only what is missing, in order (model, then endpoint configuration, then endpoint), so a create
cut short at any step (a crash, a lost answer) resumes where it stopped; a create that finds its resource
already made ("Cannot create already existing ...") counts as done. A pod SageMaker refuses for good
leaves nothing behind.

Deletion removes the endpoint, then its configurations, then its models (every version, found by name
and tag: `pod_versions`); each one already gone is fine.
SageMaker refuses to delete an endpoint that is Creating or Updating ("Cannot update in-progress
endpoint"), and removing the model under an endpoint being created leaves it stuck in Creating for up
to an hour; so such a deletion is recorded, reported as requested, and carried out by a background
task as soon as SageMaker allows it (checked every `deletion_poll_seconds`). After a restart the node
asks again (the pod is still terminating, or its workload is an orphan), so nothing is lost.

Updates: `update_pod` compares what the endpoint serves (its configuration's instance type and count,
its model's image and environment) with the pod, makes what differs as a new version and calls
UpdateEndpoint. What the provider made or saw an endpoint serve is remembered, so a pod whose change does
not matter to SageMaker costs no call. The background task that carries out deferred deletions also
follows updates: once the endpoint is out of Updating it notes the outcome (on success, the endpoint's
image tag is rewritten, as pod states read it) and removes the versions the endpoint no longer uses. An
update in progress when the daemon stops is not followed after a restart: its superseded versions stay
until the pod's next update or its deletion.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import functools
import logging
import re
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from vk_provider.errors import (
    CapacityUnavailableError,
    InvalidPodError,
    NotFoundError,
    ProviderError,
    ProviderRefusesWorkError,
    ProviderUnavailableError,
    TemporaryProviderError,
)
from vk_provider.kit.resilience import (
    AccountError,
    ApiStatusError,
    BreakerStatus,
    ResilientCaller,
)
from vk_provider.kit.resilience.health import probe_health
from vk_provider.kit.signing import RequestSigner
from vk_provider.provider import PodRef, PodRequest, PodState, PricedPod, ProviderContext
from vk_providers.sagemaker.api import (
    CAPACITY_CODE,
    CONFLICT_CODES,
    INSUFFICIENT_CAPACITY_CODE,
    SageMakerApi,
)
from vk_providers.sagemaker.config import SageMakerSettings, parse_settings
from vk_providers.sagemaker.pod_versions import PodVersions
from vk_providers.sagemaker.prices import endpoint_price
from vk_providers.sagemaker.quota_holds import QUOTA_REASON, QuotaHolds
from vk_providers.sagemaker.redaction import REDACTOR, install_log_filter
from vk_providers.sagemaker.session import make_client, make_session
from vk_providers.sagemaker.shortages import Shortage, Shortages, is_capacity_failure
from vk_providers.sagemaker.translate import (
    IN_PROGRESS,
    MAX_TAG_VALUE,
    TAG_IMAGE,
    Deployment,
    Endpoint,
    Owner,
    deployment_for,
    endpoint_state,
    instance_types_of,
    invocation_url,
    owner_from_tags,
    resource_name,
    runtime_base_url,
    short_of_capacity_state,
    traffic_auth_marker,
)
from vk_providers.sagemaker.versions import Current, Serving, next_version, serving_of, version_name

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

logger = logging.getLogger(__name__)

T = TypeVar("T")
P = ParamSpec("P")

DELETING_RETRY_SECONDS = 15.0
"""How long the node waits before creating again a pod whose old endpoint SageMaker is still deleting."""
BUSY_RETRY_SECONDS = 30.0
"""How long the node waits before applying a change to an endpoint SageMaker is creating or updating."""
CAPACITY_EVENT_REASON = "NoCapacity"
"""The pod Event telling which instance type SageMaker had no capacity or quota for, and what is next."""
_ZERO_QUOTA = re.compile(r"\bis 0 Instances\b", re.IGNORECASE)
"""How ResourceLimitExceeded says the quota itself is 0 ("The account-level service limit 'ml.g5.xlarge
for endpoint usage' is 0 Instances, ..."): no wait frees it, someone must ask AWS to raise it."""


@dataclasses.dataclass(frozen=True, slots=True)
class PendingUpdate:
    """An UpdateEndpoint SageMaker is carrying out, until the background task sees how it ended."""

    ref: PodRef
    config_name: str
    serving: Serving


def _map_status(capacity_retry_seconds: float) -> Callable[[ApiStatusError, str], ProviderError]:
    """The contract error for a refusal SageMaker will not take back on a retry within the call."""

    def mapped(error: ApiStatusError, context: str) -> ProviderError:
        message = f"{context}: {error.reason}: {error.detail}"
        if error.reason == CAPACITY_CODE and _ZERO_QUOTA.search(error.detail):
            return ProviderRefusesWorkError(
                f"{message} (a service quota of 0: ask AWS to raise it)",
                reason=QUOTA_REASON,
                retry_after_seconds=capacity_retry_seconds,
            )
        if error.reason in (CAPACITY_CODE, INSUFFICIENT_CAPACITY_CODE):
            # Used up or not to be had now: another instance type may have some, and this one may free up.
            return CapacityUnavailableError(
                f"{message} (a quota or capacity limit; trying again later)",
                retry_after_seconds=capacity_retry_seconds,
            )
        if error.reason in CONFLICT_CODES:
            return TemporaryProviderError(message, retry_after_seconds=error.retry_after_seconds)
        if error.status in (401, 402, 403):
            return AccountError(message)
        if error.status == 404:
            return NotFoundError(message)
        return InvalidPodError(message)

    return mapped


class SageMakerProvider:
    def __init__(
        self,
        context: ProviderContext,
        *,
        settings: SageMakerSettings | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        client_hook: Callable[[SageMakerClient], None] | None = None,
    ) -> None:
        """`sleep` and `clock` are for tests (retry waits, breaker time); so is `client_hook`, called with
        the boto3 client once it is made (tests register botocore event handlers on it).

        Raises ValueError when the settings are wrong, the credentials file cannot be read, or no
        region is known. The standard credential chain is resolved on the first call, off the loop.
        """
        self.node_name = context.node_name
        self._settings = settings if settings is not None else parse_settings(context.config)
        self._session = make_session(self._settings, on_values=REDACTOR.remember)
        self.region = self._session.region_name or ""  # make_session insists on one
        self._runtime_url = runtime_base_url(self._settings, self.region)
        self._client_hook = client_hook
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=self._settings.max_concurrent_calls, thread_name_prefix="sagemaker"
        )
        self._api = SageMakerApi(self._make_client, redact=REDACTOR.redact)
        self.breaker = self._settings.calls.breaker("SageMaker", clock)
        self._caller = ResilientCaller(
            "SageMaker",
            policy=self._settings.calls.call_policy(),
            breaker=self.breaker,
            sleep=sleep,
            redact=REDACTOR.redact,
            map_status=_map_status(self._settings.capacity_retry_seconds),
        )
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self._owners: dict[str, tuple[datetime | None, Owner | None]] = {}
        """Endpoint name -> (its creation time when its tags were read, whose it is: None if not ours)."""
        self._deferred: dict[str, PodRef] = {}
        """Endpoint name -> the pod whose deletion waits for SageMaker to allow it."""
        self._updates: dict[str, PendingUpdate] = {}
        """Endpoint name -> the update SageMaker is carrying out."""
        self._serving: dict[str, Serving] = {}
        """Endpoint name -> what it serves, as this provider made or updated it: an update_pod asking for
        the same costs no call. Not known after a restart (then the endpoint is described)."""
        self._versions = PodVersions(self._api, self._call, role_arn=self._settings.role_arn)
        self._quotas = QuotaHolds(clock=clock, first_wait_seconds=self._settings.capacity_retry_seconds)
        self._shortages = Shortages(clock=clock, retry_seconds=self._settings.capacity_retry_seconds)
        self._replacing: dict[str, str] = {}
        """Endpoint name -> the instance type it failed for want of, while it is removed to be replaced."""
        self._pod_events = context.pod_events
        self._background: asyncio.Task[None] | None = None
        """Carries out deferred deletions and follows updates (`_follow_up`); runs while there are any."""
        self._closed = False

    def __repr__(self) -> str:
        return f"SageMakerProvider(node={self.node_name!r}, region={self.region!r})"

    @property
    def settings(self) -> SageMakerSettings:
        return self._settings

    def breaker_status(self) -> BreakerStatus:
        """The circuit breaker's state: what the health check reports as ProviderAvailable."""
        return self.breaker.status()

    def resource_name(self, ref: PodRef) -> str:
        """The name of the pod's model, endpoint configuration and endpoint."""
        return resource_name(self._settings.name_prefix, ref.uid)

    def traffic_address(self, ref: PodRef) -> str:
        return invocation_url(self._runtime_url, self.resource_name(ref))

    async def request_signer(self) -> RequestSigner:
        """A SigV4 signer for the endpoints' traffic, with the provider's credentials (resolved off loop)."""

        def resolve() -> RequestSigner:
            self._api.client()  # resolves the credentials once, as for the calls
            credentials = self._session.get_credentials()
            if credentials is None:
                raise ProviderUnavailableError("SageMaker: no AWS credentials to sign requests with")
            frozen = credentials.get_frozen_credentials()
            REDACTOR.remember((frozen.access_key, frozen.secret_key, frozen.token))
            return RequestSigner(credentials, self.region)

        return await self._run(resolve)

    # -- PodLifecycle --------------------------------------------------------------------------

    async def create_pod(self, pod: PodRequest) -> None:
        """Model, configuration, endpoint; on the pod's next instance type when SageMaker has no capacity
        or quota for one (each told in a pod Event). Nothing is sent for a type whose quota is 0
        (`quota_holds`) or whose endpoint for this pod just failed for want of capacity (`shortages`)."""
        deployment = deployment_for(pod, self._settings, self.node_name)
        name = deployment.name
        async with self._lock(name):
            endpoint = await self._call("describe_endpoint", self._api.describe_endpoint, name)
            if endpoint is not None:
                await self._existing(pod.ref, endpoint)
                return
            self._deferred.pop(name, None)
            self._replacing.pop(name, None)
            instance_types = instance_types_of(pod.annotations, self._settings)
            opened, held = self._quotas.open(instance_types)
            try:
                created = await self._create_parts(pod, deployment, instance_types, opened, held)
            except InvalidPodError:
                await self._discard_parts(pod.ref, name)
                raise
            finally:
                self._quotas.released(opened)
            self._remember_owner(name, created)
            self._serving[name] = serving_of(created)
            logger.info(
                "pod %s: SageMaker endpoint %s (%d x %s)",
                pod.ref,
                name,
                created.instance_count,
                created.instance_type,
            )

    async def _create_parts(
        self,
        pod: PodRequest,
        deployment: Deployment,
        instance_types: Sequence[str],
        opened: Sequence[str],
        held: Sequence[tuple[str, ProviderRefusesWorkError]],
    ) -> Deployment:
        """What is missing of the first candidate SageMaker takes; the deployment made.

        The candidates are the pod's instance types whose quota is not held (`opened`) and that are not
        short of capacity for this pod; the pod's Events say which it leaves behind for which."""
        name = deployment.name
        short = self._shortages.short(name, instance_types)
        short_types = {shortage.instance_type for shortage in short}
        candidates = [
            self._on_instance_type(deployment, kind, index)
            for index, kind in enumerate(instance_types)
            if kind in opened and kind not in short_types
        ]
        refusals: list[ProviderError] = [error for _, error in held]
        if not candidates:
            raise self._nothing_to_try(refusals, short)
        self._tell_skipped(pod.ref, deployment, held, short, candidates[0])
        if not await self._call("describe_model", self._api.model_exists, name):
            await self._call("create_model", self._api.create_model, deployment, self._settings.role_arn)
        for index, candidate in enumerate(candidates):
            try:
                if not await self._call(
                    "describe_endpoint_config", self._api.endpoint_config_exists, candidate.config_name
                ):
                    await self._call("create_endpoint_config", self._api.create_endpoint_config, candidate)
                await self._call("create_endpoint", self._api.create_endpoint, candidate)
            except (CapacityUnavailableError, ProviderRefusesWorkError) as error:
                if isinstance(error, ProviderRefusesWorkError):  # a quota of 0: this type is held
                    error = self._quotas.refused(candidate.instance_type, str(error))
                refusals.append(error)
                following = candidates[index + 1] if index + 1 < len(candidates) else None
                self._tell_refusal(pod.ref, candidate, error, following)
                continue
            self._quotas.accepted(candidate.instance_type)
            return candidate
        raise self._nothing_to_try(refusals, [])

    def _nothing_to_try(self, refusals: Sequence[ProviderError], short: Sequence[Shortage]) -> ProviderError:
        """Every instance type of the pod refused or held: the provider's refusal of all work when every
        type asked for has a quota of 0 (the node's ProviderAvailable=False), else a wait for this pod
        until the first of its types may be tried again."""
        whole = self._quotas.health_error()
        if whole is not None:
            return whole
        reasons = [str(error) for error in refusals] + [
            f"instance type {shortage.instance_type} had no capacity for this pod's endpoint "
            f"({shortage.failure_reason})"
            for shortage in short
        ]
        waits = [
            error.retry_after_seconds
            for error in refusals
            if isinstance(error, TemporaryProviderError | ProviderRefusesWorkError)
            and error.retry_after_seconds is not None
        ]
        if short:
            waits.append(self._shortages.seconds_until_one_frees(short))
        return CapacityUnavailableError(
            "; ".join(reasons),
            retry_after_seconds=min(waits, default=self._settings.capacity_retry_seconds) or None,
        )

    def _on_instance_type(self, deployment: Deployment, instance_type: str, index: int) -> Deployment:
        """The deployment on one of the pod's instance types: the first keeps the pod's own configuration
        name; each other one has a configuration version of its own (`versions`), which the pod's
        deletion finds and removes like any other version."""
        if index == 0:
            return deployment
        placed = dataclasses.replace(deployment, instance_type=instance_type)
        return dataclasses.replace(
            placed,
            config_name=version_name(
                deployment.name,
                {
                    "model": placed.model_name,
                    "instance_type": instance_type,
                    "instance_count": placed.instance_count,
                    "startup_timeout_seconds": placed.startup_timeout_seconds,
                },
            ),
        )

    def _tell_refusal(
        self, ref: PodRef, refused: Deployment, error: ProviderError, following: Deployment | None
    ) -> None:
        why = "a quota of 0" if isinstance(error, ProviderRefusesWorkError) else "no capacity or quota left"
        self._tell(
            ref, f"SageMaker has {why} for {refused.instance_count} x {refused.instance_type}", following
        )

    def _tell_skipped(
        self,
        ref: PodRef,
        deployment: Deployment,
        held: Sequence[tuple[str, ProviderRefusesWorkError]],
        short: Sequence[Shortage],
        following: Deployment,
    ) -> None:
        """Tell the types the pod leaves without asking SageMaker: a late capacity failure once, a held
        quota at each create it skips (rare: a pod is created once)."""
        count = deployment.instance_count
        for instance_type, error in held:
            self._tell(
                ref,
                f"SageMaker has a quota of 0 for {count} x {instance_type} (not asked again for "
                f"{error.retry_after_seconds:.0f}s)",
                following,
            )
        for shortage in short:
            if not shortage.told:
                shortage.told = True
                self._tell(
                    ref,
                    f"SageMaker had no capacity for {count} x {shortage.instance_type} (its endpoint "
                    f"failed: {shortage.failure_reason})",
                    following,
                )

    def _tell(self, ref: PodRef, what: str, following: Deployment | None) -> None:
        then = f"; trying {following.instance_type}" if following else ", the pod's last instance type"
        self._pod_events.record(ref, "Warning", CAPACITY_EVENT_REASON, what + then)

    async def _existing(self, ref: PodRef, endpoint: Endpoint) -> None:
        """create_pod for a pod whose endpoint exists: nothing to do, unless it is on its way out."""
        if endpoint.status == "Deleting":
            raise TemporaryProviderError(
                f"SageMaker is still deleting endpoint {endpoint.name}; "
                "the pod is created again once it is gone",
                retry_after_seconds=DELETING_RETRY_SECONDS,
            )
        owner = await self._owner(endpoint)
        if owner is None or owner.ref.uid != ref.uid:
            raise InvalidPodError(
                f"SageMaker endpoint {endpoint.name} exists and was not made for pod {ref} (its tags say "
                f"{owner.ref if owner else 'nothing'}); delete it or choose another name_prefix"
            )
        if endpoint.name in self._deferred:
            raise TemporaryProviderError(
                f"endpoint {endpoint.name} is being deleted once SageMaker allows it; the pod is created "
                "again after that",
                retry_after_seconds=self._settings.deletion_poll_seconds,
            )

    async def _discard_parts(self, ref: PodRef, name: str) -> None:
        """After a permanent refusal: remove the endpoint configuration and model made for nothing."""
        for operation, delete in (
            ("delete_endpoint_config", self._api.delete_endpoint_config),
            ("delete_model", self._api.delete_model),
        ):
            try:
                await self._call(operation, delete, name)
            except ProviderError as error:
                logger.warning("pod %s: could not remove %s after SageMaker refused it: %s", ref, name, error)

    async def update_pod(self, pod: PodRequest) -> None:
        """Move the endpoint onto a new version when the image, environment or instance type or count
        changed (see the module); anything else about the pod is not SageMaker's business."""
        deployment = deployment_for(pod, self._settings, self.node_name)
        wanted = serving_of(deployment)
        name = deployment.name
        if self._serving.get(name) == wanted:
            return
        async with self._lock(name):
            endpoint = await self._call("describe_endpoint", self._api.describe_endpoint, name)
            if endpoint is None or endpoint.status == "Deleting" or name in self._deferred:
                return  # gone or going: a pod created again is created as it is now
            owner = await self._owner(endpoint)
            if owner is None or owner.ref.uid != pod.ref.uid:
                return  # not this pod's (get_pod_state does not report it either)
            if endpoint.status in IN_PROGRESS:
                raise TemporaryProviderError(
                    f"SageMaker endpoint {name} is {endpoint.status}; the pod's change is applied once it "
                    "is InService again",
                    retry_after_seconds=BUSY_RETRY_SECONDS,
                )
            if name in self._updates:  # ended, not yet seen by the background task
                await self._settled(self._updates[name], endpoint)
                del self._updates[name]
            if endpoint.status == "Failed":
                logger.warning("pod %s changed, but its endpoint %s has failed: not updated", pod.ref, name)
                return
            current = await self._versions.current(endpoint)
            if current is not None and current.serving.instance_type in instance_types_of(
                pod.annotations, self._settings
            ):
                # Created on another of the pod's instance types (the first had no capacity): it stays.
                deployment = dataclasses.replace(deployment, instance_type=current.serving.instance_type)
                wanted = serving_of(deployment)
            version = next_version(deployment, current, role_arn=self._settings.role_arn)
            unchanged = current is not None and current.serving == wanted
            # Or the version it would move onto is the one it serves, whose model or configuration could
            # not be read: SageMaker refuses an update onto the configuration an endpoint already has.
            if unchanged or version.config_name == endpoint.config_name:
                self._serving[name] = wanted
                return
            await self._start_update(pod.ref, version, current)

    async def _start_update(self, ref: PodRef, version: Deployment, current: Current | None) -> None:
        """Make the new version and move the endpoint onto it; `_settle` sees how that ends."""
        name = version.name
        await self._versions.make(version, current)
        try:
            accepted = await self._call(
                "update_endpoint", self._api.update_endpoint, name, version.config_name
            )
        except InvalidPodError:
            await self._versions.discard(version, current)
            raise
        if not accepted:
            raise TemporaryProviderError(
                f"SageMaker endpoint {name} is busy (creating or updating); the pod's change is applied "
                "once it is InService again",
                retry_after_seconds=BUSY_RETRY_SECONDS,
            )
        self._serving.pop(name, None)
        self._updates[name] = PendingUpdate(ref, version.config_name, serving_of(version))
        self._start_background()
        logger.info(
            "pod %s: updating SageMaker endpoint %s to configuration %s (model %s, %s; %d x %s)",
            ref,
            name,
            version.config_name,
            version.model_name,
            version.image,
            version.instance_count,
            version.instance_type,
        )

    async def delete_pod(self, ref: PodRef, *, grace_period_seconds: float) -> None:
        """Delete at once (SageMaker has no graceful stop: the grace period is not used); see the module."""
        name = self.resource_name(ref)
        async with self._lock(name):
            self._updates.pop(name, None)  # whatever became of it, every version goes
            endpoint = await self._call("describe_endpoint", self._api.describe_endpoint, name)
            if endpoint is not None and endpoint.status in IN_PROGRESS:
                self._defer(ref, name, endpoint.status)
                return
            if endpoint is not None and endpoint.status != "Deleting":
                outcome = await self._call("delete_endpoint", self._api.delete_endpoint, name)
                if outcome.in_progress:
                    self._defer(ref, name, "in progress")
                    return
                if outcome.deleted:
                    logger.info("pod %s: deleting SageMaker endpoint %s", ref, name)
            await self._versions.delete_all(ref, name)
            self._deferred.pop(name, None)
            self._owners.pop(name, None)
            self._serving.pop(name, None)
            self._replacing.pop(name, None)
            self._shortages.forget(name)

    def _defer(self, ref: PodRef, name: str, status: str) -> None:
        if name not in self._deferred:
            logger.info(
                "pod %s: SageMaker endpoint %s is %s and cannot be deleted yet; deleting it once it can",
                ref,
                name,
                status,
            )
        self._deferred[name] = ref
        self._start_background()

    def _start_background(self) -> None:
        if not self._closed and (self._background is None or self._background.done()):
            self._background = asyncio.create_task(
                self._follow_up(), name=f"sagemaker deletions and updates ({self.node_name})"
            )

    async def _follow_up(self) -> None:
        """Carry out deferred deletions as SageMaker allows them, and settle updates as they end.

        Checks every `deletion_poll_seconds`; ends when nothing is left to follow.
        """
        while self._deferred or self._updates:
            await asyncio.sleep(self._settings.deletion_poll_seconds)
            for ref in list(self._deferred.values()):
                try:
                    await self.delete_pod(ref, grace_period_seconds=0)
                except ProviderError as error:
                    logger.info("pod %s: deferred deletion not done yet: %s", ref, error)
                except Exception:
                    logger.exception("pod %s: deferred deletion failed unexpectedly", ref)
            for name, update in list(self._updates.items()):
                try:
                    await self._settle(name)
                except ProviderError as error:
                    logger.info("pod %s: following the update of %s: %s", update.ref, name, error)
                except Exception:
                    logger.exception(
                        "pod %s: following the update of %s failed unexpectedly", update.ref, name
                    )

    async def _settle(self, name: str) -> None:
        """Once SageMaker has finished the endpoint's update: see `_settled`."""
        async with self._lock(name):
            if name not in self._updates:
                return
            endpoint = await self._call("describe_endpoint", self._api.describe_endpoint, name)
            if endpoint is None or endpoint.status == "Deleting" or name in self._deferred:
                del self._updates[name]  # the pod's deletion removes every version
            elif endpoint.status not in IN_PROGRESS:
                await self._settled(self._updates[name], endpoint)
                del self._updates[name]  # only now: a failed prune is tried again

    async def _settled(self, update: PendingUpdate, endpoint: Endpoint) -> None:
        """Record how an update ended, and remove the versions the endpoint no longer uses."""
        name = endpoint.name
        if endpoint.status == "InService" and endpoint.config_name == update.config_name:
            await self._retag(endpoint, update.serving.image)
            self._serving[name] = update.serving
            logger.info("pod %s: SageMaker endpoint %s now serves %s", update.ref, name, update.config_name)
        else:
            # Rolled back (InService on the old configuration, with a FailureReason the pod's message
            # shows) or failed: the node tries again only when the pod changes again.
            logger.warning(
                "pod %s: SageMaker did not update endpoint %s to %s (%s): %s",
                update.ref,
                name,
                update.config_name,
                endpoint.status,
                endpoint.failure_reason or "no reason given",
            )
        if endpoint.config_name is not None:
            await self._versions.prune(update.ref, name, config_in_use=endpoint.config_name)

    async def _retag(self, endpoint: Endpoint, image: str) -> None:
        """Tag the endpoint with the image it now serves: pod states (and a restarted node) read it there."""
        value = image if len(image) <= MAX_TAG_VALUE else ""  # too long for a tag: say nothing
        await self._call("add_tags", self._api.tag, endpoint.arn, [(TAG_IMAGE, value)])
        owner = await self._owner(endpoint)
        if owner is not None:
            self._owners[endpoint.name] = (endpoint.creation_time, dataclasses.replace(owner, image=value))

    async def get_pod_state(self, ref: PodRef) -> PodState | None:
        name = self.resource_name(ref)
        endpoint = await self._call("describe_endpoint", self._api.describe_endpoint, name)
        if endpoint is None:
            return None
        owner = await self._owner(endpoint)
        if owner is None or owner.ref.uid != ref.uid:
            return None  # not ours: a name clash create_pod reports
        return await self._pod_state(ref, endpoint, owner)

    async def list_pods(self) -> Sequence[PodState]:
        """This node's endpoints, but not those being deleted (nothing is left to do for them)."""
        prefix = f"{self._settings.name_prefix}-"
        endpoints = [
            endpoint
            for endpoint in await self._call("list_endpoints", self._api.list_endpoints, prefix)
            if endpoint.name.startswith(prefix)
            and endpoint.status != "Deleting"
            and endpoint.name not in self._deferred
        ]
        owners = await asyncio.gather(*(self._owner(endpoint) for endpoint in endpoints))
        states = []
        for endpoint, owner in zip(endpoints, owners, strict=True):
            if owner is None or owner.node_name != self.node_name:
                continue
            described = None
            if endpoint.status == "Failed":  # the listing carries no FailureReason
                described = await self._call("describe_endpoint", self._api.describe_endpoint, endpoint.name)
            states.append(await self._pod_state(owner.ref, described or endpoint, owner))
        return states

    async def check_health(self) -> None:
        """Unavailable while the breaker is open, or when AWS refuses the credentials.

        One failed probe does not make the provider unavailable (`vk_provider.kit.resilience.health`).
        While the account's quota is 0 for every instance type the pods asked for, unavailable with the
        reason QuotaExceeded, until a create may try one again (`quota_holds`).
        """
        refusal = self._quotas.health_error()
        if refusal is not None:
            raise refusal
        await probe_health(
            self._caller,
            self.breaker,
            functools.partial(self._run, self._api.probe),
            provider="SageMaker",
            timeout_seconds=self._settings.calls.health_probe_timeout_seconds,
        )

    async def aclose(self) -> None:
        """Stop the background task (deferred deletions, updates followed) and the thread pool; endpoints
        keep running."""
        self._closed = True
        if self._background is not None:
            self._background.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._background
        if self._deferred:
            logger.info(
                "closing with %d deferred SageMaker deletion(s); the node asks again after a restart",
                len(self._deferred),
            )
        self._executor.shutdown(wait=False, cancel_futures=True)
        await asyncio.get_running_loop().run_in_executor(None, self._api.close)

    # -- SupportsPodPrice ----------------------------------------------------------------------

    def pod_price_per_hour(self, pod: PricedPod) -> float | None:
        return endpoint_price(pod, self._settings, self.region)

    # -- SupportsNodeCapacity ------------------------------------------------------------------

    async def node_capacity(self) -> Mapping[str, str]:
        return self._settings.capacity

    # -- calls ---------------------------------------------------------------------------------

    def _make_client(self) -> SageMakerClient:
        """Runs on a pool thread, at the first call: the credential chain may call the network."""
        client = make_client(self._session, self._settings)
        credentials = self._session.get_credentials()
        if credentials is not None:
            frozen = credentials.get_frozen_credentials()
            REDACTOR.remember((frozen.access_key, frozen.secret_key, frozen.token))
        install_log_filter()
        if self._client_hook is not None:
            self._client_hook(client)
        return client

    async def _run(self, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`function` on the provider's thread pool."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(function, *args, **kwargs))

    async def _call(self, operation: str, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """One SageMaker operation on the pool, under the resilience rules."""

        async def attempt() -> T:
            return await self._run(function, *args, **kwargs)

        return await self._caller.call(operation, attempt)

    def _lock(self, name: str) -> asyncio.Lock:
        lock = self._locks.get(name)
        if lock is None:
            lock = asyncio.Lock()
            self._locks[name] = lock
        return lock

    # -- whose endpoints are --------------------------------------------------------------------

    def _remember_owner(self, name: str, deployment: Deployment) -> None:
        """What create_pod tagged the endpoint with, until a describe gives its creation time."""
        owner = owner_from_tags(dict(deployment.tags))
        if owner is not None:
            self._owners[name] = (None, owner)

    async def _owner(self, endpoint: Endpoint) -> Owner | None:
        """Whose the endpoint is, from its tags, read once per endpoint (a new one has a new creation time)"""
        cached = self._owners.get(endpoint.name)
        if cached is not None:
            created, known = cached
            if created is None or created == endpoint.creation_time:
                self._owners[endpoint.name] = (endpoint.creation_time, known)
                return known
        tags = await self._call("list_tags", self._api.tags, endpoint.arn)
        if tags is None:
            return None  # gone in between
        owner = owner_from_tags(tags)
        self._owners[endpoint.name] = (endpoint.creation_time, owner)
        return owner

    async def _pod_state(self, ref: PodRef, endpoint: Endpoint, owner: Owner) -> PodState:
        """The endpoint's pod state; an endpoint Failed for want of capacity is removed so that the pod is
        created again (`shortages`), and the pod is Pending meanwhile, not Failed."""
        if endpoint.status == "Failed" and is_capacity_failure(endpoint.failure_reason):
            await self._replace_short(ref, endpoint)
        instance_type = self._replacing.get(endpoint.name)
        if (
            instance_type is None
            and endpoint.status == "Deleting"
            and is_capacity_failure(endpoint.failure_reason)
        ):
            instance_type = ""  # replaced before a restart: which type, it no longer knows
        if instance_type is not None:
            return short_of_capacity_state(ref, endpoint, owner, instance_type)
        return self._state(ref, endpoint, owner)

    async def _replace_short(self, ref: PodRef, endpoint: Endpoint) -> None:
        """Remember the type the endpoint had no capacity for, and delete the endpoint (a Failed one may
        be deleted at once); once it is gone the node creates the pod again, on its next type."""
        name = endpoint.name
        async with self._lock(name):
            if name in self._replacing:
                return  # another call got here first
            config = None
            if endpoint.config_name is not None:
                config = await self._call(
                    "describe_endpoint_config", self._api.describe_endpoint_config, endpoint.config_name
                )
            instance_type = config.instance_type if config is not None else ""
            if instance_type:
                self._shortages.record(name, instance_type, endpoint.failure_reason or "")
            await self._call("delete_endpoint", self._api.delete_endpoint, name)
            self._replacing[name] = instance_type
            self._serving.pop(name, None)
            logger.warning(
                "pod %s: SageMaker endpoint %s failed for want of %s capacity (%s); deleted, to be "
                "created again on the pod's next instance type",
                ref,
                name,
                instance_type or "its instance type's",
                endpoint.failure_reason,
            )

    def _state(self, ref: PodRef, endpoint: Endpoint, owner: Owner) -> PodState:
        return endpoint_state(
            ref,
            endpoint,
            owner,
            traffic_address=invocation_url(self._runtime_url, endpoint.name),
            traffic_auth=traffic_auth_marker(self.region),
            deletion_requested=endpoint.name in self._deferred,
        )
