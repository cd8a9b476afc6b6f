"""A thin raw-JSON client over kubernetes_asyncio's transport: the kit's Kubernetes helper.

The daemons reach their own cluster through it (with the private machinery of `vk_provider._kube` on
top), and a provider that runs pods in a remote cluster (`vk_providers.kubernetes`) reaches that one.

The generated models of kubernetes_asyncio lag the server (a 1.36 client against a 1.37 server) and a
read-modify-write through them silently drops fields they do not know. So we use only its
configuration, authentication and connection pool, and speak JSON dicts: what we read is exactly what
the server sent, and what we write is exactly the fields we own.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import urllib.parse
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import aiohttp

from vk_provider.kit import apibudget, lazypackages

# Before the first import of kubernetes_asyncio: its generated APIs and models (~37 MiB) load only if
# something asks for them; this module needs only the configuration, auth and transport submodules.
lazypackages.defer("kubernetes_asyncio")
lazypackages.defer(
    "kubernetes_asyncio.client", names={"ApiClient": "api_client", "Configuration": "configuration"}
)
lazypackages.defer("kubernetes_asyncio.client.models")

from kubernetes_asyncio import client, config  # noqa: E402 (after the deferral, on purpose)

from vk_provider.kit.apibudget import ApiBudget  # noqa: E402
from vk_provider.kit.backoff import jittered_backoff_seconds  # noqa: E402
from vk_provider.kit.useragent import USER_AGENT  # noqa: E402

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


class KubeApi:
    """GET/POST/PATCH/DELETE and watch streams on raw paths, returning parsed JSON.

    Every request goes through its class's pace in `budget` (watches excepted: one long request each),
    and an answer that tells the client to come back later (429, or a 5xx, with `Retry-After`: API
    Priority and Fairness, the max-in-flight filter, a restarting apiserver) is retried after it, with
    the class paused and slowed meanwhile (see `kit.apibudget`), up to `MAX_RETRIES` times, as client-go
    does. Such a request was not executed by the apiserver, so retrying any verb is safe.
    """

    def __init__(self, api_client: client.ApiClient, *, budget: ApiBudget | None = None) -> None:
        self._client = api_client
        self._client.user_agent = USER_AGENT
        self.budget = budget or ApiBudget()

    @classmethod
    async def from_kubeconfig(
        cls,
        path: str | None,
        *,
        context: str | None = None,
        persist_config: bool = True,
        budget: ApiBudget | None = None,
    ) -> KubeApi:
        """From a kubeconfig file (its `context`, else its current one), or from the in-cluster service
        account when path is None. `persist_config=False` never writes refreshed credentials back to the
        file (a mounted Secret is read-only). A kubeconfig that cannot be used raises
        `KubeconfigException`, or the OSError or ValueError of reading it."""
        if path is None:
            configuration = client.Configuration()
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            return cls(client.ApiClient(configuration), budget=budget)
        api_client = await config.new_client_from_config(
            config_file=path, context=context, persist_config=persist_config
        )
        return cls(api_client, budget=budget)

    @property
    def api_client(self) -> client.ApiClient:
        """The connection, for another `KubeApi` on it (`vk_provider._kube.informers.CachedApi`)."""
        return self._client

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
        request_class = apibudget.classify(method, path)
        watching = bool((query or {}).get("watch"))
        params = [(key, _query_value(value)) for key, value in (query or {}).items()]
        attempt = 0
        while True:
            if not watching:
                await self.budget.acquire(request_class)
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
            if 200 <= response.status <= 299:
                return response
            text = (await response.read()).decode(errors="replace")
            response.release()
            retry_after = _retry_after_seconds(response.status, response.headers.get("Retry-After"))
            if retry_after is None or attempt >= apibudget.MAX_RETRIES:
                raise _error_from(response.status, response.reason or "", text)
            attempt += 1
            self.budget.throttle(request_class, retry_after)
            # The class's pause covers Retry-After; a request refused again and again also backs off.
            await self.budget.clock.sleep(
                max(retry_after, jittered_backoff_seconds(attempt, initial_seconds=0.25, max_seconds=30.0))
            )

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str | int | bool] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout_seconds: float = 30.0,
        compact: bool = False,
    ) -> RawObject:
        """`compact`: the answer will be kept (a cache), so share its repeated strings (`decode_compact`)."""
        response = await self._send(
            method, path, query=query, body=body, content_type=content_type, request_timeout=timeout_seconds
        )
        try:
            data = await response.read()
        finally:
            response.release()
        if not data:
            return {}
        parsed: RawObject = decode_compact(data) if compact else json.loads(data)
        return parsed

    async def get(
        self, path: str, *, query: Mapping[str, str | int | bool] | None = None, compact: bool = False
    ) -> RawObject:
        return await self.request("GET", path, query=query, compact=compact)

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

    async def open_websocket(
        self, path: str, *, query: Sequence[tuple[str, str]], protocols: Sequence[str]
    ) -> aiohttp.ClientWebSocketResponse:
        """A WebSocket to a streaming subresource (a pod's exec, attach or portforward), with this
        client's TLS and credentials; the caller closes it. A refused upgrade raises aiohttp's
        WSServerHandshakeError."""
        headers: dict[str, str] = {}
        await self._client.update_params_for_auth(headers, [], ["BearerToken"])
        url = f"{self._client.configuration.host}{path}?{urllib.parse.urlencode(list(query))}"
        session: aiohttp.ClientSession = self._client.rest_client.pool_manager
        return await session.ws_connect(url, headers=headers, protocols=tuple(protocols), max_msg_size=0)

    async def watch(
        self, path: str, *, query: Mapping[str, str | int | bool], timeout_seconds: int
    ) -> AsyncIterator[WatchEvent]:
        """One watch stream: yields events until the server ends it (after timeout_seconds at most).
        Objects are decoded with `decode_compact`: a watch feeds a cache."""
        params = {**query, "watch": True, "timeoutSeconds": timeout_seconds, "allowWatchBookmarks": True}
        # The server closes the stream at timeoutSeconds; the client waits a little longer than that.
        timeout = aiohttp.ClientTimeout(total=None, sock_read=timeout_seconds + 30)
        response = await self._send("GET", path, query=params, request_timeout=timeout)
        try:
            async for line in response.content:
                if not line.strip():
                    continue
                event = decode_compact(line)
                if event["type"] == "ERROR":
                    status = event["object"]
                    raise _error_from(status.get("code", 500), status.get("reason", ""), json.dumps(status))
                yield WatchEvent(type=event["type"], object=event["object"])
        finally:
            response.release()


_SHARED_VALUE_MAX_LENGTH = 40


def _shared_strings(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    return {
        sys.intern(key): sys.intern(value)
        if value.__class__ is str and len(value) <= _SHARED_VALUE_MAX_LENGTH
        else value
        for key, value in pairs
    }


def decode_compact(data: bytes | str) -> Any:
    """JSON whose keys and short strings are shared with every other object decoded so: `json.loads`
    gives each object its own copy of `"metadata"`, `"True"`, `"Running"`... A cached pod then takes
    about half the memory (5 MiB per 1,000 pods instead of 11), for some 90 us more per object."""
    return json.loads(data, object_pairs_hook=_shared_strings)


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


def _retry_after_seconds(status: int, header: str | None) -> float | None:
    """Seconds to wait before retrying, if the answer asks for a retry: 429 or 5xx with `Retry-After`
    in seconds (what the apiserver sends). None: not to be retried here."""
    if header is None or not (status == 429 or 500 <= status <= 599):
        return None
    try:
        seconds = float(header)
    except ValueError:
        return None  # an HTTP-date: the apiserver never sends one, and we do not guess
    return min(max(seconds, 0.0), apibudget.MAX_RETRY_AFTER_SECONDS)


def _error_from(status: int, reason: str, text: str) -> KubeApiError:
    message = text
    try:
        parsed = json.loads(text)
        message = parsed.get("message", text)
        reason = parsed.get("reason", reason) or reason
    except (ValueError, AttributeError):
        pass
    return KubeApiError(status, reason, message)
