"""The remote cluster's API, the part this provider uses, one request per method.

The client comes from the kubeconfig file (a mounted Secret; the kubelet rewrites it when the Secret
changes), built again whenever the file changes, so rotated credentials take effect without a restart.
Requests, the kubeconfig loading (with the context to use) and the log stream go through the kit's
`vk_provider.kit.kube.KubeApi` (raw JSON over kubernetes_asyncio's transport).

Every method raises `ApiStatusError` for an error status (except where a 404 or 409 is an answer), and
aiohttp's or the OS's errors for transport failures. Retries and timeouts are the caller's
(`ResilientCaller`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp

from vk_provider.kit.kube import KubeApi, KubeApiError, KubeconfigException, RawObject
from vk_provider.kit.resilience import AccountError, ApiStatusError


def status_error(error: KubeApiError) -> ApiStatusError:
    return ApiStatusError(error.status, error.message.strip(), reason=error.reason)


class RemoteCluster:
    """A client of the remote cluster that follows its kubeconfig file."""

    def __init__(self, kubeconfig: Path, context: str | None) -> None:
        self._kubeconfig = kubeconfig
        self._context = context
        self._stamp: tuple[int, int, int] | None = None
        self._api: KubeApi | None = None
        self._retired: list[KubeApi] = []
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"RemoteCluster({str(self._kubeconfig)!r}, context={self._context!r})"

    def describe(self) -> str:
        context = f", context {self._context}" if self._context else ""
        return f"the kubeconfig {self._kubeconfig}{context}"

    def _file_stamp(self) -> tuple[int, int, int]:
        try:
            stat = self._kubeconfig.stat()
        except OSError as error:
            raise AccountError(
                f"cannot read the remote kubeconfig {self._kubeconfig}: {error.strerror or error}"
            ) from None
        return (stat.st_mtime_ns, stat.st_size, stat.st_ino)

    async def _client(self) -> KubeApi:
        """The client for the kubeconfig as it is now (one stat per call; a new client if it changed)."""
        stamp = self._file_stamp()
        if self._api is not None and stamp == self._stamp:
            return self._api
        async with self._lock:
            if self._api is None or stamp != self._stamp:
                try:
                    api = await KubeApi.from_kubeconfig(
                        str(self._kubeconfig), context=self._context, persist_config=False
                    )
                except (KubeconfigException, OSError, ValueError, KeyError, TypeError) as error:
                    raise AccountError(f"cannot use {self.describe()}: {error}") from None
                if self._api is not None:
                    # Requests in flight (log streams) keep the old client until the provider closes.
                    self._retired.append(self._api)
                self._api, self._stamp = api, stamp
            return self._api

    async def check_readable(self) -> None:
        """Raise AccountError if the kubeconfig cannot be read or used."""
        await self._client()

    async def get(
        self, path: str, *, query: Mapping[str, str | int | bool] | None = None
    ) -> RawObject | None:
        """The object, or None for 404."""
        api = await self._client()
        try:
            return await api.get(path, query=query)
        except KubeApiError as error:
            if error.not_found:
                return None
            raise status_error(error) from None

    async def create(self, path: str, body: Mapping[str, Any]) -> RawObject | None:
        """The created object, or None when one of that name exists already (409)."""
        api = await self._client()
        try:
            return await api.create(path, body)
        except KubeApiError as error:
            if error.status == 409 and error.reason == "AlreadyExists":
                return None
            raise status_error(error) from None

    async def replace(self, path: str, body: Mapping[str, Any]) -> RawObject:
        api = await self._client()
        try:
            return await api.request("PUT", path, body=body)
        except KubeApiError as error:
            raise status_error(error) from None

    async def patch(self, path: str, body: Any) -> RawObject | None:
        """The patched object, or None for 404."""
        api = await self._client()
        try:
            return await api.patch(path, body)
        except KubeApiError as error:
            if error.not_found:
                return None
            raise status_error(error) from None

    async def delete(self, path: str, body: Mapping[str, Any] | None = None) -> bool:
        """Delete; False if there was nothing to delete (404)."""
        api = await self._client()
        try:
            await api.delete(path, body)
        except KubeApiError as error:
            if error.not_found:
                return False
            raise status_error(error) from None
        return True

    async def list(self, path: str, *, label_selector: str) -> list[RawObject]:
        document = await self.get(path, query={"labelSelector": label_selector})
        items = (document or {}).get("items") or []
        return [item for item in items if isinstance(item, dict)]

    async def open_stream(self, path: str, query: Mapping[str, str | int | bool]) -> aiohttp.ClientResponse:
        """A GET whose body is read as it comes (a log); the caller releases it. Errors as ApiStatusError."""
        api = await self._client()
        try:
            return await api.open_stream(path, query=query)
        except KubeApiError as error:
            raise status_error(error) from None

    async def open_websocket(
        self, path: str, query: Sequence[tuple[str, str]], protocols: Sequence[str]
    ) -> aiohttp.ClientWebSocketResponse:
        """A WebSocket to a pod's exec, attach or portforward; a refused upgrade as ApiStatusError."""
        api = await self._client()
        try:
            return await api.open_websocket(path, query=query, protocols=protocols)
        except aiohttp.WSServerHandshakeError as error:
            raise ApiStatusError(error.status, error.message, reason="") from None

    async def aclose(self) -> None:
        for api in [*self._retired, *([self._api] if self._api is not None else [])]:
            with contextlib.suppress(Exception):
                await api.close()
        self._retired.clear()
        self._api = None
        self._stamp = None
