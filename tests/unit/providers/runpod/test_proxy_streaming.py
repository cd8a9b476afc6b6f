"""The fake's proxy front relays a pod's answer as it is written, not once it is complete.

Migration tests stream SSE tokens through it: a front that buffered would still deliver whole
answers, and hide from them a router or provider path that holds tokens back.
"""

from __future__ import annotations

import asyncio

import aiohttp
from aiohttp import web

from vk_devtools.standins.runpod.proxy import ServedPod
from vk_devtools.standins.runpod.standin import FakeRunPod

from .support import GPU


async def test_the_front_relays_each_chunk_as_the_pod_writes_it() -> None:
    release = asyncio.Event()

    def two_part_app(pod: ServedPod) -> web.Application:
        async def handle(request: web.Request) -> web.StreamResponse:
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            await response.write(b"data: first\n\n")
            await release.wait()  # the second part exists only once the client has seen the first
            await response.write(b"data: second\n\n")
            await response.write_eof()
            return response

        app = web.Application()
        app.router.add_get("/stream", handle)
        return app

    body = {"name": "s", "image": "img:1", "gpu": {"id": GPU, "count": 1}, "ports": ["8000/http"]}
    async with FakeRunPod(pod_app=two_part_app) as fake, aiohttp.ClientSession() as session:
        headers = {"Authorization": f"Bearer {fake.api_key}"}
        async with session.post(fake.api_url + "/pods", json=body, headers=headers) as created:
            pod_id = (await created.json())["id"]
        await fake.control.set_status(pod_id, "RUNNING")
        url = fake.proxy_url_template.format(pod_id=pod_id, port=8000) + "/stream"
        async with session.get(url) as response:
            assert response.status == 200
            async with asyncio.timeout(5):
                assert await response.content.readline() == b"data: first\n"
            release.set()
            assert (await response.read()).endswith(b"data: second\n\n")
