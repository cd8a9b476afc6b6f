"""RunPod's REST API v2, the part this provider uses, one HTTP request per method.

Written from RunPod's API reference (docs.runpod.io/api-reference-v2; its OpenAPI 3.1 document, as
stored in runpod/docs `api-reference-v2/openapi.json` at 098c7fb, 2026-08-18):

- `GET /v2/pods` -> `{"pods": [Pod]}` (no paging, no filters besides `includeClusterPods`);
- `POST /v2/pods` (CreatePodRequest: `name`, `image`, `gpu: {id, count}`, `cloud`, `dataCenterIds`,
  `env`, `ports` like "8000/http", `args`, `disk`; unknown fields are refused) -> 201 Pod;
- `GET /v2/pods/{id}` -> Pod, 404 when unknown; `PATCH /v2/pods/{id}` -> Pod;
  `DELETE /v2/pods/{id}` -> 204 (404 when unknown; the pod then leaves the list);
- `GET /v2/pods/{id}/logs?source=&tail=&since=` -> Server-Sent Events, `data: {"ts", "source", "line"}`;
- `GET /v2/catalog/gpus?include=AVAILABILITY&product=POD&count=&cloud=` -> `{"gpus": [GpuType]}`.

Errors are RFC 9457 problem documents (`title`, `status`, `detail`, `errors`); a 429 carries
`Retry-After` (seconds, or an HTTP date) and responses carry the IETF `RateLimit` header (research
notes, section 1): the wait asked for is the longer of the two (`rate_limit_reset_seconds`). Every
method raises `ApiStatusError` for an error status (except where a 404
is an answer), aiohttp's errors for transport failures, and `MalformedResponseError` for a body that is
not what the reference promises. Retries and timeouts are the caller's (`ResilientCaller`).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import AsyncGenerator, Mapping
from datetime import datetime
from typing import Any

import aiohttp

from vk_provider.kit.credentials import MissingSecretError, SecretSource
from vk_provider.kit.resilience import AccountError, ApiStatusError, error_from_response
from vk_provider.kit.timestamps import parse_timestamp
from vk_provider.kit.useragent import USER_AGENT

_RATE_LIMIT_ITEM = re.compile(r"(?:^|[;,\s])(r|remaining|t|reset)=(\d+)")


def rate_limit_reset_seconds(header: str | None) -> float | None:
    """Seconds until a spent quota resets, from a `RateLimit` header; None when none is spent.

    Both drafts' shapes (draft-ietf-httpapi-ratelimit-headers): the current `"name";r=0;t=30` (one item
    per policy; every exhausted one counts, the longest wins) and the older `limit=10, remaining=0,
    reset=30`.
    """
    if not header:
        return None
    waits = []
    for item in header.split(",") if ";" in header else [header]:
        fields = dict(_RATE_LIMIT_ITEM.findall(item))
        remaining = fields.get("r", fields.get("remaining"))
        reset = fields.get("t", fields.get("reset"))
        if remaining == "0" and reset is not None:
            waits.append(float(reset))
    return max(waits) if waits else None


async def api_error(response: aiohttp.ClientResponse) -> ApiStatusError:
    """The error of a response, waiting as long as its `Retry-After` or its `RateLimit` asks."""
    error = await error_from_response(response)
    reset = rate_limit_reset_seconds(response.headers.get("RateLimit"))
    if reset is not None and (error.retry_after_seconds is None or reset > error.retry_after_seconds):
        error.retry_after_seconds = reset
    return error


class MalformedResponseError(ValueError):
    """RunPod answered 2xx with a body that does not match its reference."""


@dataclasses.dataclass(frozen=True, slots=True)
class RunPodPod:
    """The fields of a RunPod `Pod` this provider reads."""

    id: str
    name: str
    status: str
    image: str
    env: Mapping[str, str]
    ports: tuple[str, ...]
    gpu_type: str | None
    gpu_count: int
    cloud: str | None
    data_center_id: str | None
    cost_per_hour: float | None
    created_at: datetime | None
    started_at: datetime | None

    @classmethod
    def from_json(cls, document: Any) -> RunPodPod:
        if not isinstance(document, dict):
            raise MalformedResponseError(f"a pod should be an object, not {type(document).__name__}")
        for key in ("id", "name", "status"):
            if not isinstance(document.get(key), str):
                raise MalformedResponseError(f"a pod's {key!r} should be a string: {document.get(key)!r}")
        env = document.get("env") or {}
        gpu = document.get("gpu") or {}
        cost = document.get("cost")
        return cls(
            id=document["id"],
            name=document["name"],
            status=document["status"],
            image=str(document.get("image") or ""),
            env={str(key): str(value) for key, value in env.items()} if isinstance(env, dict) else {},
            ports=tuple(str(port) for port in document.get("ports") or ()),
            gpu_type=str(gpu["id"]) if isinstance(gpu, dict) and gpu.get("id") else None,
            gpu_count=int(gpu.get("count", 1)) if isinstance(gpu, dict) else 0,
            cloud=document.get("cloud"),
            data_center_id=document.get("dataCenterId"),
            cost_per_hour=float(cost) if isinstance(cost, int | float) else None,
            created_at=parse_timestamp(document.get("createdAt"), assume_utc=False),
            started_at=parse_timestamp(document.get("startedAt"), assume_utc=False),
        )


@dataclasses.dataclass(frozen=True, slots=True)
class RunPodGpuType:
    """A `GpuType` of the catalog; availability fields are set when asked for."""

    id: str
    name: str
    memory_gb: int | None
    price_per_gpu: Mapping[str, float]
    """Per cloud ("SECURE", "COMMUNITY"): USD per GPU per hour."""
    max_count: Mapping[str, int]
    offered: Mapping[str, bool]
    availability: str | None
    data_centers: tuple[tuple[str, str, str], ...]
    """(id, name, availability) of the data centers that have it."""

    @classmethod
    def from_json(cls, document: Any) -> RunPodGpuType:
        if not isinstance(document, dict) or not isinstance(document.get("id"), str):
            raise MalformedResponseError(f"a GPU type should be an object with an id: {document!r}")
        price = document.get("price") or {}
        ceiling = document.get("maxCount") or {}
        centers = document.get("dataCenters") or ()
        return cls(
            id=document["id"],
            name=str(document.get("name") or document["id"]),
            memory_gb=document.get("memory") if isinstance(document.get("memory"), int) else None,
            price_per_gpu={
                cloud: float(price[key])
                for cloud, key in _CLOUD_KEYS
                if isinstance(price.get(key), int | float)
            },
            max_count={
                cloud: int(ceiling[key]) for cloud, key in _CLOUD_KEYS if isinstance(ceiling.get(key), int)
            },
            offered={cloud: bool(document.get(key)) for cloud, key in _CLOUD_KEYS},
            availability=document.get("availability"),
            data_centers=tuple(
                (str(center.get("id")), str(center.get("name") or ""), str(center.get("availability")))
                for center in centers
                if isinstance(center, dict)
            ),
        )


_CLOUD_KEYS = (("SECURE", "secure"), ("COMMUNITY", "community"))


@dataclasses.dataclass(frozen=True, slots=True)
class LogEvent:
    ts: datetime | None
    source: str
    line: str


class RunPodApi:
    """An HTTP client for the calls above, authenticated with the key from `keys` on every request."""

    def __init__(self, base_url: str, keys: SecretSource) -> None:
        self._base = base_url.rstrip("/")
        self._keys = keys
        self._session: aiohttp.ClientSession | None = None

    def __repr__(self) -> str:
        return f"RunPodApi({self._base!r})"

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # No total timeout: the caller bounds each attempt, and log streams may stay open for good.
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None),
                headers={"User-Agent": USER_AGENT, "Accept": "application/json"},
            )
        return self._session

    def _headers(self) -> dict[str, str]:
        try:
            key = self._keys.current()
        except MissingSecretError as error:
            raise AccountError(f"RunPod: {error}") from None
        return {"Authorization": f"Bearer {key.reveal()}"}

    async def _json(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        absent_on_404: bool = False,
    ) -> Any:
        """The JSON answer; None for 204, and for 404 when `absent_on_404`."""
        async with self._client().request(
            method, f"{self._base}{path}", params=params, json=body, headers=self._headers()
        ) as response:
            if absent_on_404 and response.status == 404:
                return None
            if response.status >= 400:
                raise await api_error(response)
            if response.status == 204:
                return None
            try:
                return await response.json(content_type=None)
            except ValueError as error:
                raise MalformedResponseError(f"{method} {path}: the answer is not JSON ({error})") from None

    async def probe(self) -> None:
        """The cheapest authenticated call: the GPU catalog without availability."""
        await self._json("GET", "/catalog/gpus")

    async def list_pods(self) -> list[RunPodPod]:
        document = await self._json("GET", "/pods")
        pods = document.get("pods") if isinstance(document, dict) else None
        if not isinstance(pods, list):
            raise MalformedResponseError('GET /pods: the answer has no "pods" list')
        return [RunPodPod.from_json(pod) for pod in pods]

    async def get_pod(self, pod_id: str) -> RunPodPod | None:
        document = await self._json("GET", f"/pods/{pod_id}", absent_on_404=True)
        return None if document is None else RunPodPod.from_json(document)

    async def create_pod(self, body: Mapping[str, Any]) -> RunPodPod:
        return RunPodPod.from_json(await self._json("POST", "/pods", body=body))

    async def update_pod(self, pod_id: str, body: Mapping[str, Any]) -> RunPodPod | None:
        document = await self._json("PATCH", f"/pods/{pod_id}", body=body, absent_on_404=True)
        return None if document is None else RunPodPod.from_json(document)

    async def delete_pod(self, pod_id: str) -> bool:
        """Terminate a pod; False if RunPod did not know it (already gone)."""
        async with self._client().delete(f"{self._base}/pods/{pod_id}", headers=self._headers()) as response:
            if response.status == 404:
                return False
            if response.status >= 400:
                raise await api_error(response)
            return True

    async def gpu_types(self, *, gpu_count: int, cloud: str) -> list[RunPodGpuType]:
        """The catalog with pod availability for `gpu_count` GPUs in `cloud`."""
        params = {"include": "AVAILABILITY", "product": "POD", "count": str(gpu_count), "cloud": cloud}
        document = await self._json("GET", "/catalog/gpus", params=params)
        gpus = document.get("gpus") if isinstance(document, dict) else None
        if not isinstance(gpus, list):
            raise MalformedResponseError('GET /catalog/gpus: the answer has no "gpus" list')
        return [RunPodGpuType.from_json(gpu) for gpu in gpus]

    async def open_logs(self, pod_id: str, params: Mapping[str, str]) -> aiohttp.ClientResponse:
        """The pod's log stream, open: the caller closes it. A 404 (unknown pod) is an error here."""
        response = await self._client().get(
            f"{self._base}/pods/{pod_id}/logs",
            params=params,
            headers={**self._headers(), "Accept": "text/event-stream"},
        )
        if response.status >= 400:
            try:
                raise await api_error(response)
            finally:
                response.release()
        return response

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


async def server_sent_events(content: aiohttp.StreamReader) -> AsyncGenerator[LogEvent, None]:
    """The log events of an SSE stream, as they come; comments, `id:`, `event:` and `retry:` are skipped."""
    data: list[str] = []
    while True:
        raw = await content.readline()
        if not raw:
            return
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if line:
            field, _, value = line.partition(":")
            if field == "data":
                data.append(value.removeprefix(" "))
            continue
        if data:
            event = _log_event("\n".join(data))
            data = []
            if event is not None:
                yield event


def _log_event(payload: str) -> LogEvent | None:
    try:
        document = json.loads(payload)
    except ValueError:
        return LogEvent(None, "container", payload)  # not the documented shape: keep the text
    if not isinstance(document, dict):
        return None
    return LogEvent(
        parse_timestamp(document.get("ts"), assume_utc=False),
        str(document.get("source") or ""),
        str(document.get("line", "")),
    )
