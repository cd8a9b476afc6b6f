"""Routes cannot be stolen: a host belongs to the namespace whose Offload claimed it first.

On the real control plane, with the real router watching every namespace and one controller per
namespace (each scoped with `--namespace`, as a team would run its own): the first Offload keeps all
its traffic, the second reports `Ready=False`/`RouteConflict` with a Warning Event naming the first,
whether it claims the same path or a longer prefix of it, until the first lets its namespace in.
Deleting the first keeps its route (a KeptRoute); deleting that hands the host to the second.
"""

from __future__ import annotations

import contextlib
import copy
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client

from tests.integration.all_away import more_requests
from tests.integration.conftest import release_offloads
from tests.integration.daemons import ManagedProcess
from tests.integration.migration_rig import API, NAME, Rig, RigFor, start_router
from tests.integration.waiting import wait_for
from vk_devtools.demo.load import LoadGenerator, LoadSettings, failures, share_by
from vk_provider.kit.kube import KubeApi, KubeApiError, RawObject

pytestmark = pytest.mark.usefixtures("traffic_rbac")

RIVAL = "rival"
"""The second namespace's Deployment and Service: its pods' names say who served a request."""


@pytest.fixture
async def rig(rig_for: RigFor) -> AsyncIterator[Rig]:
    async with rig_for({"stepIntervalSeconds": 2}) as rig:
        yield rig


@pytest.fixture
async def second_namespace(kube_api: client.ApiClient) -> AsyncIterator[str]:
    core = client.CoreV1Api(kube_api)
    name = f"route-claims-rival-{uuid.uuid4().hex[:6]}"
    await core.create_namespace({"metadata": {"name": name, "labels": {"vk-provider.dev/test": "true"}}})

    async def default_service_account_exists() -> bool:
        accounts = await core.list_namespaced_service_account(name, field_selector="metadata.name=default")
        return bool(accounts.items)

    try:
        await wait_for(
            default_service_account_exists, timeout_seconds=60, what=f"ServiceAccount {name}/default"
        )
        yield name
    finally:
        await release_offloads(kube_api, name)
        await core.delete_namespace(name)


def _served_by_app(served_by: str | None) -> str:
    """`node/pod` → the app that served it (pod names start with their Deployment's name)."""
    pod = (served_by or "").partition("/")[2]
    return NAME if pod.startswith(f"{NAME}-") else RIVAL if pod.startswith(f"{RIVAL}-") else "nobody"


async def _start_rival(rig: Rig, namespace: str, replicas: int = 1) -> None:
    """The same service under another name in the second namespace, on the same home node."""
    template = copy.deepcopy((await rig.deployment(NAME))["spec"]["template"])
    template["metadata"] = {"labels": {"app": RIVAL}}
    await rig.api.create(
        f"/apis/apps/v1/namespaces/{namespace}/deployments",
        {
            "metadata": {"name": RIVAL},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": RIVAL}}, "template": template},
        },
    )
    await rig.api.create(
        f"/api/v1/namespaces/{namespace}/services",
        {
            "metadata": {"name": RIVAL},
            "spec": {"selector": {"app": RIVAL}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
        },
    )


async def _create_rival_offload(
    api: KubeApi, namespace: str, host: str, *, placement: str, path_prefix: str | None = None
) -> None:
    """The second namespace's Offload of the same host, its away side on no node."""
    route: dict[str, Any] = {"hosts": [host]}
    if path_prefix is not None:
        route["pathPrefix"] = path_prefix
    await api.create(
        f"{API}/namespaces/{namespace}/offloads",
        {
            "apiVersion": "offload.vk-provider.dev/v1alpha1",
            "kind": "Offload",
            "metadata": {"name": NAME},
            "spec": {
                "home": {"deployment": RIVAL, "service": RIVAL},
                "placement": placement,
                "route": route,
                "away": {"nodeSelector": {"vk-provider.dev/role": "nowhere"}},
            },
        },
    )


def _ready_condition(offload: RawObject) -> dict[str, Any]:
    conditions = (offload.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "Ready"), {})


async def _served_by(router_url: str, host: str) -> str | None:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{router_url}/", headers={"Host": host}) as response,
    ):
        await response.read()
        return response.headers.get("X-Served-By") if response.status == 200 else None


@contextlib.asynccontextmanager
async def _second_namespace_parts(
    rig: Rig, second_namespace: str, tmp_path: Path
) -> AsyncIterator[tuple[ManagedProcess, ManagedProcess, str]]:
    """A router for the whole cluster (the rig's own is scoped to the first namespace) and the second
    namespace's own controller, as its ServiceAccount; yields both and the router's URL."""
    router, router_url, admin_url = start_router(tmp_path / "cluster-router", tmp_path / "router.kubeconfig")
    arguments = list(rig.controller.arguments)
    arguments[arguments.index("--namespace") + 1] = second_namespace
    arguments[arguments.index("--leader-election-lease-name") + 1] = f"controller-{second_namespace}"[:63]
    arguments[arguments.index("--router-url") + 1] = admin_url
    controller = ManagedProcess(folder=tmp_path / "rival-controller", arguments=arguments)
    controller.start()
    try:
        yield controller, router, router_url
    finally:
        for process in (controller, router):
            if process.alive():
                process.stop()
            process.close()
        with contextlib.suppress(KubeApiError):
            await rig.api.delete(f"/apis/apps/v1/namespaces/{second_namespace}/deployments/{RIVAL}")


async def test_the_older_claim_keeps_the_route_and_the_younger_takes_it_over(
    rig: Rig, second_namespace: str, tmp_path: Path
) -> None:
    api: KubeApi = rig.api
    async with _second_namespace_parts(rig, second_namespace, tmp_path) as (controller, router, router_url):
        await _start_rival(rig, second_namespace)
        first = await rig.offload()
        rival_path = f"{API}/namespaces/{second_namespace}/offloads/{NAME}"
        # It asks to move away: while it loses the route, nothing may start. Its away pods could land
        # nowhere, so once it wins, its migration starts and stays Preparing.
        await _create_rival_offload(api, second_namespace, rig.host, placement="away")
        second = await api.get(rival_path)
        # The rig took far more than a second to start: the first claim is strictly older.
        assert second["metadata"]["creationTimestamp"] > first["metadata"]["creationTimestamp"]

        async def conflict_reported() -> dict[str, Any]:
            condition = _ready_condition(await api.get(rival_path))
            return condition if condition.get("reason") == "RouteConflict" else {}

        condition = await wait_for(
            conflict_reported,
            timeout_seconds=60,
            what=f"RouteConflict on the second Offload; its controller's log:\n{controller.log_tail(30)}",
        )
        assert condition["status"] == "False"
        assert f"{rig.namespace}/{NAME}" in condition["message"]

        async def conflict_events() -> dict[str, Any]:
            found: dict[str, Any] = await api.get(
                f"/api/v1/namespaces/{second_namespace}/events",
                query={"fieldSelector": "involvedObject.kind=Offload,reason=RouteConflict"},
            )
            return found if found["items"] else {}

        # The Event is posted by the controller's recorder after the status write: wait for it too.
        events = await wait_for(conflict_events, timeout_seconds=30, what="the RouteConflict Event")
        assert [event["type"] for event in events["items"]] == ["Warning"]
        assert f"{rig.namespace}/{NAME}" in events["items"][0]["message"]
        # The first keeps Ready and its status says nothing of a conflict.
        assert _ready_condition(await rig.offload())["status"] == "True"
        # No migration for the loser: no away Deployment, no MigrationStarted.
        rival = await api.get(rival_path)
        assert (rival.get("status") or {}).get("phase") in (None, "Idle")
        deployments = await api.get(f"/apis/apps/v1/namespaces/{second_namespace}/deployments")
        assert [item["metadata"]["name"] for item in deployments["items"]] == [RIVAL]

        # Both services ready, the cluster-wide router loaded: every request goes to the first.
        load = await _two_hundred_requests(api, second_namespace, router, router_url, rig.host)
        served = share_by(load.outcomes, _served_by_app)
        print(f"during the conflict: {len(load.outcomes)} requests, served by {dict(served)}")
        assert not failures(load.outcomes), failures(load.outcomes)[:5]
        assert served == {NAME: len(load.outcomes)}, served

        # The first deleted: its route stays (a KeptRoute), sending the host home, and the second
        # still may not have it.
        await api.delete(f"{API}/namespaces/{rig.namespace}/offloads/{NAME}")
        await _wait_gone(rig)
        kept = await api.get(f"{API}/namespaces/{rig.namespace}/keptroutes/{NAME}")
        assert kept["spec"]["claimedSince"] == first["metadata"]["creationTimestamp"], kept["spec"]
        assert _served_by_app(await _served_by(router_url, rig.host)) == NAME

        async def held_by_the_kept_route() -> dict[str, Any]:
            condition = _ready_condition(await api.get(rival_path))
            return condition if f"for Service {rig.namespace}/{NAME}" in condition["message"] else {}

        # Its controller says so once it sees the Offload gone (it was RouteConflict all along).
        condition = await wait_for(
            held_by_the_kept_route,
            timeout_seconds=30,
            what=f"the second Offload held back by the kept route; its log:\n{controller.log_tail(30)}",
        )
        assert condition["reason"] == "RouteConflict", condition

        # The first namespace lets the host go: the route passes to the second, in the router and in
        # its status.
        released_at = time.monotonic()
        await _release_kept_route(rig)

        async def rival_serves() -> bool:
            return _served_by_app(await _served_by(router_url, rig.host)) == RIVAL

        await wait_for(rival_serves, timeout_seconds=60, what="the router to hand the route to the second")
        handed_over = time.monotonic() - released_at

        async def rival_migrates() -> bool:
            offload = await api.get(rival_path)
            ready = _ready_condition(offload).get("status") == "True"
            return ready and (offload.get("status") or {}).get("phase") == "Preparing"

        await wait_for(
            rival_migrates,
            timeout_seconds=60,
            what=f"the second Offload Ready and migrating; its controller's log:\n{controller.log_tail(30)}",
        )
        print(f"route handed over {handed_over:.1f}s after the KeptRoute was deleted")
        assert handed_over < 30


async def test_an_offload_that_starts_behind_a_conflict_serves_home_untouched_once_it_wins(
    rig: Rig, second_namespace: str, tmp_path: Path
) -> None:
    """Its first status is written while it is blocked; when the route frees, it must read as serving
    home, not start a move home that rescales its home Deployment (it used to scale 2 to 1)."""
    api: KubeApi = rig.api
    async with _second_namespace_parts(rig, second_namespace, tmp_path) as (controller, _, _):
        await _start_rival(rig, second_namespace, replicas=2)
        rival_path = f"{API}/namespaces/{second_namespace}/offloads/{NAME}"
        await _create_rival_offload(api, second_namespace, rig.host, placement="home")

        async def reason_is(wanted: str) -> bool:
            return _ready_condition(await api.get(rival_path)).get("reason") == wanted

        await wait_for(
            lambda: reason_is("RouteConflict"),
            timeout_seconds=60,
            what=f"RouteConflict on the second Offload; its controller's log:\n{controller.log_tail(30)}",
        )
        await api.delete(f"{API}/namespaces/{rig.namespace}/offloads/{NAME}")
        await _wait_gone(rig)
        await _release_kept_route(rig)
        await wait_for(
            lambda: reason_is("Resolved"),
            timeout_seconds=60,
            what=f"the second Offload Ready once it holds the route; its log:\n{controller.log_tail(30)}",
        )
        rival = await api.get(rival_path)
        assert rival["status"]["phase"] == "Idle", rival["status"]
        assert rival["status"]["targetPlacement"] == "home", rival["status"]
        deployment = await api.get(f"/apis/apps/v1/namespaces/{second_namespace}/deployments/{RIVAL}")
        assert deployment["spec"]["replicas"] == 2
        started = await api.get(
            f"/api/v1/namespaces/{second_namespace}/events",
            query={"fieldSelector": "involvedObject.kind=Offload,reason=MigrationStarted"},
        )
        assert started["items"] == [], [event["message"] for event in started["items"]]


async def test_another_namespace_takes_no_path_of_the_host_with_a_longer_prefix_until_let_in(
    rig: Rig, second_namespace: str, tmp_path: Path
) -> None:
    api: KubeApi = rig.api
    async with _second_namespace_parts(rig, second_namespace, tmp_path) as (controller, router, router_url):
        await _start_rival(rig, second_namespace)
        await rig.offload()
        rival_path = f"{API}/namespaces/{second_namespace}/offloads/{NAME}"
        # The owner routes every path of the host; the rival asks for /v1, which every request of
        # the load is under (/v1/completions).
        await _create_rival_offload(api, second_namespace, rig.host, placement="home", path_prefix="/v1")

        async def reason() -> str:
            return str(_ready_condition(await api.get(rival_path)).get("reason"))

        async def conflict_reported() -> bool:
            return await reason() == "RouteConflict"

        await wait_for(
            conflict_reported,
            timeout_seconds=60,
            what=f"RouteConflict on the second Offload; its controller's log:\n{controller.log_tail(30)}",
        )
        message = _ready_condition(await api.get(rival_path))["message"]
        assert f"host {rig.host} belongs to namespace {rig.namespace}" in message, message
        load = await _two_hundred_requests(api, second_namespace, router, router_url, rig.host)
        served = share_by(load.outcomes, _served_by_app)
        print(
            f"longer prefix from another namespace: {len(load.outcomes)} /v1 requests, "
            f"served by {dict(served)}"
        )
        assert not failures(load.outcomes), failures(load.outcomes)[:5]
        assert served == {NAME: len(load.outcomes)}, served

        # The owner lets the second namespace in: its longer prefix is then a more specific route.
        await rig.patch_offload({"spec": {"route": {"allowedNamespaces": [second_namespace]}}})

        async def resolved() -> bool:
            return await reason() == "Resolved"

        await wait_for(
            resolved,
            timeout_seconds=60,
            what=f"the second Offload Ready once let in; its controller's log:\n{controller.log_tail(30)}",
        )

        async def rival_serves_v1() -> bool:
            return _served_by_app(await _completion_served_by(router_url, rig.host)) == RIVAL

        await wait_for(rival_serves_v1, timeout_seconds=60, what="the router to send /v1 to the second")
        assert _served_by_app(await _served_by(router_url, rig.host)) == NAME  # `/` stays the owner's


async def _completion_served_by(router_url: str, host: str) -> str | None:
    body = {"prompt": "x", "max_tokens": 1, "stream": False}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{router_url}/v1/completions", json=body, headers={"Host": host}) as response,
    ):
        await response.read()
        return response.headers.get("X-Served-By") if response.status == 200 else None


async def _wait_gone(rig: Rig) -> None:
    """Wait until the rig's Offload has let go (its finalizer ran) and is gone."""

    async def gone() -> bool:
        try:
            await rig.offload()
        except KubeApiError as error:
            if error.not_found:
                return True
            raise
        return False

    await wait_for(gone, timeout_seconds=120, what=f"the first Offload to go; {rig.controller.log_tail(30)}")


async def _release_kept_route(rig: Rig) -> None:
    """What an operator does to let the host go: delete the route the Offload left."""
    await rig.api.delete(f"{API}/namespaces/{rig.namespace}/keptroutes/{NAME}")


async def _two_hundred_requests(
    api: KubeApi, namespace: str, router: ManagedProcess, router_url: str, host: str
) -> LoadGenerator:
    """Once the rival is Ready and the cluster-wide router serves `host`: 200 requests through it (40/s,
    30% streaming), stopped."""
    await _wait_rival_ready(api, namespace)
    await wait_for(
        lambda: _served_by(router_url, host),
        timeout_seconds=60,
        what=f"the cluster-wide router to serve {host}; its log:\n{router.log_tail(30)}",
    )
    load = LoadGenerator(LoadSettings(url=router_url, host_header=host, rate=40, stream_share=0.3))
    await load.start()
    await more_requests(load, 200, timeout_seconds=60)
    await load.stop()
    return load


async def _wait_rival_ready(api: KubeApi, namespace: str) -> None:
    async def ready() -> bool:
        deployment = await api.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/{RIVAL}")
        return int((deployment.get("status") or {}).get("readyReplicas") or 0) >= 1

    await wait_for(ready, timeout_seconds=90, what=f"Deployment {namespace}/{RIVAL} ready")
