"""RunPod's REST API v2 as the stand-in answers it: the aiohttp handlers under `/v2`.

Bearer authentication (401 for a missing, malformed or wrong key); the rate limits per key, when the
profile sets any (429, and `RateLimit` headers on every authenticated answer: `ratelimit`); the pod
calls (list, create, get, update, delete); a pod's log stream as Server-Sent Events; the GPU catalog;
and a problem document (`application/problem+json`) for every refusal: 422 with an `errors` list where
the request schema (`schema`) is broken, 400 for the rules the reference says its handlers enforce and
for no capacity (`capacity`), 403 and 402 for the account (`account`), 404 for what is not there.
"""

from __future__ import annotations

import contextlib
import hmac
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.typedefs import Handler

from vk_devtools.sse import encode_event, open_event_stream
from vk_devtools.standins.runpod.account import account_refusal
from vk_devtools.standins.runpod.capacity import Capacity, CapacityRefusal
from vk_devtools.standins.runpod.catalog import Catalog, catalog_query
from vk_devtools.standins.runpod.pods import ACTIONS, Pod, Pods, log_selection, port_problem, rfc3339
from vk_devtools.standins.runpod.profile import Profile
from vk_devtools.standins.runpod.ratelimit import RateLimiter
from vk_devtools.standins.runpod.schema import validate_create_pod, validate_update_pod

API_PREFIX = "/v2"
_RATE_LIMIT_HEADERS = web.RequestKey("rate_limit_headers", dict[str, str])


def problem(
    status: int, detail: str, *, errors: Sequence[str] = (), headers: Mapping[str, str] | None = None
) -> web.Response:
    body: dict[str, Any] = {"title": _title(status), "status": status, "detail": detail}
    if errors:
        body["errors"] = list(errors)
    return web.Response(
        status=status, text=json.dumps(body), content_type="application/problem+json", headers=headers
    )


def _title(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


class Api:
    """The API of one stand-in over its catalog and its pods, for the key `api_key` returns, under the
    profile `profile` returns (both read for each request, as a test may change them)."""

    def __init__(
        self,
        api_key: Callable[[], str],
        catalog: Catalog,
        pods: Pods,
        *,
        profile: Callable[[], Profile],
        capacity: Capacity,
        limiter: RateLimiter,
    ) -> None:
        self._api_key = api_key
        self._catalog = catalog
        self._pods = pods
        self._profile = profile
        self._capacity = capacity
        self._limiter = limiter

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_get(f"{API_PREFIX}/pods", self._list_pods)
        router.add_post(f"{API_PREFIX}/pods", self._create_pod)
        router.add_get(f"{API_PREFIX}/pods/{{id}}", self._get_pod)
        router.add_patch(f"{API_PREFIX}/pods/{{id}}", self._update_pod)
        router.add_delete(f"{API_PREFIX}/pods/{{id}}", self._delete_pod)
        router.add_get(f"{API_PREFIX}/pods/{{id}}/logs", self._pod_logs)
        router.add_get(f"{API_PREFIX}/catalog/gpus", self._list_gpu_types)
        router.add_route("*", f"{API_PREFIX}/{{tail:.*}}", self._no_route)

    def authorization(self, request: web.Request) -> str:
        """ok, missing, malformed or invalid: what the request's Authorization header is."""
        header = request.headers.get("Authorization")
        if header is None:
            return "missing"
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return "malformed"
        if not hmac.compare_digest(token.encode(), self._api_key().encode()):
            return "invalid"
        return "ok"

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """A 401 for an API request without the right key; a 429 for one over the key's rate limit."""
        if request.path.startswith(API_PREFIX + "/"):
            authorization = self.authorization(request)
            if authorization != "ok":
                detail = {"missing": "missing bearer token", "malformed": "malformed bearer token"}
                return problem(401, detail.get(authorization, "invalid api key"))
            admission = self._limiter.admit(self._api_key())
            if admission is not None:
                request[_RATE_LIMIT_HEADERS] = admission.headers
                if admission.exhausted is not None:
                    exceeded = f"rate limit exceeded for the {admission.exhausted} window"
                    return problem(429, exceeded, headers=admission.headers)
        return await handler(request)

    async def add_rate_limit_headers(self, request: web.Request, response: web.StreamResponse) -> None:
        """The `RateLimit` headers on every answer to an authenticated request (an `on_response_prepare`
        signal, so streamed answers such as the log stream carry them as well)."""
        headers = request.get(_RATE_LIMIT_HEADERS)
        if headers is not None:
            response.headers.update(headers)

    async def _no_route(self, request: web.Request) -> web.Response:
        return problem(404, f"no route for {request.method} {request.path}")

    def _find(self, request: web.Request) -> Pod | None:
        return self._pods.records.get(request.match_info["id"])

    # -- pods ----------------------------------------------------------------------------------

    async def _list_pods(self, request: web.Request) -> web.Response:
        include = request.query.get("includeClusterPods", "false")
        if include not in ("true", "false"):
            return problem(400, "includeClusterPods must be true or false")
        pods = sorted(self._pods.records.values(), key=lambda pod: pod.created_at)
        return web.json_response({"pods": [self.pod_json(pod) for pod in pods]})

    async def _get_pod(self, request: web.Request) -> web.Response:
        pod = self._find(request)
        if pod is None:
            return problem(404, "pod not found")
        return web.json_response(self.pod_json(pod))

    async def _create_pod(self, request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.read())
        except ValueError:
            return problem(400, "request body is not valid JSON")
        problems = validate_create_pod(body)
        if problems:
            return problem(422, "Request validation failed.", errors=problems)
        refusal = self._refuse_create(body)
        if refusal is not None:
            return refusal
        gpu_config = body["gpu"]
        gpu = self._catalog.gpu_types[gpu_config["id"]]
        cloud = body.get("cloud", "SECURE")
        count = gpu_config.get("count", 1)
        refused_by_account = account_refusal(self._profile(), gpu, count, cloud)
        if refused_by_account is not None:
            return problem(*refused_by_account)
        placed = self._capacity.place(
            gpu.id, cloud, body.get("dataCenterIds") or list(self._catalog.data_centers)
        )
        if isinstance(placed, CapacityRefusal):
            return problem(400, placed.detail)
        pod = Pod(
            id=self._pods.new_id(),
            name=body["name"],
            image=body["image"],
            args=body.get("args", ""),
            disk=body.get("disk", 20),
            ports=list(body.get("ports", [])),
            env=dict(body.get("env", {})),
            registry=body.get("registry"),
            gpu_id=gpu.id,
            gpu_count=count,
            cloud=cloud,
            data_center_id=placed,
            price_per_gpu=gpu.price_secure if cloud == "SECURE" else gpu.price_community,
            created_at=datetime.now(UTC),
        )
        self._pods.add(pod)
        return web.json_response(self.pod_json(pod), status=201)

    def _refuse_create(self, body: dict[str, Any]) -> web.Response | None:
        """The handler-level rules (400; 404 for a template), after the schema has passed."""
        if "templateId" in body:
            return problem(404, f"template {body['templateId']} not found")
        broken = self._broken_create_rule(body)
        if broken is None:
            broken = self._catalog.gpu_refusal(body["gpu"], body.get("cloud", "SECURE"))
        return None if broken is None else problem(400, broken)

    def _broken_create_rule(self, body: dict[str, Any]) -> str | None:
        if ("gpu" in body) == ("cpu" in body):
            return "exactly one of gpu or cpu must be set"
        if "cpu" in body:
            return "CPU pods are not simulated by this fake"
        mounts = body.get("mounts", {})
        if "persistent" in mounts and "network" in mounts:
            return "at most one of mounts.persistent and mounts.network may be set"
        unknown_centers = sorted(set(body.get("dataCenterIds", [])) - set(self._catalog.data_centers))
        if unknown_centers:
            return f"unknown data centers: {', '.join(unknown_centers)}"
        return port_problem(body.get("ports", []))

    async def _update_pod(self, request: web.Request) -> web.Response:
        pod = self._find(request)
        if pod is None:
            return problem(404, "pod not found")
        try:
            body = json.loads(await request.read())
        except ValueError:
            return problem(400, "request body is not valid JSON")
        problems = validate_update_pod(body)
        if problems:
            return problem(422, "Request validation failed.", errors=problems)
        if "templateId" in body:
            return problem(404, f"template {body['templateId']} not found")
        restart = any(key in body for key in ("image", "args", "env", "ports")) and pod.status == "RUNNING"
        for key in ("name", "image", "args", "disk", "registry"):
            if key in body:
                setattr(pod, key, body[key])
        if "env" in body:
            pod.env = dict(body["env"])
        if "ports" in body:
            ports_refused = port_problem(body["ports"])
            if ports_refused is not None:
                return problem(400, ports_refused)
            pod.ports = list(body["ports"])
        if restart:
            await self._pods.restart(pod)
        return web.json_response(self.pod_json(pod))

    async def _delete_pod(self, request: web.Request) -> web.Response:
        pod = self._find(request)
        if pod is None:
            return problem(404, "pod not found")
        await self._pods.remove(pod)
        return web.Response(status=204)

    def pod_json(self, pod: Pod) -> dict[str, Any]:
        """The pod as RunPod's API writes a Pod."""
        running = pod.status == "RUNNING"
        uptime = (
            int((datetime.now(UTC) - pod.started_at).total_seconds()) if running and pod.started_at else 0
        )
        return {
            "id": pod.id,
            "name": pod.name,
            "image": pod.image,
            "args": pod.args,
            "disk": pod.disk,
            "ports": list(pod.ports),
            "env": dict(pod.env),
            "registry": pod.registry,
            "status": pod.status,
            "actions": list(ACTIONS[pod.status]),
            "mounts": {},
            "gpu": {"id": pod.gpu_id, "count": pod.gpu_count},
            "cloud": pod.cloud,
            "dataCenterId": pod.data_center_id,
            "cudaVersion": self._catalog.gpu_types[pod.gpu_id].cuda_versions[0]
            if pod.status != "PROVISIONING"
            else None,
            "ssh": {"proxy": None, "direct": None},
            "template": None,
            "cost": round(pod.price_per_gpu * pod.gpu_count, 4)
            if pod.status not in ("EXITED", "TERMINATED")
            else 0.0,
            "locked": False,
            "globalNetworking": {"enabled": False},
            "runtime": {"uptime": uptime, "ports": []} if running else None,
            "createdAt": rfc3339(pod.created_at),
            "startedAt": rfc3339(pod.started_at) if pod.started_at else None,
        }

    # -- logs ----------------------------------------------------------------------------------

    async def _pod_logs(self, request: web.Request) -> web.StreamResponse:
        pod = self._find(request)
        if pod is None:
            return problem(404, "pod not found")
        try:
            select = log_selection(request.query, request.headers.get("Last-Event-ID"))
        except ValueError as error:
            return problem(400, str(error))
        response = await open_event_stream(request)
        sent = pod.logs[-1].seq if pod.logs else 0  # the backfill ends here; later lines stream live
        events = select(pod.logs)
        with contextlib.suppress(ConnectionError, aiohttp.ClientConnectionResetError):
            while True:
                for event in events:
                    payload = json.dumps(
                        {"ts": rfc3339(event.ts), "source": event.source, "line": event.line}
                    )
                    await response.write(encode_event(payload, event_id=event.event_id))
                    sent = event.seq
                if pod.gone:
                    break
                waiter = pod.log_waiter
                events = [event for event in pod.logs if event.seq > sent and select.source_matches(event)]
                if not events:
                    await waiter.wait()
                    events = [
                        event for event in pod.logs if event.seq > sent and select.source_matches(event)
                    ]
            await response.write_eof()
        return response

    # -- the catalog ---------------------------------------------------------------------------

    async def _list_gpu_types(self, request: web.Request) -> web.Response:
        try:
            query = catalog_query(request.query)
        except ValueError as error:
            return problem(400, str(error))
        return web.json_response({"gpus": self._catalog.gpus(query)})
