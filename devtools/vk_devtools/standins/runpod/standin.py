"""One running RunPod stand-in: the catalog, the pods, the API, the proxy and the control plane, wired
together on ephemeral local ports (`FakeRunPod`, `running_fake`)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

import aiohttp
from aiohttp import web

from vk_devtools.standins.runpod.api import API_PREFIX, Api
from vk_devtools.standins.runpod.catalog import (
    DEFAULT_DATA_CENTERS,
    DEFAULT_GPU_TYPES,
    Catalog,
    FakeDataCenter,
    FakeGpuType,
)
from vk_devtools.standins.runpod.control import CONTROL_PREFIX, ControlPlane, FakeRunPodControl
from vk_devtools.standins.runpod.pods import Pods
from vk_devtools.standins.runpod.proxy import PodAppFactory, PodServers, echo_app, front_app, serve


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
        catalog = Catalog(gpu_types, data_centers)
        self.gpu_types = catalog.gpu_types
        self.data_centers = catalog.data_centers
        self._host = host
        self._servers = PodServers(pod_app, host)
        self._pods = Pods(self._servers, pace=self)  # the settings above, read when they are needed
        self._api = Api(lambda: self.api_key, catalog, self._pods)
        self._control_plane = ControlPlane(self._api, self._pods, catalog)
        self.requests = self._control_plane.requests
        self._api_runner: web.AppRunner | None = None
        self._front_runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._api_port = 0
        self._front_port = 0
        self._control: FakeRunPodControl | None = None

    def __repr__(self) -> str:
        return f"FakeRunPod(api_url={self.api_url!r}, pods={len(self._pods.records)})"

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        api = web.Application(middlewares=[self._control_plane.middleware, self._api.middleware])
        self._api.add_routes(api.router)
        self._control_plane.add_routes(api.router)
        self._session = aiohttp.ClientSession(auto_decompress=False)
        front = front_app(self._pods.records, self._servers, self._session, self._host)
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
