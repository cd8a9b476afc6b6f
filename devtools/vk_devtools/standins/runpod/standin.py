"""One running RunPod stand-in: the catalog, the pods, the API, the proxy and the control plane, wired
together on ephemeral local ports (`FakeRunPod`, `running_fake`), behaving as its `Profile` says."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Sequence
from typing import Any

import aiohttp
from aiohttp import web

from vk_devtools.standins.runpod.api import API_PREFIX, Api
from vk_devtools.standins.runpod.capacity import Capacity
from vk_devtools.standins.runpod.catalog import (
    DEFAULT_DATA_CENTERS,
    DEFAULT_GPU_TYPES,
    Catalog,
    FakeDataCenter,
    FakeGpuType,
)
from vk_devtools.standins.runpod.clock import Clock, LoopClock
from vk_devtools.standins.runpod.control import CONTROL_PREFIX, ControlPlane, FakeRunPodControl
from vk_devtools.standins.runpod.pods import Pods
from vk_devtools.standins.runpod.profile import FAST, Profile
from vk_devtools.standins.runpod.proxy import PodAppFactory, PodServers, echo_app, front_app, serve
from vk_devtools.standins.runpod.ratelimit import RateLimiter


class FakeRunPod:
    """The fake API and proxy front, on ephemeral local ports. Use as `async with FakeRunPod() as fake`.

    `profile` (default `FAST`; `REALISTIC` for RunPod's own timings and refusals, see `profile`) may be
    replaced while it runs, directly or through `control.set_profile`; `provisioning_seconds` and
    `starting_seconds` override its two timings. `clock` is what every simulated delay is slept on: a
    `ManualClock` lets a test move a seven-minute cold start on by hand.
    """

    def __init__(
        self,
        *,
        api_key: str = "rp_fake_0123456789abcdef",
        profile: Profile = FAST,
        provisioning_seconds: float | None = None,
        starting_seconds: float | None = None,
        auto_advance: bool = True,
        gpu_types: Sequence[FakeGpuType] = DEFAULT_GPU_TYPES,
        data_centers: Sequence[FakeDataCenter] = DEFAULT_DATA_CENTERS,
        pod_app: PodAppFactory = echo_app,
        clock: Clock | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        """`auto_advance=False` holds new pods in PROVISIONING until the control API moves them."""
        self.api_key = api_key
        self.profile = profile
        if provisioning_seconds is not None:
            self.provisioning_seconds = provisioning_seconds
        if starting_seconds is not None:
            self.starting_seconds = starting_seconds
        self.auto_advance = auto_advance
        self.clock: Clock = clock or LoopClock()
        catalog = Catalog(gpu_types, data_centers)
        self.gpu_types = catalog.gpu_types
        self.data_centers = catalog.data_centers
        self._host = host
        self._servers = PodServers(pod_app, host)
        self._pods = Pods(self._servers, pace=self, clock=self.clock)  # reads the profile when needed
        self.capacity = Capacity(lambda: self.profile)
        self._api = Api(
            lambda: self.api_key,
            catalog,
            self._pods,
            profile=lambda: self.profile,
            capacity=self.capacity,
            limiter=RateLimiter(lambda: self.profile.rate_limits, self.clock),
        )
        self._control_plane = ControlPlane(
            self._api,
            self._pods,
            catalog,
            capacity=self.capacity,
            profile=lambda: self.profile,
            set_profile=self._replace_profile,
        )
        self.requests = self._control_plane.requests
        self._api_runner: web.AppRunner | None = None
        self._front_runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._api_port = 0
        self._front_port = 0
        self._control: FakeRunPodControl | None = None

    def __repr__(self) -> str:
        pods = len(self._pods.records)
        return f"FakeRunPod(api_url={self.api_url!r}, profile={self.profile.name!r}, pods={pods})"

    # -- the profile's timings, as attributes (what tests set before the profile existed) ----------

    @property
    def provisioning_seconds(self) -> float:
        return self.profile.provisioning_seconds

    @provisioning_seconds.setter
    def provisioning_seconds(self, seconds: float) -> None:
        self.profile = dataclasses.replace(self.profile, provisioning_seconds=seconds)

    @property
    def starting_seconds(self) -> float:
        return self.profile.starting_seconds

    @starting_seconds.setter
    def starting_seconds(self, seconds: float) -> None:
        self.profile = dataclasses.replace(self.profile, starting_seconds=seconds)

    def _replace_profile(self, profile: Profile) -> None:
        self.profile = profile

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        api = web.Application(middlewares=[self._control_plane.middleware, self._api.middleware])
        self._api.add_routes(api.router)
        api.on_response_prepare.append(self._api.add_rate_limit_headers)
        self._control_plane.add_routes(api.router)
        self._session = aiohttp.ClientSession(auto_decompress=False)
        front = front_app(
            self._pods.records,
            self._servers,
            self._session,
            self._host,
            clock=self.clock,
            timeout_seconds=lambda: self.profile.proxy_timeout_seconds,
        )
        self._api_runner, self._api_port = await serve(api, self._host)
        self._front_runner, self._front_port = await serve(front, self._host)
        self._control = FakeRunPodControl(self.control_url, session=self._session)

    async def close(self) -> None:
        self._control_plane.release()
        await self._pods.close()
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


@contextlib.asynccontextmanager
async def running_fake(**options: Any) -> AsyncIterator[FakeRunPod]:
    fake = FakeRunPod(**options)
    await fake.start()
    try:
        yield fake
    finally:
        await fake.close()
