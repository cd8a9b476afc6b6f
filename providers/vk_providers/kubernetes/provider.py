"""Pods of a virtual node as pods of a remote Kubernetes cluster: create, read, delete, list, logs.

Every call to the remote apiserver goes through one `ResilientCaller` (a timeout per attempt, retries
with backoff, the provider's circuit breaker); see `vk_provider.kit.resilience`.

Idempotence: every remote object is named after the pod UID (see `translate`), so a create first reads
the remote pod and a repeated or retried create meets "already exists" (409), which counts as done.
Deletion deletes the Pod (with the grace period the node asks for), its Service and its Secrets (the
env Secret and one per copied volume, found by the pod's UID label); a 404 counts as deleted.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

import aiohttp
import yaml

from vk_provider.errors import (
    InvalidPodError,
    NotFoundError,
    ProviderError,
    TemporaryProviderError,
)
from vk_provider.kit.kube import resource_path
from vk_provider.kit.resilience import (
    AccountError,
    ApiStatusError,
    BreakerStatus,
    ResilientCaller,
    default_status_error,
)
from vk_provider.kit.resilience.health import probe_health
from vk_provider.provider import (
    ByteSink,
    ContainerStreams,
    LogOptions,
    PodRef,
    PodRequest,
    PodState,
    PricedPod,
    ProviderContext,
)
from vk_providers.kubernetes.api import RemoteCluster
from vk_providers.kubernetes.config import KubernetesSettings, parse_settings
from vk_providers.kubernetes.portforward import TUNNEL_PROTOCOL, forward_through_tunnel
from vk_providers.kubernetes.prices import remote_pod_price
from vk_providers.kubernetes.states import (
    failed_containers_without_message,
    log_query,
    owner_ref,
    pod_state,
)
from vk_providers.kubernetes.streams import PROTOCOLS as STREAM_PROTOCOLS
from vk_providers.kubernetes.streams import run_channels, stream_query
from vk_providers.kubernetes.translate import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    RawObject,
    RemoteObjects,
    node_selector,
    object_name,
    pod_selector,
    remote_objects,
)

logger = logging.getLogger(__name__)

NAMESPACE_POLL_SECONDS = 0.2
_TEMPORARY_REFUSALS = ("exceeded quota", "error looking up service account", "being terminated")
"""403 answers that pass: quota may free up, a new namespace gets its ServiceAccount, a namespace ends."""


def remote_status_error(error: ApiStatusError, context: str) -> ProviderError:
    """The contract error for a final status of the remote apiserver.

    403 is overloaded: RBAC refusing our credentials (the provider is unusable), a quota or a namespace
    being set up or torn down (temporary), or an admission plugin refusing this pod (the pod fails).
    """
    message = f"{context}: {error}"
    if error.status == 403:
        detail = error.detail.lower()
        if any(words in detail for words in _TEMPORARY_REFUSALS):
            return TemporaryProviderError(message)
        if " cannot " in detail and "resource" in detail:
            return AccountError(message)
        return InvalidPodError(message)
    if error.status == 409:
        return TemporaryProviderError(message)  # a write raced another; the next try reads again
    return default_status_error(error, context)


def _log_error(error: ApiStatusError, context: str) -> ProviderError:
    """Logs: the apiserver answers 400 for a container that has not started or no previous run."""
    if error.status in (400, 404):
        return NotFoundError(f"{context}: {error.detail or error}")
    return remote_status_error(error, context)


def _check_kubeconfig(settings: KubernetesSettings) -> None:
    path = settings.kubeconfig_file
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ValueError(f"kubernetes provider: cannot read {path}: {error.strerror or error}") from None
    except yaml.YAMLError as error:
        raise ValueError(f"kubernetes provider: {path} is not a kubeconfig: {error}") from None
    if not isinstance(document, dict):
        raise ValueError(f"kubernetes provider: {path} is not a kubeconfig (not a mapping)")
    contexts = {entry.get("name") for entry in document.get("contexts") or [] if isinstance(entry, dict)}
    if settings.context is not None and settings.context not in contexts:
        raise ValueError(f"kubernetes provider: {path} has no context {settings.context!r}")


class KubernetesProvider:
    def __init__(
        self,
        context: ProviderContext,
        *,
        settings: KubernetesSettings | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`sleep` and `clock` are for tests: retry waits and breaker time.

        Raises ValueError when the settings are wrong or the kubeconfig cannot be read.
        """
        self.node_name = context.node_name
        self._settings = settings if settings is not None else parse_settings(context.config)
        _check_kubeconfig(self._settings)
        self._remote = RemoteCluster(self._settings.kubeconfig_file, self._settings.context)
        self.breaker = self._settings.calls.breaker("remote Kubernetes", clock)
        self._caller = ResilientCaller(
            "remote Kubernetes",
            policy=self._settings.calls.call_policy(),
            breaker=self.breaker,
            sleep=sleep,
            map_status=remote_status_error,
        )
        namespace = self._settings.namespace
        self._namespace_path = resource_path("v1", "namespaces", name=namespace)
        self._namespace_ready = False
        self._locks: dict[str, asyncio.Lock] = {}
        self._log_messages: dict[tuple[str, str, int], str] = {}
        """(remote pod UID, container, restart count) -> the last log lines of a silent failure."""

    def __repr__(self) -> str:
        return (
            f"KubernetesProvider(node={self.node_name!r}, {self._remote.describe()}, "
            f"namespace={self._settings.namespace!r})"
        )

    @property
    def settings(self) -> KubernetesSettings:
        return self._settings

    def breaker_status(self) -> BreakerStatus:
        """The circuit breaker's state: what the health check reports as ProviderAvailable."""
        return self.breaker.status()

    def _path(self, kind: str, name: str = "") -> str:
        return f"{self._namespace_path}/{kind}" + (f"/{name}" if name else "")

    # -- PodLifecycle --------------------------------------------------------------------------

    async def create_pod(self, pod: PodRequest) -> None:
        objects = remote_objects(pod, self._settings, self.node_name)
        name = object_name(self._settings, pod.ref.uid)
        async with self._lock(pod.ref.uid):
            await self._ensure_namespace()
            existing = await self._call("read pod", self._remote.get, self._path("pods", name))
            if existing is not None:
                if (existing.get("metadata") or {}).get("deletionTimestamp"):
                    raise TemporaryProviderError(f"the remote pod {name} of an earlier run is still stopping")
                await self._ensure_service(objects)
                return
            # The Secrets first: the remote kubelet would otherwise start the pod without its variables
            # and files, and report errors until they came.
            await self._write_secret(objects.secret, "env secret")
            for secret in objects.volume_secrets:
                await self._write_secret(secret, "volume secret")
            try:
                await self._call("create pod", self._remote.create, self._path("pods"), objects.pod)
            except InvalidPodError:
                await self._forget_secrets(pod.ref)
                raise
            except NotFoundError:
                self._namespace_ready = False  # deleted behind our back: made again on the next try
                raise TemporaryProviderError(
                    f"the remote namespace {self._settings.namespace} is gone; creating it again"
                ) from None
            await self._ensure_service(objects)
            logger.info("pod %s: remote pod %s/%s", pod.ref, self._settings.namespace, name)

    async def update_pod(self, pod: PodRequest) -> None:
        """Only container images of a pod can change (as in Kubernetes); the remote kubelet restarts them."""
        objects = remote_objects(pod, self._settings, self.node_name)
        name = object_name(self._settings, pod.ref.uid)
        async with self._lock(pod.ref.uid):
            existing = await self._call("read pod", self._remote.get, self._path("pods", name))
            if existing is None or (existing.get("metadata") or {}).get("deletionTimestamp"):
                return
            current = {
                c.get("name"): c.get("image") for c in (existing.get("spec") or {}).get("containers", [])
            }
            changed = [
                {"name": container["name"], "image": container["image"]}
                for container in objects.pod["spec"]["containers"]
                if current.get(container["name"]) != container["image"]
            ]
            if changed:
                await self._call(
                    "update pod",
                    self._remote.patch,
                    self._path("pods", name),
                    {"spec": {"containers": changed}},
                )
                logger.info("pod %s: remote pod %s now runs %s", pod.ref, name, changed)

    async def delete_pod(self, ref: PodRef, *, grace_period_seconds: float) -> None:
        """Delete the remote pod with the node's grace period, then its Service and Secrets."""
        name = object_name(self._settings, ref.uid)
        options = {
            "gracePeriodSeconds": max(0, math.ceil(grace_period_seconds)),
            "propagationPolicy": "Background",
        }
        async with self._lock(ref.uid):
            if await self._call("delete pod", self._remote.delete, self._path("pods", name), options):
                logger.info("pod %s: deleting remote pod %s", ref, name)
            await self._call("delete service", self._remote.delete, self._path("services", name))
            await self._forget_secrets(ref)
        for key in [key for key in self._log_messages if key[0] == ref.uid]:
            del self._log_messages[key]

    async def get_pod_state(self, ref: PodRef) -> PodState | None:
        name = object_name(self._settings, ref.uid)
        remote = await self._call("read pod", self._remote.get, self._path("pods", name))
        if remote is None or owner_ref(remote, self.node_name) is None:
            return None
        service = None
        if self._settings.service_type != "ClusterIP":
            service = await self._call("read service", self._remote.get, self._path("services", name))
        return pod_state(
            ref,
            remote,
            settings=self._settings,
            service=service,
            log_messages=await self._failure_logs(ref.uid, remote),
        )

    async def list_pods(self) -> Sequence[PodState]:
        selector = node_selector(self.node_name)
        pods = await self._call("list pods", self._remote.list, self._path("pods"), label_selector=selector)
        services: dict[str, RawObject] = {}
        if self._settings.service_type != "ClusterIP":
            listed = await self._call(
                "list services", self._remote.list, self._path("services"), label_selector=selector
            )
            services = {str(service["metadata"]["name"]): service for service in listed}
        states = []
        for remote in pods:
            ref = owner_ref(remote, self.node_name)
            if ref is None:
                continue
            states.append(
                pod_state(
                    ref,
                    remote,
                    settings=self._settings,
                    service=services.get(str(remote["metadata"]["name"])),
                    log_messages=self._cached_failure_logs(ref.uid, remote),
                )
            )
        return states

    async def check_health(self) -> None:
        """Unavailable while the breaker is open, or when the remote cluster refuses our credentials.

        The probe lists one pod of the provider's namespace: it needs working credentials and the RBAC
        the provider lives on, and a namespace not made yet answers an empty list.
        """
        await probe_health(
            self._caller,
            self.breaker,
            functools.partial(self._remote.get, self._path("pods"), query={"limit": 1}),
            provider="remote Kubernetes",
            timeout_seconds=self._settings.calls.health_probe_timeout_seconds,
        )

    async def aclose(self) -> None:
        await self._remote.aclose()

    # -- SupportsNodeCapacity, SupportsLogs -----------------------------------------------------

    def pod_price_per_hour(self, pod: PricedPod) -> float | None:
        return remote_pod_price(pod, self._settings.gpu_prices_usd_per_hour)

    async def node_capacity(self) -> Mapping[str, str]:
        return self._settings.capacity

    def stream_logs(self, ref: PodRef, container: str, options: LogOptions) -> AsyncIterator[bytes]:
        """The remote pod's log, as the remote apiserver serves it, with the same options."""
        return self._stream_logs(ref, container, options)

    async def _stream_logs(self, ref: PodRef, container: str, options: LogOptions) -> AsyncIterator[bytes]:
        path = self._path("pods", object_name(self._settings, ref.uid)) + "/log"
        response = await self._caller.call(
            "open log",
            functools.partial(self._remote.open_stream, path, log_query(container, options)),
            map_status=_log_error,
        )
        try:
            async for chunk in response.content.iter_any():
                yield chunk
        finally:
            response.release()

    async def exec_in_container(
        self, ref: PodRef, container: str, command: Sequence[str], streams: ContainerStreams
    ) -> int:
        """The remote pod's exec, through the remote apiserver (WebSocket, `streams`)."""
        query = [*stream_query(container, streams), *(("command", word) for word in command)]
        return await self._run_remote("exec", ref, query, streams)

    async def attach_to_container(self, ref: PodRef, container: str, streams: ContainerStreams) -> None:
        await self._run_remote("attach", ref, stream_query(container, streams), streams)

    async def port_forward(
        self, ref: PodRef, port: int, incoming: AsyncIterator[bytes], send: ByteSink
    ) -> None:
        """The remote pod's port, through a SPDY tunnel in a WebSocket to the remote apiserver."""
        socket = await self._open_socket("portforward", ref, [("ports", str(port))], (TUNNEL_PROTOCOL,))
        await forward_through_tunnel(socket, port, incoming, send)

    async def _run_remote(
        self, subresource: str, ref: PodRef, query: list[tuple[str, str]], streams: ContainerStreams
    ) -> int:
        socket = await self._open_socket(subresource, ref, query, STREAM_PROTOCOLS)
        return await run_channels(socket, streams)

    async def _open_socket(
        self, subresource: str, ref: PodRef, query: list[tuple[str, str]], protocols: Sequence[str]
    ) -> aiohttp.ClientWebSocketResponse:
        path = self._path("pods", object_name(self._settings, ref.uid)) + f"/{subresource}"
        try:
            return await self._remote.open_websocket(path, query, protocols)
        except ApiStatusError as error:
            if error.status == 404:
                raise NotFoundError(f"pod {ref} has no remote pod") from None
            container = dict(query).get("container")
            if error.status == 400 and container and not await self._has_container(path, container):
                # The apiserver refuses an unknown container with a 400 whose body the handshake
                # drops; the contract's answer is NotFoundError, as for a local container.
                raise NotFoundError(f"pod {ref} has no container {container!r}") from None
            raise ProviderError(f"remote {subresource}: {error.detail or error.reason}") from None
        except (aiohttp.ClientError, OSError) as error:
            raise ProviderError(f"remote {subresource}: {error}") from None

    async def _has_container(self, subresource_path: str, container: str) -> bool:
        remote = await self._call("read pod", self._remote.get, subresource_path.rsplit("/", 1)[0])
        spec = (remote or {}).get("spec") or {}
        kinds = ("containers", "initContainers", "ephemeralContainers")
        return any(item.get("name") == container for kind in kinds for item in spec.get(kind) or ())

    # -- helpers -------------------------------------------------------------------------------

    async def _call(
        self, operation: str, method: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any
    ) -> Any:
        return await self._caller.call(operation, functools.partial(method, *args, **kwargs))

    def _lock(self, uid: str) -> asyncio.Lock:
        return self._locks.setdefault(uid, asyncio.Lock())

    async def _ensure_namespace(self) -> None:
        """The provider's namespace exists and can take pods (its default ServiceAccount exists)."""
        if self._namespace_ready:
            return
        namespace = self._settings.namespace
        found = await self._call("read namespace", self._remote.get, self._namespace_path)
        if found is None:
            body = {"metadata": {"name": namespace, "labels": {MANAGED_BY_LABEL: MANAGED_BY}}}
            await self._call("create namespace", self._remote.create, resource_path("v1", "namespaces"), body)
            logger.info("created the remote namespace %s", namespace)
        elif (found.get("status") or {}).get("phase") == "Terminating":
            raise TemporaryProviderError(f"the remote namespace {namespace} is being deleted")
        # The ServiceAccount admission refuses pods until the namespace's default account exists.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._settings.namespace_ready_timeout_seconds
        account = self._path("serviceaccounts", "default")
        while await self._call("read service account", self._remote.get, account) is None:
            if loop.time() > deadline:
                raise TemporaryProviderError(
                    f"the remote namespace {namespace} has no default ServiceAccount yet"
                )
            await asyncio.sleep(NAMESPACE_POLL_SECONDS)
        self._namespace_ready = True

    async def _write_secret(self, secret: RawObject, what: str) -> None:
        """Create the Secret, or overwrite one left by an earlier attempt (it may be out of date)."""
        path = self._path("secrets")
        if await self._call(f"create {what}", self._remote.create, path, secret) is None:
            await self._call(
                f"replace {what}", self._remote.replace, f"{path}/{secret['metadata']['name']}", secret
            )

    async def _forget_secrets(self, ref: PodRef) -> None:
        """Delete every Secret of the pod: its env Secret and its volumes' Secrets, found by label.

        By label and not by name, so Secrets of volumes an earlier version of the pod had go too.
        """
        selector = pod_selector(self.node_name, ref.uid)
        secrets = await self._call(
            "list secrets", self._remote.list, self._path("secrets"), label_selector=selector
        )
        for secret in secrets:
            name = str(secret["metadata"]["name"])
            await self._call("delete secret", self._remote.delete, self._path("secrets", name))

    async def _ensure_service(self, objects: RemoteObjects) -> None:
        if objects.service is not None:
            await self._call("create service", self._remote.create, self._path("services"), objects.service)

    def _cached_failure_logs(self, uid: str, remote: RawObject) -> dict[str, str]:
        return {
            container: self._log_messages[(uid, container, restarts)]
            for container, restarts in failed_containers_without_message(remote)
            if (uid, container, restarts) in self._log_messages
        }

    async def _failure_logs(self, uid: str, remote: RawObject) -> dict[str, str]:
        """The last log lines of each container that failed without a message, read once per run."""
        lines = self._settings.error_log_lines
        if lines == 0:
            return {}
        path = self._path("pods", str(remote["metadata"]["name"])) + "/log"
        for container, restarts in failed_containers_without_message(remote):
            key = (uid, container, restarts)
            if key in self._log_messages:
                continue
            try:
                text = await self._caller.call(
                    "read log", functools.partial(self._read_log, path, container, lines), retry=False
                )
            except ProviderError as error:
                logger.info("could not read the log of remote container %s of %s: %s", container, uid, error)
                continue
            texts = [line.strip() for line in text.splitlines() if line.strip()]
            if texts:
                self._log_messages[key] = f"its log ends: {' / '.join(texts)}"
        return self._cached_failure_logs(uid, remote)

    async def _read_log(self, path: str, container: str, lines: int) -> str:
        response = await self._remote.open_stream(path, {"container": container, "tailLines": lines})
        try:
            return (await response.read()).decode(errors="replace")
        finally:
            response.release()
