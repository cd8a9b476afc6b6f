"""A thin raw-JSON client over kubernetes_asyncio's transport: the kit's Kubernetes helper.

The daemons reach their own cluster through it (with the private machinery of `vk_provider._kube` on
top), and a provider that runs pods in a remote cluster (`vk_providers.kubernetes`) reaches that one.

The generated models of kubernetes_asyncio lag the server (a 1.36 client against a 1.37 server) and a
read-modify-write through them silently drops fields they do not know. So we use only its
configuration, authentication and connection pool, and speak JSON dicts: what we read is exactly what
the server sent, and what we write is exactly the fields we own.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
from kubernetes_asyncio import client, config

from vk_provider.kit.useragent import USER_AGENT

RawObject = dict[str, Any]

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON = "application/json"

KubeconfigException = config.ConfigException
"""A kubeconfig that names no usable cluster, context or user (kubernetes_asyncio's ConfigException)."""


class KubeApiError(Exception):
    """A non-2xx answer from the apiserver, with its status code and the server's message."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def gone(self) -> bool:
        return self.status == 410


@dataclasses.dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str
    """ADDED, MODIFIED, DELETED, BOOKMARK (ERROR events are raised as KubeApiError)."""
    object: RawObject


class RateLimiter:
    """A token bucket, the kubelet's client-side politeness: `qps` requests a second, bursts of `burst`.

    A real apiserver sheds load with priority and fairness, but a node that starts 5,000 pods at once
    should not make it; waiting here costs latency, never correctness. Watches are not limited.
    """

    def __init__(self, qps: float, burst: int) -> None:
        self._rate = qps
        self._capacity = float(burst)
        self._tokens = float(burst)
        self._updated = 0.0
        self._lock = asyncio.Lock()
        self.waited_seconds = 0.0

    async def acquire(self) -> None:
        async with self._lock:
            loop = asyncio.get_running_loop()
            now = loop.time()
            if self._updated:
                self._tokens = min(self._capacity, self._tokens + (now - self._updated) * self._rate)
            self._updated = now
            if self._tokens < 1.0:
                delay = (1.0 - self._tokens) / self._rate
                self.waited_seconds += delay
                await asyncio.sleep(delay)
                self._tokens = 1.0
                self._updated = loop.time()
            self._tokens -= 1.0


class KubeApi:
    """GET/POST/PATCH/DELETE and watch streams on raw paths, returning parsed JSON."""

    def __init__(self, api_client: client.ApiClient, *, limiter: RateLimiter | None = None) -> None:
        self._client = api_client
        self._client.user_agent = USER_AGENT
        self._limiter = limiter

    @classmethod
    async def from_kubeconfig(
        cls,
        path: str | None,
        *,
        context: str | None = None,
        persist_config: bool = True,
        limiter: RateLimiter | None = None,
    ) -> KubeApi:
        """From a kubeconfig file (its `context`, else its current one), or from the in-cluster service
        account when path is None. `persist_config=False` never writes refreshed credentials back to the
        file (a mounted Secret is read-only). A kubeconfig that cannot be used raises
        `KubeconfigException`, or the OSError or ValueError of reading it."""
        if path is None:
            configuration = client.Configuration()
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            return cls(client.ApiClient(configuration), limiter=limiter)
        api_client = await config.new_client_from_config(
            config_file=path, context=context, persist_config=persist_config
        )
        return cls(api_client, limiter=limiter)

    async def close(self) -> None:
        await self._client.close()

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str | int | bool] | None = None,
        body: Any = None,
        content_type: str = JSON,
        accept: str = JSON,
        request_timeout: aiohttp.ClientTimeout | float | None = None,
    ) -> aiohttp.ClientResponse:
        if self._limiter is not None and not (query or {}).get("watch"):
            await self._limiter.acquire()
        params = [(key, _query_value(value)) for key, value in (query or {}).items()]
        response: aiohttp.ClientResponse = await self._client.call_api(
            path,
            method,
            query_params=params,
            header_params={"Accept": accept, "Content-Type": content_type},
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=request_timeout,
        )
        if not 200 <= response.status <= 299:
            text = (await response.read()).decode(errors="replace")
            response.release()
            raise _error_from(response.status, response.reason or "", text)
        return response

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str | int | bool] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout_seconds: float = 30.0,
    ) -> RawObject:
        response = await self._send(
            method, path, query=query, body=body, content_type=content_type, request_timeout=timeout_seconds
        )
        try:
            data = await response.read()
        finally:
            response.release()
        parsed: RawObject = json.loads(data) if data else {}
        return parsed

    async def get(self, path: str, *, query: Mapping[str, str | int | bool] | None = None) -> RawObject:
        return await self.request("GET", path, query=query)

    async def create(self, path: str, body: Mapping[str, Any]) -> RawObject:
        return await self.request("POST", path, body=body)

    async def patch(self, path: str, body: Any, *, content_type: str = STRATEGIC_MERGE_PATCH) -> RawObject:
        return await self.request("PATCH", path, body=body, content_type=content_type)

    async def delete(self, path: str, body: Mapping[str, Any] | None = None) -> RawObject:
        return await self.request("DELETE", path, body=body)

    async def open_stream(
        self, path: str, *, query: Mapping[str, str | int | bool] | None = None
    ) -> aiohttp.ClientResponse:
        """A GET whose body is read as it comes (a pod's log), with no total timeout: a followed log stays
        open, so the caller bounds the opening and releases the response. Errors as KubeApiError."""
        timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
        return await self._send("GET", path, query=query, accept="*/*", request_timeout=timeout)

    async def watch(
        self, path: str, *, query: Mapping[str, str | int | bool], timeout_seconds: int
    ) -> AsyncIterator[WatchEvent]:
        """One watch stream: yields events until the server ends it (after timeout_seconds at most)."""
        params = {**query, "watch": True, "timeoutSeconds": timeout_seconds, "allowWatchBookmarks": True}
        # The server closes the stream at timeoutSeconds; the client waits a little longer than that.
        timeout = aiohttp.ClientTimeout(total=None, sock_read=timeout_seconds + 30)
        response = await self._send("GET", path, query=params, request_timeout=timeout)
        try:
            async for line in response.content:
                if not line.strip():
                    continue
                event = json.loads(line)
                if event["type"] == "ERROR":
                    status = event["object"]
                    raise _error_from(status.get("code", 500), status.get("reason", ""), json.dumps(status))
                yield WatchEvent(type=event["type"], object=event["object"])
        finally:
            response.release()


def resource_path(
    api_version: str,
    plural: str,
    *,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    """The REST path of a collection (no `name`) or of one object, for `v1` (the core group) or a
    `group/version`; `namespace=None` is cluster-scoped, or every namespace for a namespaced kind."""
    path = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    if namespace is not None:
        path += f"/namespaces/{namespace}"
    path += f"/{plural}"
    if name is not None:
        path += f"/{name}"
        if subresource is not None:
            path += f"/{subresource}"
    return path


def _query_value(value: str | int | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _error_from(status: int, reason: str, text: str) -> KubeApiError:
    message = text
    try:
        parsed = json.loads(text)
        message = parsed.get("message", text)
        reason = parsed.get("reason", reason) or reason
    except (ValueError, AttributeError):
        pass
    return KubeApiError(status, reason, message)
