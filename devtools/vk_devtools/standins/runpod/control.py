"""The stand-in's control plane for tests (`/_control`, no auth), and its client `FakeRunPodControl`.

It records every API request (never its credentials) and serves faults on demand: a status (5xx, 429
with `Retry-After`, or any), a request that hangs until faults are cleared (a timeout), a dropped
connection, a request carried out whose answer is lost, and a seeded fraction of all requests failing at
random, the kinds mixed (`vk_devtools.standins.faults`); each request's record names the fault it was
served, if any.
It also moves pods by hand: into any status (ERROR with a message, written to the pod's system log, as
RunPod's Pod has no message field), or gone without a trace; sets the catalog's stock; scripts capacity
refusals that contradict the catalog (`capacity`); and reads or changes the stand-in's `Profile`
(timings, proxy timeout, rate limits, balance, denied pools) while it runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal

import aiohttp
from aiohttp import web
from aiohttp.typedefs import Handler

from vk_devtools.standins.faults import RANDOM_KINDS, RandomFaults
from vk_devtools.standins.runpod.api import API_PREFIX, Api, problem
from vk_devtools.standins.runpod.capacity import NO_CAPACITY_DETAIL, Capacity
from vk_devtools.standins.runpod.catalog import AVAILABILITY_LEVELS, CLOUDS, Catalog
from vk_devtools.standins.runpod.pods import POD_STATUSES, Pod, Pods
from vk_devtools.standins.runpod.profile import Profile, RateLimitWindow

CONTROL_PREFIX = "/_control"

FaultKind = Literal["status", "timeout", "disconnect", "lose_answer"]


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
    """The kind of fault injected into this request (a `faults` kind for random ones), if any."""

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


class ControlPlane:
    """The control plane of one stand-in: its routes, and the middleware that records and faults requests."""

    def __init__(
        self,
        api: Api,
        pods: Pods,
        catalog: Catalog,
        *,
        capacity: Capacity,
        profile: Callable[[], Profile],
        set_profile: Callable[[Profile], None],
    ) -> None:
        self._api = api
        self._pods = pods
        self._catalog = catalog
        self._capacity = capacity
        self._profile = profile
        self._set_profile = set_profile
        self.requests: list[RecordedRequest] = []
        self._faults: list[_Fault] = []
        self._fault_ids = 0
        self._random_faults: RandomFaults | None = None
        self._release = asyncio.Event()

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_post(f"{CONTROL_PREFIX}/faults", self._add_fault)
        router.add_delete(f"{CONTROL_PREFIX}/faults", self._clear_faults)
        router.add_post(f"{CONTROL_PREFIX}/random-faults", self._set_random_faults)
        router.add_get(f"{CONTROL_PREFIX}/random-faults", self._random_fault_stats)
        router.add_get(f"{CONTROL_PREFIX}/requests", self._requests)
        router.add_delete(f"{CONTROL_PREFIX}/requests", self._forget_requests)
        router.add_get(f"{CONTROL_PREFIX}/pods", self._list_pods)
        router.add_post(f"{CONTROL_PREFIX}/pods/{{id}}/status", self._set_status)
        router.add_delete(f"{CONTROL_PREFIX}/pods/{{id}}", self._vanish)
        router.add_post(f"{CONTROL_PREFIX}/stock", self._set_stock)
        router.add_post(f"{CONTROL_PREFIX}/capacity-refusals", self._add_capacity_refusal)
        router.add_get(f"{CONTROL_PREFIX}/capacity-refusals", self._capacity_refusals)
        router.add_delete(f"{CONTROL_PREFIX}/capacity-refusals", self._clear_capacity_refusals)
        router.add_get(f"{CONTROL_PREFIX}/profile", self._get_profile)
        router.add_patch(f"{CONTROL_PREFIX}/profile", self._patch_profile)

    def release(self) -> None:
        """Let every hanging request go (their answers are 504s)."""
        self._release.set()

    # -- faults and the request record ---------------------------------------------------------

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Records each API request and serves it its fault, if one is due (before authentication)."""
        if not request.path.startswith(API_PREFIX + "/"):
            return await handler(request)
        body: Any = None
        if request.can_read_body:
            raw = await request.read()
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode(errors="replace")
        record = RecordedRequest(
            request.method,
            request.path,
            dict(request.query),
            asyncio.get_running_loop().time(),
            self._api.authorization(request),
            body,
        )
        self.requests.append(record)
        fault = self._take_fault(request)
        if fault is not None:
            record.fault = fault.random_kind or fault.kind
        response = (
            None if fault is None or fault.kind == "lose_answer" else await self._faulted(request, fault)
        )
        if response is None:
            response = await handler(request)
        record.status = response.status
        if fault is not None and fault.kind == "lose_answer" and fault.hang_seconds is not None:
            await asyncio.sleep(fault.hang_seconds)  # done, but the answer comes after the client gave up
        elif fault is not None and fault.kind == "lose_answer" and request.transport is not None:
            request.transport.abort()  # done, but the client never hears of it
        return response

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
            return problem(504, "released after an injected hang")
        if fault.kind == "disconnect":
            if request.transport is not None:
                request.transport.abort()
            return problem(503, "connection dropped")
        headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else None
        return problem(fault.status, fault.detail, headers=headers)

    async def _add_fault(self, request: web.Request) -> web.Response:
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

    async def _clear_faults(self, request: web.Request) -> web.Response:
        self._faults.clear()
        self._capacity.clear()
        if self._random_faults is not None:
            self._random_faults.active = False  # its counts stay readable
        self._release.set()
        return web.json_response({})

    async def _set_random_faults(self, request: web.Request) -> web.Response:
        try:
            plan = RandomFaults.from_json(await request.json())
        except (KeyError, TypeError, ValueError) as error:
            return web.json_response({"error": f"bad random fault plan: {error}"}, status=400)
        if self._release.is_set():
            self._release = asyncio.Event()
        self._random_faults = plan
        return web.json_response(plan.stats())

    async def _random_fault_stats(self, request: web.Request) -> web.Response:
        return web.json_response(None if self._random_faults is None else self._random_faults.stats())

    async def _requests(self, request: web.Request) -> web.Response:
        return web.json_response([record.to_json() for record in self.requests])

    async def _forget_requests(self, request: web.Request) -> web.Response:
        self.requests.clear()
        return web.json_response({})

    # -- pods and stock ------------------------------------------------------------------------

    def _find(self, request: web.Request) -> Pod | None:
        return self._pods.records.get(request.match_info["id"])

    async def _list_pods(self, request: web.Request) -> web.Response:
        return web.json_response([self._api.pod_json(pod) for pod in self._pods.records.values()])

    async def _set_status(self, request: web.Request) -> web.Response:
        pod = self._find(request)
        if pod is None:
            return web.json_response({"error": "no such pod"}, status=404)
        spec = await request.json()
        status = spec.get("status")
        if status not in POD_STATUSES:
            return web.json_response({"error": f"status must be one of {POD_STATUSES}"}, status=400)
        await self._pods.force(pod, status, spec.get("message"))
        return web.json_response(self._api.pod_json(pod))

    async def _vanish(self, request: web.Request) -> web.Response:
        pod = self._find(request)
        if pod is None:
            return web.json_response({"error": "no such pod"}, status=404)
        await self._pods.remove(pod)
        return web.json_response({})

    async def _set_stock(self, request: web.Request) -> web.Response:
        spec = await request.json()
        level = spec.get("availability")
        if (
            spec.get("gpu") not in self._catalog.gpu_types
            or spec.get("cloud") not in CLOUDS
            or level not in AVAILABILITY_LEVELS
        ):
            return web.json_response(
                {"error": "need a known gpu, a cloud and an availability level"}, status=400
            )
        self._catalog.set_stock(spec["gpu"], spec["cloud"], level)
        return web.json_response({})

    # -- capacity refusals and the profile -----------------------------------------------------

    async def _add_capacity_refusal(self, request: web.Request) -> web.Response:
        spec = await request.json()
        gpu, center, cloud = spec.get("gpu"), spec.get("data_center"), spec.get("cloud")
        if (
            (gpu is not None and gpu not in self._catalog.gpu_types)
            or (center is not None and center not in self._catalog.data_centers)
            or (cloud is not None and cloud not in CLOUDS)
        ):
            return web.json_response(
                {"error": "gpu, data_center and cloud must be ones the catalog knows (or null: any)"},
                status=400,
            )
        try:
            refusal = self._capacity.refuse(
                gpu=gpu,
                data_center=center,
                cloud=cloud,
                times=spec.get("times", 1),
                detail=str(spec.get("detail", NO_CAPACITY_DETAIL)),
            )
        except ValueError as error:
            return web.json_response({"error": str(error)}, status=400)
        return web.json_response({"id": refusal.id})

    async def _capacity_refusals(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "refusals": [refusal.to_json() for refusal in self._capacity.refusals],
                "refused": self._capacity.refused,
            }
        )

    async def _clear_capacity_refusals(self, request: web.Request) -> web.Response:
        self._capacity.clear()
        return web.json_response({})

    async def _get_profile(self, request: web.Request) -> web.Response:
        return web.json_response(self._profile().to_json())

    async def _patch_profile(self, request: web.Request) -> web.Response:
        try:
            profile = self._profile().updated(await request.json())
        except (KeyError, TypeError, ValueError) as error:
            return web.json_response({"error": f"bad profile change: {error}"}, status=400)
        self._set_profile(profile)
        return web.json_response(profile.to_json())


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

    async def refuse_capacity(
        self,
        gpu: str | None = None,
        *,
        data_center: str | None = None,
        cloud: str | None = None,
        times: int | None = 1,
        detail: str = NO_CAPACITY_DETAIL,
    ) -> int:
        """Refuse the next `times` creates (None: until cleared) of this GPU type in this data center
        and cloud (None: any) with 400 "no capacity", whatever the catalog says; returns its id.
        `clear_faults` (or `clear_capacity_refusals`) removes it."""
        spec = {
            "gpu": gpu,
            "data_center": data_center,
            "cloud": cloud,
            "times": times,
            "detail": detail,
        }
        return int((await self._send("POST", "/capacity-refusals", spec))["id"])

    async def capacity_refusals(self) -> dict[str, Any]:
        """`refusals` (each with the `remaining` count) and `refused`: creates refused so far."""
        result: dict[str, Any] = await self._send("GET", "/capacity-refusals")
        return result

    async def clear_capacity_refusals(self) -> None:
        await self._send("DELETE", "/capacity-refusals")

    async def profile(self) -> dict[str, Any]:
        """The stand-in's profile as JSON (`Profile.to_json`)."""
        result: dict[str, Any] = await self._send("GET", "/profile")
        return result

    async def set_profile(self, **changes: Any) -> dict[str, Any]:
        """Change fields of the profile (`Profile` names, JSON values); returns the whole profile."""
        result: dict[str, Any] = await self._send("PATCH", "/profile", changes)
        return result

    async def set_balance(self, dollars: float | None) -> None:
        """The account's balance (None: unlimited): a create whose first hour costs more is a 402."""
        await self.set_profile(balance_dollars=dollars)

    async def deny_pool(self, pool: str, *, denied: bool = True) -> None:
        """Make creates of this GPU pool's types 403 (or, `denied=False`, allowed again)."""
        pools = set((await self.profile())["denied_pools"])
        await self.set_profile(denied_pools=sorted(pools | {pool} if denied else pools - {pool}))

    async def set_rate_limits(self, windows: Sequence[RateLimitWindow]) -> None:
        """The per-key quota windows (empty: no limit and no `RateLimit` headers)."""
        await self.set_profile(rate_limits=[dataclasses.asdict(window) for window in windows])
