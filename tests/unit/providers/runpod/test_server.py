"""The fake RunPod itself answers as RunPod's API reference says the real one does."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from vk_devtools.standins.runpod.standin import FakeRunPod

from .support import GPU

VALID = {"name": "x", "image": "img:1", "gpu": {"id": GPU, "count": 1}, "ports": ["8000/http"]}


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as client:
        yield client


def auth(fake: FakeRunPod) -> dict[str, str]:
    return {"Authorization": f"Bearer {fake.api_key}"}


async def call(
    session: aiohttp.ClientSession, method: str, url: str, *, headers: dict[str, str], body: Any = None
) -> tuple[int, str, Any]:
    async with session.request(method, url, headers=headers, json=body) as response:
        text = await response.text()
        return response.status, response.content_type, json.loads(text) if text else None


@pytest.mark.parametrize(
    ("headers", "detail"),
    [
        ({}, "missing bearer token"),
        ({"Authorization": "Basic dXNlcjpwYXNz"}, "malformed bearer token"),
        ({"Authorization": "Bearer "}, "malformed bearer token"),
        ({"Authorization": "Bearer rp_not_the_key"}, "invalid api key"),
    ],
)
async def test_requests_without_the_right_key_are_401_problems(
    fake: FakeRunPod, session: aiohttp.ClientSession, headers: dict[str, str], detail: str
) -> None:
    for method, path, body in (
        ("GET", "/pods", None),
        ("POST", "/pods", VALID),
        ("GET", "/catalog/gpus", None),
    ):
        status, content_type, problem = await call(
            session, method, fake.api_url + path, headers=headers, body=body
        )
        assert (status, content_type) == (401, "application/problem+json")
        assert problem == {"title": "Unauthorized", "status": 401, "detail": detail}
    assert await fake.control.pods() == []


@pytest.mark.parametrize(
    ("change", "errors"),
    [
        ({"bogus": 1}, ["$: additional properties 'bogus' not allowed"]),
        ({"gpu": {"id": GPU, "typeId": "x"}}, ["$.gpu: additional properties 'typeId' not allowed"]),
        ({"disk": "50"}, ["$.disk: expected integer, got string"]),
        ({"disk": True}, ["$.disk: expected integer, got boolean"]),
        ({"disk": 0}, ["$.disk: must be >= 1"]),
        ({"env": {"A": 1}}, ["$.env.A: expected string, got number"]),
        ({"ports": "8000/http"}, ["$.ports: expected array, got string"]),
        ({"cloud": "PRIVATE"}, ["$.cloud: must be one of SECURE, COMMUNITY"]),
        ({"gpu": {"count": 1}}, ["$.gpu: missing property 'id'"]),
        (
            {"gpu": {"id": GPU, "minCudaVersion": "12"}},
            ["$.gpu.minCudaVersion: does not match pattern '^\\\\d+\\\\.\\\\d+$'"],
        ),
        ({"name": ""}, ["$.name: length must be >= 1"]),
        ({"mounts": {"persistent": {"size": 5, "path": "/w"}}}, ["$.mounts.persistent.size: must be >= 10"]),
    ],
)
async def test_bodies_that_break_the_schema_are_422_with_every_reason(
    fake: FakeRunPod, session: aiohttp.ClientSession, change: dict[str, Any], errors: list[str]
) -> None:
    status, content_type, problem = await call(
        session, "POST", fake.api_url + "/pods", headers=auth(fake), body={**VALID, **change}
    )
    assert (status, content_type) == (422, "application/problem+json")
    assert problem["detail"] == "Request validation failed."
    assert problem["errors"] == errors


async def test_name_and_image_are_required(fake: FakeRunPod, session: aiohttp.ClientSession) -> None:
    body = {"gpu": {"id": GPU}}
    status, _, problem = await call(session, "POST", fake.api_url + "/pods", headers=auth(fake), body=body)
    assert status == 422
    assert problem["errors"] == ["$: missing property 'name'", "$: missing property 'image'"]


@pytest.mark.parametrize(
    ("change", "status", "words"),
    [
        ({"cpu": {"flavorId": "cpu3c"}}, 400, "exactly one of gpu or cpu"),
        ({"gpu": {"id": "NVIDIA RTX 9999"}}, 400, "does not exist"),
        ({"gpu": {"id": GPU, "count": 9}}, 400, "at most 8 GPUs"),
        (
            {"gpu": {"id": "NVIDIA H100 80GB HBM3"}, "cloud": "COMMUNITY"},
            400,
            "not offered in the COMMUNITY cloud",
        ),
        ({"ports": ["8000/udp"]}, 400, "not formatted as <port>/http or <port>/tcp"),
        ({"ports": [f"{8000 + n}/http" for n in range(11)]}, 400, "at most 10 HTTP ports"),
        ({"dataCenterIds": ["MARS-1"]}, 400, "unknown data centers: MARS-1"),
        ({"templateId": "abc"}, 404, "template abc not found"),
    ],
)
async def test_handler_rules_are_400(
    fake: FakeRunPod, session: aiohttp.ClientSession, change: dict[str, Any], status: int, words: str
) -> None:
    body = {**VALID, **change}  # with cpu: both gpu and cpu are set
    answered, _, problem = await call(session, "POST", fake.api_url + "/pods", headers=auth(fake), body=body)
    assert answered == status
    assert words in problem["detail"]


async def test_a_pod_as_the_reference_describes_it(fake: FakeRunPod, session: aiohttp.ClientSession) -> None:
    status, _, pod = await call(session, "POST", fake.api_url + "/pods", headers=auth(fake), body=VALID)
    assert status == 201
    required = {
        "id", "name", "status", "actions", "image", "args", "disk", "mounts", "ports", "env", "registry",
        "cloud", "dataCenterId", "cudaVersion", "ssh", "template", "cost", "locked", "runtime", "createdAt",
        "startedAt", "globalNetworking",
    }  # fmt: skip
    assert required <= set(pod)
    assert (pod["status"], pod["actions"], pod["runtime"], pod["startedAt"]) == (
        "PROVISIONING",
        ["stop", "terminate"],
        None,
        None,
    )
    assert len(pod["id"]) == 14
    assert pod["id"].isalnum()
    status, _, listed = await call(session, "GET", fake.api_url + "/pods", headers=auth(fake))
    assert (status, [item["id"] for item in listed["pods"]]) == (200, [pod["id"]])
    assert (await call(session, "DELETE", f"{fake.api_url}/pods/{pod['id']}", headers=auth(fake)))[0] == 204
    status, _, problem = await call(session, "GET", f"{fake.api_url}/pods/{pod['id']}", headers=auth(fake))
    assert (status, problem["detail"]) == (404, "pod not found")
    assert (await call(session, "DELETE", f"{fake.api_url}/pods/{pod['id']}", headers=auth(fake)))[0] == 404


async def test_unknown_routes_are_404_problems(fake: FakeRunPod, session: aiohttp.ClientSession) -> None:
    status, content_type, _ = await call(session, "GET", fake.api_url + "/nothing", headers=auth(fake))
    assert (status, content_type) == (404, "application/problem+json")


@pytest.mark.parametrize(
    "query",
    [
        "include=AVAILABILITY",  # product is required with include
        "product=POD",  # and valid only with it
        "count=2",
        "cloud=SECURE",
        "include=AVAILABILITY&product=POD&count=0",
        "include=PRICES&product=POD",
    ],
)
async def test_catalog_parameters_follow_the_reference(
    fake: FakeRunPod, session: aiohttp.ClientSession, query: str
) -> None:
    status, _, _ = await call(session, "GET", f"{fake.api_url}/catalog/gpus?{query}", headers=auth(fake))
    assert status == 400


async def test_log_stream_backfill_and_resume(fake: FakeRunPod, session: aiohttp.ClientSession) -> None:
    _, _, pod = await call(session, "POST", fake.api_url + "/pods", headers=auth(fake), body=VALID)
    await fake.control.set_status(pod["id"], "ERROR", "boom")
    url = f"{fake.api_url}/pods/{pod['id']}/logs"
    assert (await call(session, "GET", url + "?tail=5001", headers=auth(fake)))[0] == 400
    assert (await call(session, "GET", url + "?source=stderr", headers=auth(fake)))[0] == 400

    async def events(query: str, headers: dict[str, str], count: int) -> list[tuple[str, dict[str, Any]]]:
        async with session.get(url + query, headers=headers) as response:
            assert response.headers["Content-Type"] == "text/event-stream"
            found: list[tuple[str, dict[str, Any]]] = []
            event_id = ""
            while len(found) < count:
                line = (await response.content.readline()).decode().rstrip("\n")
                if line.startswith("id: "):
                    event_id = line[4:]
                elif line.startswith("data: "):
                    found.append((event_id, json.loads(line[6:])))
            return found

    everything = await events("?source=system", auth(fake), 2)
    assert [data["line"] for _, data in everything] == [f"provisioning 1 x {GPU} in US-KS-2", "boom"]
    assert all(set(data) == {"ts", "source", "line"} and data["source"] == "system" for _, data in everything)
    first_id = everything[0][0]
    resumed = await events("?source=system", {**auth(fake), "Last-Event-ID": first_id}, 1)
    assert [data["line"] for _, data in resumed] == ["boom"]


async def test_proxy_front_routes_by_host_header_as_well(
    fake: FakeRunPod, session: aiohttp.ClientSession
) -> None:
    _, _, pod = await call(session, "POST", fake.api_url + "/pods", headers=auth(fake), body=VALID)
    front = fake.proxy_url_template.split("/{pod_id}")[0]
    async with session.get(front + "/x") as response:
        assert response.status == 404  # no pod named by the path or the host
    headers = {"Host": f"{pod['id']}-8000.proxy.runpod.net"}
    async with session.get(front + "/x", headers=headers) as response:
        assert response.status == 502  # known, but not running yet
    await fake.control.set_status(pod["id"], "RUNNING")
    async with session.get(front + "/x?y=1", headers=headers) as response:
        assert response.status == 200
        assert (await response.json())["path"] == "/x?y=1"


async def test_the_fake_runs_on_its_own() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "vk_devtools.standins.runpod.server",
        "--api-key",
        "rp_standalone",
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), 30)
        addresses = json.loads(line)
        assert set(addresses) == {"api_url", "proxy_url_template", "control_url"}
        async with (
            aiohttp.ClientSession() as client,
            client.get(
                addresses["api_url"] + "/pods", headers={"Authorization": "Bearer rp_standalone"}
            ) as response,
        ):
            assert (response.status, await response.json()) == (200, {"pods": []})
            assert "RateLimit" not in response.headers  # the fast profile sets no rate limit
        async with (
            aiohttp.ClientSession() as client,
            client.get(addresses["control_url"] + "/profile") as answer,
        ):
            profile = await answer.json()
            assert (profile["name"], profile["provisioning_seconds"], profile["load_seconds"]) == (
                "fast",
                2.0,
                0.0,
            )
    finally:
        process.terminate()
        await process.wait()
