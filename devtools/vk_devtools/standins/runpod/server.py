"""A stand-in for RunPod's REST API v2 (pods, logs, GPU catalog) and its HTTPS proxy, for offline tests.

Written from RunPod's published API reference (the OpenAPI 3.1 document of
`https://api.runpod.io/v2`, as stored in runpod/docs at commit 098c7fb, 2026-08-18; see
`runpod_schema`), it answers as the reference says the real API does:

- **auth**: `Authorization: Bearer <key>`; missing, malformed or wrong keys get 401 problem documents;
- **validation**: unknown fields and wrong types in a body are 422 with an `errors` list; handler rules
  (exactly one of `gpu`/`cpu`, a GPU type the catalog lacks, more GPUs than a machine has, no stock) are
  400, as the reference's table of create failures describes;
- **pods** (`GET/POST /v2/pods`, `GET/PATCH/DELETE /v2/pods/{id}`): created PROVISIONING, then STARTING,
  then RUNNING after configurable delays (or held, to be moved by hand); EXITED, ERROR and TERMINATED by
  the control API; a deleted pod is gone (404);
- **logs** (`GET /v2/pods/{id}/logs`): Server-Sent Events with `id:` and a JSON `data:` of `ts`,
  `source` (`container` or `system`) and `line`; `tail`, `since` and `Last-Event-ID` as documented; the
  stream stays open and carries new lines until the pod is deleted;
- **catalog** (`GET /v2/catalog/gpus`): types with per-cloud prices and ceilings; availability with
  `include=AVAILABILITY&product=POD`, which may be set per GPU and cloud through the control API;
- **proxy**: each RUNNING pod serves every `<port>/http` it exposes as a real HTTP app on its own local
  port, reached through one front that stands in for `https://<podId>-<port>.proxy.runpod.net`:
  `http://127.0.0.1:<front>/<podId>-<port>/<path>` (or any path with `Host: <podId>-<port>.proxy.runpod.net`);
  the provider's `proxy_url_template` is `FakeRunPod.proxy_url_template`;
- **faults on demand** (`/_control`, no auth): a status (5xx, 429 with `Retry-After`, or any), a request
  that hangs until faults are cleared (a timeout), a dropped connection, a request carried out whose
  answer is lost; pods that vanish; pods forced into ERROR with a message (written to the pod's system
  log, as RunPod's Pod has no message field); and a seeded fraction of all requests failing at random, the
  kinds mixed (`random_faults`). Each request's record names the fault it was served, if any.

Everything is in one process: `FakeRunPod` is started in the test's event loop, `control` drives it
over HTTP (the same API an out-of-process user would call; `python -m vk_devtools.standins.runpod.server`
runs it standalone). It lives in the package, not under tests/, so integration tests and development
clusters can use it as well, and because it is type-checked with the rest.

Not simulated: CPU pods, templates, network volumes, pod actions (`/action`), clusters, billing, the
`RateLimit` headers, and any rate limiting other than injected 429s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import hmac
import json
import logging
import re
import secrets
import signal
import string
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from datetime import UTC, datetime
from http import HTTPStatus
from pathlib import Path
from typing import Any, Literal

import aiohttp
from aiohttp import web
from aiohttp.typedefs import Handler

from vk_devtools.standins.faults import RANDOM_KINDS, RandomFaults
from vk_devtools.standins.runpod.schema import validate_create_pod, validate_update_pod
from vk_devtools.standins.runpod.workloads import token_pod_app

logger = logging.getLogger(__name__)

API_PREFIX = "/v2"
CONTROL_PREFIX = "/_control"
POD_STATUSES = ("PROVISIONING", "STARTING", "RUNNING", "EXITED", "ERROR", "TERMINATED")
AVAILABILITY_LEVELS = ("NONE", "LOW", "MEDIUM", "HIGH")
CLOUDS = ("SECURE", "COMMUNITY")
MAX_HTTP_PORTS = 10
MAX_LOG_TAIL = 5000
DEFAULT_LOG_TAIL = 100
_ACTIONS = {
    "PROVISIONING": ["stop", "terminate"],
    "STARTING": ["stop", "terminate"],
    "RUNNING": ["stop", "restart", "terminate"],
    "EXITED": ["start", "terminate"],
    "ERROR": ["start", "terminate"],
    "TERMINATED": [],
}
_PORT = re.compile(r"^(\d+)/(http|tcp)$")
_FRONT_PATH = re.compile(r"^/([a-z0-9]+)-(\d+)(/.*)?$")
_FRONT_HOST = re.compile(r"^([a-z0-9]+)-(\d+)\.proxy\.runpod\.net(?::\d+)?$")
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade", "host"}
)
_POD_ID_ALPHABET = string.ascii_lowercase + string.digits

FaultKind = Literal["status", "timeout", "disconnect", "lose_answer"]


@dataclasses.dataclass(frozen=True, slots=True)
class FakeGpuType:
    id: str
    name: str
    memory_gb: int
    price_secure: float
    price_community: float
    max_secure: int
    """The largest GPU count of one machine in the secure cloud; 0: not offered there."""
    max_community: int
    manufacturer: str = "NVIDIA"
    pool: str | None = None
    cuda_versions: tuple[str, ...] = ("12.8", "12.6")


@dataclasses.dataclass(frozen=True, slots=True)
class FakeDataCenter:
    id: str
    name: str


DEFAULT_GPU_TYPES = (
    FakeGpuType("NVIDIA GeForce RTX 4090", "RTX 4090", 24, 0.69, 0.34, 8, 4, pool="ADA_24"),
    FakeGpuType("NVIDIA A100 80GB PCIe", "A100 PCIe", 80, 1.64, 1.19, 8, 8, pool="AMPERE_80"),
    FakeGpuType("NVIDIA H100 80GB HBM3", "H100 SXM", 80, 2.99, 0.0, 8, 0, pool="HOPPER_141"),
)
DEFAULT_DATA_CENTERS = (FakeDataCenter("US-KS-2", "US Kansas 2"), FakeDataCenter("EU-RO-1", "EU Romania 1"))


@dataclasses.dataclass(frozen=True, slots=True)
class LogEvent:
    seq: int
    ts: datetime
    source: str
    line: str

    @property
    def event_id(self) -> str:
        return f"{rfc3339(self.ts)}/{self.seq:012d}"


@dataclasses.dataclass(frozen=True, slots=True)
class ServedPod:
    """What a pod's HTTP app knows of its pod; `log` writes a container log line."""

    id: str
    name: str
    image: str
    port: int
    env: Mapping[str, str]
    log: Callable[[str], None]


PodAppFactory = Callable[[ServedPod], web.Application]


def echo_app(pod: ServedPod) -> web.Application:
    """The default app behind each pod's proxy address: `/healthz`, and JSON about the request elsewhere."""

    async def handle(request: web.Request) -> web.Response:
        pod.log(f"{request.method} {request.path_qs}")
        if request.path == "/healthz":
            return web.Response(text="ok")
        body = {
            "pod_id": pod.id,
            "name": pod.name,
            "port": pod.port,
            "method": request.method,
            "path": request.path_qs,
            "body": (await request.read()).decode(errors="replace"),
            "env": dict(pod.env),
        }
        return web.json_response(body, headers={"X-Served-By": pod.id})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


@dataclasses.dataclass(slots=True)
class RecordedRequest:
    """One API request as the fake saw it (never its credentials)."""

    method: str
    path: str
    query: dict[str, str]
    at: float
    """The fake's monotonic clock (loop time) when the request arrived."""
    authorization: str
    """ok, missing, malformed or invalid."""
    body: Any = None
    status: int | None = None
    """None while the request is being answered (or hangs)."""
    fault: str | None = None
    """The kind of fault injected into this request (a `random_faults` kind for random ones), if any."""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(slots=True)
class _Fault:
    id: int
    kind: FaultKind
    method: str
    path: re.Pattern[str]
    status: int
    detail: str
    retry_after: str | None
    remaining: int | None
    hang_seconds: float | None = None
    """For a timeout: answer 504 after this long rather than when released. For a lost answer: hold
    the answer back this long rather than drop the connection."""
    random_kind: str | None = None

    def matches(self, request: web.Request) -> bool:
        return (
            self.remaining != 0
            and self.method in ("*", request.method)
            and self.path.search(request.path) is not None
        )


@dataclasses.dataclass(slots=True)
class _Pod:
    id: str
    name: str
    image: str
    args: str
    disk: int
    ports: list[str]
    env: dict[str, str]
    registry: str | None
    gpu_id: str
    gpu_count: int
    cloud: str
    data_center_id: str
    price_per_gpu: float
    created_at: datetime
    status: str = "PROVISIONING"
    started_at: datetime | None = None
    machine: asyncio.Task[None] | None = None
    servers: dict[int, tuple[web.AppRunner, int]] = dataclasses.field(default_factory=dict)
    logs: list[LogEvent] = dataclasses.field(default_factory=list)
    log_waiter: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    gone: bool = False

    def http_ports(self) -> list[int]:
        return [
            int(match.group(1)) for port in self.ports if (match := _PORT.match(port)) and match[2] == "http"
        ]


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _problem(
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


def _random_fault(plan: RandomFaults, request: web.Request) -> _Fault | None:
    """The random plan's draw for this request as a fault to serve (matching scripted ones come first)."""
    drawn = plan.draw(request.method, request.path)
    if drawn is None:
        return None
    return _Fault(
        id=0,
        kind=drawn.kind,
        method="*",
        path=re.compile(""),
        status=drawn.status,
        detail=drawn.detail,
        retry_after=drawn.retry_after,
        remaining=None,
        hang_seconds=drawn.hang_seconds,
        random_kind=drawn.random_kind,
    )


class FakeRunPod:
    """The fake API and proxy front, on ephemeral local ports. Use as `async with FakeRunPod() as fake`."""

    def __init__(
        self,
        *,
        api_key: str = "rp_fake_0123456789abcdef",
        provisioning_seconds: float = 0.05,
        starting_seconds: float = 0.05,
        auto_advance: bool = True,
        gpu_types: Sequence[FakeGpuType] = DEFAULT_GPU_TYPES,
        data_centers: Sequence[FakeDataCenter] = DEFAULT_DATA_CENTERS,
        pod_app: PodAppFactory = echo_app,
        host: str = "127.0.0.1",
    ) -> None:
        """`auto_advance=False` holds new pods in PROVISIONING until the control API moves them."""
        self.api_key = api_key
        self.provisioning_seconds = provisioning_seconds
        self.starting_seconds = starting_seconds
        self.auto_advance = auto_advance
        self.gpu_types = {gpu.id: gpu for gpu in gpu_types}
        self.data_centers = {center.id: center for center in data_centers}
        self._pod_app = pod_app
        self._host = host
        self._pods: dict[str, _Pod] = {}
        self._faults: list[_Fault] = []
        self._fault_ids = 0
        self._random_faults: RandomFaults | None = None
        self._release = asyncio.Event()
        self._stock: dict[tuple[str, str], str] = {}
        self.requests: list[RecordedRequest] = []
        self._log_seq = 0
        self._api_runner: web.AppRunner | None = None
        self._front_runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._api_port = 0
        self._front_port = 0
        self._control: FakeRunPodControl | None = None
        self._machines: set[asyncio.Task[None]] = set()

    def __repr__(self) -> str:
        return f"FakeRunPod(api_url={self.api_url!r}, pods={len(self._pods)})"

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        api = web.Application(middlewares=[self._api_middleware])
        api.router.add_get(f"{API_PREFIX}/pods", self._list_pods)
        api.router.add_post(f"{API_PREFIX}/pods", self._create_pod)
        api.router.add_get(f"{API_PREFIX}/pods/{{id}}", self._get_pod)
        api.router.add_patch(f"{API_PREFIX}/pods/{{id}}", self._update_pod)
        api.router.add_delete(f"{API_PREFIX}/pods/{{id}}", self._delete_pod)
        api.router.add_get(f"{API_PREFIX}/pods/{{id}}/logs", self._pod_logs)
        api.router.add_get(f"{API_PREFIX}/catalog/gpus", self._list_gpu_types)
        api.router.add_route("*", f"{API_PREFIX}/{{tail:.*}}", self._no_route)
        api.router.add_post(f"{CONTROL_PREFIX}/faults", self._control_add_fault)
        api.router.add_delete(f"{CONTROL_PREFIX}/faults", self._control_clear_faults)
        api.router.add_post(f"{CONTROL_PREFIX}/random-faults", self._control_random_faults)
        api.router.add_get(f"{CONTROL_PREFIX}/random-faults", self._control_random_fault_stats)
        api.router.add_get(f"{CONTROL_PREFIX}/requests", self._control_requests)
        api.router.add_delete(f"{CONTROL_PREFIX}/requests", self._control_forget_requests)
        api.router.add_get(f"{CONTROL_PREFIX}/pods", self._control_pods)
        api.router.add_post(f"{CONTROL_PREFIX}/pods/{{id}}/status", self._control_set_status)
        api.router.add_delete(f"{CONTROL_PREFIX}/pods/{{id}}", self._control_vanish)
        api.router.add_post(f"{CONTROL_PREFIX}/stock", self._control_stock)
        front = web.Application()
        front.router.add_route("*", "/{tail:.*}", self._front)
        self._session = aiohttp.ClientSession(auto_decompress=False)
        self._api_runner, self._api_port = await self._serve(api)
        self._front_runner, self._front_port = await self._serve(front)
        self._control = FakeRunPodControl(self.control_url, session=self._session)

    async def _serve(self, app: web.Application) -> tuple[web.AppRunner, int]:
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, self._host, 0)
        await site.start()
        return runner, int(runner.addresses[0][1])

    async def close(self) -> None:
        self._release.set()
        for pod in list(self._pods.values()):
            await self._remove(pod)
        if self._machines:
            await asyncio.wait(list(self._machines))
        for runner in (self._front_runner, self._api_runner):
            if runner is not None:
                await runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def __aenter__(self) -> FakeRunPod:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- addresses -----------------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        return f"http://{self._host}:{self._api_port}{API_PREFIX}"

    @property
    def control_url(self) -> str:
        return f"http://{self._host}:{self._api_port}{CONTROL_PREFIX}"

    @property
    def proxy_url_template(self) -> str:
        """What the provider's `proxy_url_template` should be to reach pods through this fake."""
        return f"http://{self._host}:{self._front_port}/{{pod_id}}-{{port}}"

    @property
    def control(self) -> FakeRunPodControl:
        if self._control is None:
            raise RuntimeError("the fake is not started")
        return self._control

    # -- the API -------------------------------------------------------------------------------

    @web.middleware
    async def _api_middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if not request.path.startswith(API_PREFIX + "/"):
            return await handler(request)
        body: Any = None
        if request.can_read_body:
            raw = await request.read()
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode(errors="replace")
        authorization = self._authorization(request)
        record = RecordedRequest(
            request.method,
            request.path,
            dict(request.query),
            asyncio.get_running_loop().time(),
            authorization,
            body,
        )
        self.requests.append(record)
        fault = self._take_fault(request)
        if fault is not None:
            record.fault = fault.random_kind or fault.kind
        response = (
            None if fault is None or fault.kind == "lose_answer" else await self._faulted(request, fault)
        )
        if response is None and authorization != "ok":
            detail = {"missing": "missing bearer token", "malformed": "malformed bearer token"}
            response = _problem(401, detail.get(authorization, "invalid api key"))
        if response is None:
            response = await handler(request)
        record.status = response.status
        if fault is not None and fault.kind == "lose_answer" and fault.hang_seconds is not None:
            await asyncio.sleep(fault.hang_seconds)  # done, but the answer comes after the client gave up
        elif fault is not None and fault.kind == "lose_answer" and request.transport is not None:
            request.transport.abort()  # done, but the client never hears of it
        return response

    def _authorization(self, request: web.Request) -> str:
        header = request.headers.get("Authorization")
        if header is None:
            return "missing"
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return "malformed"
        if not hmac.compare_digest(token.encode(), self.api_key.encode()):
            return "invalid"
        return "ok"

    def _take_fault(self, request: web.Request) -> _Fault | None:
        fault = next((fault for fault in self._faults if fault.matches(request)), None)
        if fault is not None and fault.remaining is not None:
            fault.remaining -= 1
        if fault is None and self._random_faults is not None:
            fault = _random_fault(self._random_faults, request)
        return fault

    async def _faulted(self, request: web.Request, fault: _Fault) -> web.StreamResponse:
        if fault.kind == "timeout":
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(fault.hang_seconds):  # None: until released
                    await self._release.wait()
            return _problem(504, "released after an injected hang")
        if fault.kind == "disconnect":
            if request.transport is not None:
                request.transport.abort()
            return _problem(503, "connection dropped")
        headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else None
        return _problem(fault.status, fault.detail, headers=headers)

    async def _no_route(self, request: web.Request) -> web.Response:
        return _problem(404, f"no route for {request.method} {request.path}")

    def _find(self, request: web.Request) -> _Pod | None:
        return self._pods.get(request.match_info["id"])

    async def _list_pods(self, request: web.Request) -> web.Response:
        include = request.query.get("includeClusterPods", "false")
        if include not in ("true", "false"):
            return _problem(400, "includeClusterPods must be true or false")
        pods = sorted(self._pods.values(), key=lambda pod: pod.created_at)
        return web.json_response({"pods": [self._pod_json(pod) for pod in pods]})

    async def _get_pod(self, request: web.Request) -> web.Response:
        pod = self._find(request)
        if pod is None:
            return _problem(404, "pod not found")
        return web.json_response(self._pod_json(pod))

    async def _create_pod(self, request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.read())
        except ValueError:
            return _problem(400, "request body is not valid JSON")
        problems = validate_create_pod(body)
        if problems:
            return _problem(422, "Request validation failed.", errors=problems)
        refusal = self._refuse_create(body)
        if refusal is not None:
            return refusal
        gpu_config = body["gpu"]
        gpu = self.gpu_types[gpu_config["id"]]
        cloud = body.get("cloud", "SECURE")
        now = datetime.now(UTC)
        pod = _Pod(
            id=self._new_pod_id(),
            name=body["name"],
            image=body["image"],
            args=body.get("args", ""),
            disk=body.get("disk", 20),
            ports=list(body.get("ports", [])),
            env=dict(body.get("env", {})),
            registry=body.get("registry"),
            gpu_id=gpu.id,
            gpu_count=gpu_config.get("count", 1),
            cloud=cloud,
            data_center_id=self._place(body),
            price_per_gpu=gpu.price_secure if cloud == "SECURE" else gpu.price_community,
            created_at=now,
        )
        self._pods[pod.id] = pod
        self._log(pod, "system", f"provisioning {pod.gpu_count} x {gpu.id} in {pod.data_center_id}")
        if self.auto_advance:
            self._start_machine(pod, "PROVISIONING")
        return web.json_response(self._pod_json(pod), status=201)

    def _refuse_create(self, body: dict[str, Any]) -> web.Response | None:
        """The handler-level rules (400; 404 for a template), after the schema has passed."""
        if "templateId" in body:
            return _problem(404, f"template {body['templateId']} not found")
        broken = self._broken_create_rule(body)
        if broken is not None:
            return _problem(400, broken)
        return self._refuse_gpu(body["gpu"], body.get("cloud", "SECURE"))

    def _broken_create_rule(self, body: dict[str, Any]) -> str | None:
        if ("gpu" in body) == ("cpu" in body):
            return "exactly one of gpu or cpu must be set"
        if "cpu" in body:
            return "CPU pods are not simulated by this fake"
        mounts = body.get("mounts", {})
        if "persistent" in mounts and "network" in mounts:
            return "at most one of mounts.persistent and mounts.network may be set"
        unknown_centers = sorted(set(body.get("dataCenterIds", [])) - set(self.data_centers))
        if unknown_centers:
            return f"unknown data centers: {', '.join(unknown_centers)}"
        return self._port_problem(body.get("ports", []))

    def _refuse_gpu(self, config: dict[str, Any], cloud: str) -> web.Response | None:
        gpu = self.gpu_types.get(config["id"])
        if gpu is None:
            return _problem(400, f"GPU type {config['id']!r} does not exist")
        count = config.get("count", 1)
        ceiling = gpu.max_secure if cloud == "SECURE" else gpu.max_community
        if ceiling == 0:
            return _problem(400, f"{gpu.id} is not offered in the {cloud} cloud")
        if count > ceiling:
            return _problem(400, f"{gpu.id} machines in the {cloud} cloud have at most {ceiling} GPUs")
        if self._availability(gpu, cloud, count) == "NONE":
            return _problem(
                400, f"There are no instances currently available for {count} x {gpu.id} ({cloud})"
            )
        return None

    @staticmethod
    def _port_problem(ports: list[str]) -> str | None:
        http = 0
        for port in ports:
            match = _PORT.match(port)
            if match is None:
                return f"port {port!r} is not formatted as <port>/http or <port>/tcp"
            number = int(match.group(1))
            if not 1 <= number <= 65535 and not (match.group(2) == "tcp" and number > 70000):
                return f"port {port!r} is out of range"
            http += match.group(2) == "http"
        if http > MAX_HTTP_PORTS:
            return f"at most {MAX_HTTP_PORTS} HTTP ports may be exposed, not {http}"
        return None

    def _place(self, body: dict[str, Any]) -> str:
        wanted = body.get("dataCenterIds") or list(self.data_centers)
        return str(wanted[0])

    def _new_pod_id(self) -> str:
        while True:
            pod_id = "".join(secrets.choice(_POD_ID_ALPHABET) for _ in range(14))
            if pod_id not in self._pods:
                return pod_id

    async def _update_pod(self, request: web.Request) -> web.Response:
        pod = self._find(request)
        if pod is None:
            return _problem(404, "pod not found")
        try:
            body = json.loads(await request.read())
        except ValueError:
            return _problem(400, "request body is not valid JSON")
        problems = validate_update_pod(body)
        if problems:
            return _problem(422, "Request validation failed.", errors=problems)
        if "templateId" in body:
            return _problem(404, f"template {body['templateId']} not found")
        restart = any(key in body for key in ("image", "args", "env", "ports")) and pod.status == "RUNNING"
        for key in ("name", "image", "args", "disk", "registry"):
            if key in body:
                setattr(pod, key, body[key])
        if "env" in body:
            pod.env = dict(body["env"])
        if "ports" in body:
            port_problem = self._port_problem(body["ports"])
            if port_problem is not None:
                return _problem(400, port_problem)
            pod.ports = list(body["ports"])
        if restart:
            self._stop_machine(pod)
            await self._set_status(pod, "STARTING")
            if self.auto_advance:
                self._start_machine(pod, "STARTING")
        return web.json_response(self._pod_json(pod))

    async def _delete_pod(self, request: web.Request) -> web.Response:
        pod = self._find(request)
        if pod is None:
            return _problem(404, "pod not found")
        await self._remove(pod)
        return web.Response(status=204)

    async def _remove(self, pod: _Pod) -> None:
        self._stop_machine(pod)
        self._pods.pop(pod.id, None)
        pod.gone = True
        await self._stop_servers(pod)
        self._wake_log_readers(pod)

    def _pod_json(self, pod: _Pod) -> dict[str, Any]:
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
            "actions": list(_ACTIONS[pod.status]),
            "mounts": {},
            "gpu": {"id": pod.gpu_id, "count": pod.gpu_count},
            "cloud": pod.cloud,
            "dataCenterId": pod.data_center_id,
            "cudaVersion": self.gpu_types[pod.gpu_id].cuda_versions[0]
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

    # -- the state machine ---------------------------------------------------------------------

    def _start_machine(self, pod: _Pod, from_status: str) -> None:
        task = asyncio.create_task(self._run_machine(pod, from_status), name=f"fake-runpod-{pod.id}")
        pod.machine = task
        self._machines.add(task)
        task.add_done_callback(self._machines.discard)

    async def _run_machine(self, pod: _Pod, from_status: str) -> None:
        """PROVISIONING -> STARTING -> RUNNING with the configured delays (the simulated provider's time)."""
        try:
            if from_status == "PROVISIONING":
                await asyncio.sleep(self.provisioning_seconds)
                await self._set_status(pod, "STARTING")
            await asyncio.sleep(self.starting_seconds)
            await self._set_status(pod, "RUNNING")
        except Exception:
            logger.exception("the fake's state machine for pod %s failed", pod.id)
            await self._set_status(pod, "ERROR", "the fake could not start the pod's servers")

    def _stop_machine(self, pod: _Pod) -> None:
        if pod.machine is not None and pod.machine is not asyncio.current_task():
            pod.machine.cancel()
        pod.machine = None

    async def _set_status(self, pod: _Pod, status: str, message: str | None = None) -> None:
        if status == "RUNNING":
            await self._start_servers(pod)
            pod.started_at = datetime.now(UTC)
        else:
            await self._stop_servers(pod)
        pod.status = status
        lines = {
            "PROVISIONING": "waiting for a machine",
            "STARTING": f"starting container from image {pod.image}",
            "RUNNING": "container is running",
            "EXITED": "container exited",
            "ERROR": "container is in an unrecoverable error state",
            "TERMINATED": "pod terminated",
        }
        self._log(pod, "system", message or lines[status])

    async def _start_servers(self, pod: _Pod) -> None:
        for port in pod.http_ports():
            if port in pod.servers:
                continue
            served = ServedPod(
                pod.id,
                pod.name,
                pod.image,
                port,
                dict(pod.env),
                lambda line: self._log(pod, "container", line),
            )
            pod.servers[port] = await self._serve(self._pod_app(served))

    async def _stop_servers(self, pod: _Pod) -> None:
        servers, pod.servers = pod.servers, {}
        for runner, _ in servers.values():
            await runner.cleanup()

    # -- logs ----------------------------------------------------------------------------------

    def _log(self, pod: _Pod, source: str, line: str) -> None:
        self._log_seq += 1
        pod.logs.append(LogEvent(self._log_seq, datetime.now(UTC), source, line))
        self._wake_log_readers(pod)

    @staticmethod
    def _wake_log_readers(pod: _Pod) -> None:
        waiter, pod.log_waiter = pod.log_waiter, asyncio.Event()
        waiter.set()

    async def _pod_logs(self, request: web.Request) -> web.StreamResponse:
        pod = self._find(request)
        if pod is None:
            return _problem(404, "pod not found")
        try:
            select = _log_selection(request)
        except ValueError as error:
            return _problem(400, str(error))
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",
            }
        )
        await response.prepare(request)
        sent = pod.logs[-1].seq if pod.logs else 0  # the backfill ends here; later lines stream live
        events = select(pod.logs)
        with contextlib.suppress(ConnectionError, aiohttp.ClientConnectionResetError):
            while True:
                for event in events:
                    payload = json.dumps(
                        {"ts": rfc3339(event.ts), "source": event.source, "line": event.line}
                    )
                    await response.write(f"id: {event.event_id}\ndata: {payload}\n\n".encode())
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

    def _availability(self, gpu: FakeGpuType, cloud: str, count: int) -> str:
        ceiling = gpu.max_secure if cloud == "SECURE" else gpu.max_community
        if count > ceiling:
            return "NONE"
        return self._stock.get((gpu.id, cloud), "HIGH")

    async def _list_gpu_types(self, request: web.Request) -> web.Response:
        try:
            query = _catalog_query(request)
        except ValueError as error:
            return _problem(400, str(error))
        gpus = []
        for gpu in self.gpu_types.values():
            entry: dict[str, Any] = {
                "id": gpu.id,
                "name": gpu.name,
                "pool": gpu.pool,
                "manufacturer": gpu.manufacturer,
                "memory": gpu.memory_gb,
                "secure": gpu.max_secure > 0,
                "community": gpu.max_community > 0,
                "price": {"secure": gpu.price_secure, "community": gpu.price_community},
                "maxCount": {"secure": gpu.max_secure, "community": gpu.max_community},
            }
            if query.availability:
                level = self._availability(gpu, query.cloud, query.count)
                entry["availability"] = level
                if level != "NONE":
                    entry["dataCenters"] = [
                        {"id": center.id, "name": center.name, "availability": level}
                        for center in self.data_centers.values()
                    ]
                    entry["cudaVersions"] = [
                        {"version": version, "available": True} for version in gpu.cuda_versions
                    ]
            gpus.append(entry)
        return web.json_response({"gpus": gpus})

    # -- the proxy front -----------------------------------------------------------------------

    async def _front(self, request: web.Request) -> web.StreamResponse:
        target = _front_target(request)
        if target is None:
            return web.Response(status=404, text="not a pod proxy address\n")
        pod_id, port, path = target
        pod = self._pods.get(pod_id)
        if pod is None:
            return web.Response(status=404, text=f"pod {pod_id} not found\n")
        server = pod.servers.get(port)
        if server is None or self._session is None:
            return web.Response(status=502, text=f"pod {pod_id} is not serving port {port}\n")
        headers = {key: value for key, value in request.headers.items() if key.lower() not in _HOP_BY_HOP}
        url = f"http://{self._host}:{server[1]}{path}"
        try:
            async with self._session.request(
                request.method,
                url,
                headers=headers,
                data=await request.read() if request.can_read_body else None,
                allow_redirects=False,
            ) as upstream:
                response = web.StreamResponse(
                    status=upstream.status,
                    reason=upstream.reason,
                    headers={k: v for k, v in upstream.headers.items() if k.lower() not in _HOP_BY_HOP},
                )
                await response.prepare(request)
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
                return response
        except aiohttp.ClientConnectionError as error:
            return web.Response(status=502, text=f"pod {pod_id} port {port}: {error}\n")

    # -- control -------------------------------------------------------------------------------

    async def _control_add_fault(self, request: web.Request) -> web.Response:
        spec = await request.json()
        self._fault_ids += 1
        fault = _Fault(
            id=self._fault_ids,
            kind=spec.get("kind", "status"),
            method=spec.get("method", "*"),
            path=re.compile(spec.get("path", ".*")),
            status=int(spec.get("status", 503)),
            detail=str(spec.get("detail", "injected failure")),
            retry_after=None if spec.get("retry_after") is None else str(spec["retry_after"]),
            remaining=spec.get("times", 1),
        )
        if fault.kind not in ("status", "timeout", "disconnect", "lose_answer"):
            return web.json_response({"error": f"unknown fault kind {fault.kind!r}"}, status=400)
        if self._release.is_set():
            self._release = asyncio.Event()
        self._faults.append(fault)
        return web.json_response({"id": fault.id})

    async def _control_clear_faults(self, request: web.Request) -> web.Response:
        self._faults.clear()
        if self._random_faults is not None:
            self._random_faults.active = False  # its counts stay readable
        self._release.set()
        return web.json_response({})

    async def _control_random_faults(self, request: web.Request) -> web.Response:
        try:
            plan = RandomFaults.from_json(await request.json())
        except (KeyError, TypeError, ValueError) as error:
            return web.json_response({"error": f"bad random fault plan: {error}"}, status=400)
        if self._release.is_set():
            self._release = asyncio.Event()
        self._random_faults = plan
        return web.json_response(plan.stats())

    async def _control_random_fault_stats(self, request: web.Request) -> web.Response:
        return web.json_response(None if self._random_faults is None else self._random_faults.stats())

    async def _control_requests(self, request: web.Request) -> web.Response:
        return web.json_response([record.to_json() for record in self.requests])

    async def _control_forget_requests(self, request: web.Request) -> web.Response:
        self.requests.clear()
        return web.json_response({})

    async def _control_pods(self, request: web.Request) -> web.Response:
        return web.json_response([self._pod_json(pod) for pod in self._pods.values()])

    async def _control_set_status(self, request: web.Request) -> web.Response:
        pod = self._find(request)
        if pod is None:
            return web.json_response({"error": "no such pod"}, status=404)
        spec = await request.json()
        status = spec.get("status")
        if status not in POD_STATUSES:
            return web.json_response({"error": f"status must be one of {POD_STATUSES}"}, status=400)
        self._stop_machine(pod)
        await self._set_status(pod, status, spec.get("message"))
        return web.json_response(self._pod_json(pod))

    async def _control_vanish(self, request: web.Request) -> web.Response:
        pod = self._find(request)
        if pod is None:
            return web.json_response({"error": "no such pod"}, status=404)
        await self._remove(pod)
        return web.json_response({})

    async def _control_stock(self, request: web.Request) -> web.Response:
        spec = await request.json()
        level = spec.get("availability")
        if (
            spec.get("gpu") not in self.gpu_types
            or spec.get("cloud") not in CLOUDS
            or level not in AVAILABILITY_LEVELS
        ):
            return web.json_response(
                {"error": "need a known gpu, a cloud and an availability level"}, status=400
            )
        self._stock[(spec["gpu"], spec["cloud"])] = level
        return web.json_response({})


@dataclasses.dataclass(frozen=True, slots=True)
class _LogSelection:
    source: str | None
    tail: int
    since: datetime | None
    after_seq: int | None

    def source_matches(self, event: LogEvent) -> bool:
        return self.source is None or event.source == self.source

    def __call__(self, events: Sequence[LogEvent]) -> list[LogEvent]:
        matching = [event for event in events if self.source_matches(event)]
        if self.after_seq is not None:
            return [event for event in matching if event.seq > self.after_seq]
        if self.since is not None:
            return [event for event in matching if event.ts >= self.since]
        return matching[len(matching) - self.tail :] if self.tail else []


def _log_selection(request: web.Request) -> _LogSelection:
    source = request.query.get("source")
    if source is not None and source not in ("container", "system"):
        raise ValueError("source must be container or system")
    tail_text = request.query.get("tail", str(DEFAULT_LOG_TAIL))
    if not tail_text.isdigit() or int(tail_text) > MAX_LOG_TAIL:
        raise ValueError(f"tail must be an integer from 0 to {MAX_LOG_TAIL}")
    since = _parse_time(request.query["since"], "since") if "since" in request.query else None
    after_seq = None
    last_event_id = request.headers.get("Last-Event-ID")
    if last_event_id:
        _, _, seq = last_event_id.partition("/")
        if not seq.isdigit():
            raise ValueError("Last-Event-ID is not an id this stream sent")
        after_seq = int(seq)
    return _LogSelection(source, int(tail_text), since, after_seq)


def _parse_time(text: str, name: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{name} must be an RFC 3339 date-time") from None
    if moment.tzinfo is None:
        raise ValueError(f"{name} must be an RFC 3339 date-time with a zone")
    return moment


@dataclasses.dataclass(frozen=True, slots=True)
class _CatalogQuery:
    availability: bool
    cloud: str
    count: int


def _catalog_query(request: web.Request) -> _CatalogQuery:
    query = request.query
    include = query.get("include")
    if include is not None and include != "AVAILABILITY":
        raise ValueError("include supports AVAILABILITY only")
    availability = include == "AVAILABILITY"
    if availability != ("product" in query):
        raise ValueError("product is required with include=AVAILABILITY and valid only with it")
    for name in ("count", "cloud", "countryCodes", "cudaVersions", "minCudaVersion"):
        if name in query and not availability:
            raise ValueError(f"{name} is valid only with include=AVAILABILITY")
    products = query.get("product", "POD").split(",")
    if any(product not in ("POD", "CLUSTER", "SERVERLESS") for product in products):
        raise ValueError("product must be POD, CLUSTER or SERVERLESS")
    count_text = query.get("count", "1")
    if not count_text.isdigit() or int(count_text) < 1:
        raise ValueError("count must be an integer >= 1")
    cloud = query.get("cloud", "SECURE")
    if cloud not in CLOUDS:
        raise ValueError("cloud must be SECURE or COMMUNITY")
    return _CatalogQuery(availability, cloud, int(count_text))


def _front_target(request: web.Request) -> tuple[str, int, str] | None:
    """(pod id, port, path with query) from the path prefix `/<podId>-<port>` or the Host header."""
    host = _FRONT_HOST.match(request.headers.get("Host", ""))
    if host is not None:
        return host.group(1), int(host.group(2)), request.path_qs
    path = _FRONT_PATH.match(request.path)
    if path is None:
        return None
    rest = path.group(3) or "/"
    query = f"?{request.query_string}" if request.query_string else ""
    return path.group(1), int(path.group(2)), rest + query


class FakeRunPodControl:
    """The fake's control API over HTTP: faults, forced states, vanishing pods, stock, the request log."""

    def __init__(self, control_url: str, *, session: aiohttp.ClientSession) -> None:
        self._url = control_url.rstrip("/")
        self._session = session

    async def _send(self, method: str, path: str, body: Any = None) -> Any:
        async with self._session.request(method, self._url + path, json=body) as response:
            document = await response.json()
            if response.status >= 400:
                raise RuntimeError(f"fake RunPod control {method} {path}: {response.status} {document}")
            return document

    async def fail(
        self,
        *,
        status: int = 503,
        method: str = "*",
        path: str = ".*",
        times: int | None = 1,
        retry_after: str | float | None = None,
        detail: str = "injected failure",
    ) -> int:
        """Answer the next `times` matching API requests (None: until cleared) with this status."""
        spec = {
            "kind": "status",
            "status": status,
            "method": method,
            "path": path,
            "times": times,
            "retry_after": retry_after,
            "detail": detail,
        }
        return int((await self._send("POST", "/faults", spec))["id"])

    async def hang(self, *, method: str = "*", path: str = ".*", times: int | None = 1) -> int:
        """Let the next matching requests hang (until `clear_faults`): a timeout for the client."""
        spec = {"kind": "timeout", "method": method, "path": path, "times": times}
        return int((await self._send("POST", "/faults", spec))["id"])

    async def disconnect(self, *, method: str = "*", path: str = ".*", times: int | None = 1) -> int:
        """Drop the connection of the next matching requests without an answer."""
        spec = {"kind": "disconnect", "method": method, "path": path, "times": times}
        return int((await self._send("POST", "/faults", spec))["id"])

    async def lose_answer(self, *, method: str = "*", path: str = ".*", times: int | None = 1) -> int:
        """Carry out the next matching requests, then drop their connections before the answer."""
        spec = {"kind": "lose_answer", "method": method, "path": path, "times": times}
        return int((await self._send("POST", "/faults", spec))["id"])

    async def clear_faults(self) -> None:
        """Remove every fault, stop random faults, and release every hanging request."""
        await self._send("DELETE", "/faults")

    async def fail_randomly(
        self,
        fraction: float,
        *,
        seed: int,
        kinds: Sequence[str] = RANDOM_KINDS,
        hang_seconds: float = 1.5,
        retry_after_seconds: float = 1.0,
        method: str = "*",
        path: str = ".*",
    ) -> dict[str, Any]:
        """Fail this fraction of the matching API requests at random, the kinds mixed (see
        `random_faults`), until `clear_faults`; replaces an earlier plan. Returns its `random_fault_stats`."""
        spec = {
            "fraction": fraction,
            "seed": seed,
            "kinds": list(kinds),
            "hang_seconds": hang_seconds,
            "retry_after_seconds": retry_after_seconds,
            "method": method,
            "path": path,
        }
        result: dict[str, Any] = await self._send("POST", "/random-faults", spec)
        return result

    async def random_fault_stats(self) -> dict[str, Any] | None:
        """The seed, the draws made and the faults injected by kind; None if never asked for."""
        result: dict[str, Any] | None = await self._send("GET", "/random-faults")
        return result

    async def requests(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await self._send("GET", "/requests")
        return result

    async def forget_requests(self) -> None:
        await self._send("DELETE", "/requests")

    async def pods(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await self._send("GET", "/pods")
        return result

    async def set_status(self, pod_id: str, status: str, message: str | None = None) -> dict[str, Any]:
        """Move a pod to a status (RUNNING starts its proxy apps); `message` goes to its system log."""
        result: dict[str, Any] = await self._send(
            "POST", f"/pods/{pod_id}/status", {"status": status, "message": message}
        )
        return result

    async def vanish(self, pod_id: str) -> None:
        """Remove a pod without a trace, as if RunPod lost it."""
        await self._send("DELETE", f"/pods/{pod_id}")

    async def set_stock(self, gpu: str, cloud: str, availability: str) -> None:
        await self._send("POST", "/stock", {"gpu": gpu, "cloud": cloud, "availability": availability})


@contextlib.asynccontextmanager
async def running_fake(**options: Any) -> AsyncIterator[FakeRunPod]:
    fake = FakeRunPod(**options)
    await fake.start()
    try:
        yield fake
    finally:
        await fake.close()


POD_APPS: Mapping[str, PodAppFactory] = {"echo": echo_app, "tokens": token_pod_app}
"""What `--pod-app` chooses between: the echo app, or the demo's token server (`demo.runpod_pods`)."""


def _write_addresses(path: Path, addresses: Mapping[str, str]) -> None:
    """Write the JSON of addresses whole (a reader polling for the file never sees half of it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(addresses) + "\n")
    temporary.replace(path)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the fake until interrupted or terminated; print one JSON line with its addresses first.

    The ports are ephemeral; `--addresses-file` also writes that JSON to a file, once every address
    answers, so a supervisor (the development cluster) can wait for it and configure its node from it.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    key = parser.add_mutually_exclusive_group()
    key.add_argument("--api-key", default="rp_fake_0123456789abcdef")
    key.add_argument(
        "--api-key-file", type=Path, help="read the API key from this file (keeps it off the command line)"
    )
    parser.add_argument("--provisioning-seconds", type=float, default=2.0)
    parser.add_argument("--starting-seconds", type=float, default=2.0)
    parser.add_argument(
        "--pod-app",
        choices=sorted(POD_APPS),
        default="echo",
        help="what each RUNNING pod serves on its HTTP ports: an echo app, or the demo's token server",
    )
    parser.add_argument("--addresses-file", type=Path, help="also write the addresses JSON to this file")
    arguments = parser.parse_args(argv)
    api_key: str = arguments.api_key
    if arguments.api_key_file is not None:
        api_key = arguments.api_key_file.read_text().strip()

    async def serve() -> None:
        stop = asyncio.Event()
        # SIGTERM (how `vk-provider dev down` stops components) closes the pods' servers cleanly.
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        async with running_fake(
            api_key=api_key,
            provisioning_seconds=arguments.provisioning_seconds,
            starting_seconds=arguments.starting_seconds,
            pod_app=POD_APPS[arguments.pod_app],
        ) as fake:
            addresses = {
                "api_url": fake.api_url,
                "proxy_url_template": fake.proxy_url_template,
                "control_url": fake.control_url,
            }
            print(json.dumps(addresses), flush=True)
            if arguments.addresses_file is not None:
                _write_addresses(arguments.addresses_file, addresses)
            await stop.wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())


if __name__ == "__main__":
    main()
