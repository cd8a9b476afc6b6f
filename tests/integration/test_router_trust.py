"""Only the virtual node decides where away traffic goes; a pod editor cannot redirect it.

All traffic is away. A ServiceAccount that may patch pods but not their status (what an application
team typically holds) sets the old traffic-address annotation to a decoy it controls and a SigV4
traffic-auth marker on an away pod: the router ignores both (every request still reaches the real
away workloads, the decoy gets nothing) and posts one Warning Event on the pod; and the same account
is refused (403) when it tries to write the pod's status, where the node publishes the real address.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client

from tests.integration.all_away import (
    ONE_STEP_AWAY,
    away_pods,
    describe,
    flip_all_away,
    load,
    more_requests,
    router_document,
    router_log_lines,
    wait_for_healthy_checks,
    warnings_on,
)
from tests.integration.identities import account_with_rules
from tests.integration.migration_rig import NAME, RigFor
from tests.integration.waiting import wait_for
from vk_devtools.demo.load import failures
from vk_devtools.devcluster import cluster
from vk_provider.kit.kube import MERGE_PATCH, KubeApiError
from vk_provider.offload.names import (
    TRAFFIC_ADDRESS_ANNOTATION,
    TRAFFIC_ADDRESS_CONDITION,
    TRAFFIC_AUTH_ANNOTATION,
    UNTRUSTED_TRAFFIC_ANNOTATION_REASON,
)

pytestmark = pytest.mark.usefixtures("traffic_rbac")

EDITOR = "pod-editor"
REASON = UNTRUSTED_TRAFFIC_ANNOTATION_REASON


EDITOR_RULES = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "patch"]}]
"""A pod editor: it may read and patch pods in the namespace, not `pods/status`."""


def decoy() -> tuple[web.Application, list[str]]:
    """Where the forged annotation points: counts every request it gets."""
    hits: list[str] = []

    async def answer(request: web.Request) -> web.Response:
        hits.append(request.path)
        return web.Response(text="decoy", headers={"X-Served-By": "decoy/decoy"})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    return app, hits


async def test_a_pod_editor_cannot_aim_the_router_anywhere(
    kube_api: client.ApiClient,
    control_plane: cluster.ClusterState,
    namespace: str,
    rig_for: RigFor,
    tmp_path: Path,
) -> None:
    app, decoy_hits = decoy()
    async with (
        TestServer(app, host="127.0.0.1") as decoy_server,
        rig_for(ONE_STEP_AWAY) as rig,
    ):
        editor = await account_with_rules(
            kube_api,
            control_plane,
            namespace,
            EDITOR,
            rules=EDITOR_RULES,
            path=tmp_path / "editor.kubeconfig",
        )
        try:
            # The load runs from before the flip: the migration's gates need requests to judge.
            async with load(rig, rate=20) as generator:
                await flip_all_away(rig)
                await wait_for_healthy_checks(rig, 2)
                target = (await away_pods(rig))[0]
                name, uid = target["metadata"]["name"], target["metadata"]["uid"]
                path = f"/api/v1/namespaces/{namespace}/pods/{name}"
                forged = {
                    TRAFFIC_ADDRESS_ANNOTATION: str(decoy_server.make_url("")).rstrip("/"),
                    TRAFFIC_AUTH_ANNOTATION: "aws-sigv4; service=sagemaker; region=eu-west-1",
                }
                await editor.patch(path, {"metadata": {"annotations": forged}}, content_type=MERGE_PATCH)

                # The status, where the node publishes the address, is out of the editor's reach.
                condition = {
                    "type": TRAFFIC_ADDRESS_CONDITION,
                    "status": "True",
                    "reason": "Published",
                    "message": forged[TRAFFIC_ADDRESS_ANNOTATION],
                }
                with pytest.raises(KubeApiError) as refused:
                    await editor.patch(path + "/status", {"status": {"conditions": [condition]}})
                assert refused.value.status == 403, refused.value

                events = await wait_for(
                    lambda: warnings_on(rig, uid, REASON),
                    timeout_seconds=30,
                    what=f"the router's Warning Event:\n{rig.router.log_tail(20)}",
                )
                # The router saw the forged annotations (it posted the Event) and its table still
                # holds only the addresses the node published.
                published = {
                    next(
                        c["message"]
                        for c in pod["status"]["conditions"]
                        if c["type"] == TRAFFIC_ADDRESS_CONDITION
                    )
                    for pod in await away_pods(rig)
                }
                document = await router_document(rig)
                assert set(document["active_checks"]) == published
                (route,) = [r for r in document["routes"] if r["name"] == NAME]
                assert route["endpoints"]["away"]["usable"] == 2
                # A few more seconds of traffic after the router has seen the forgery.
                await more_requests(generator, 60)
                await generator.stop()
        finally:
            await editor.close()
    outcomes = generator.outcomes
    assert not failures(outcomes), describe(failures(outcomes))
    sides = {rig.side_of(outcome.served_by) for outcome in outcomes}
    assert decoy_hits == [], decoy_hits
    assert "unknown" not in sides, sides  # the decoy answers as "decoy/decoy"
    # Other tests' routers that watch the whole cluster may warn about this pod too: the Events are
    # theirs and ours, and this router's log says that it warned exactly once.
    for event in events:
        assert event["type"] == "Warning"
        assert TRAFFIC_ADDRESS_ANNOTATION in str(event["message"])
        assert TRAFFIC_AUTH_ANNOTATION in str(event["message"])
    ours = router_log_lines(rig, REASON, name)
    assert len(ours) == 1, ours
    print(f"{len(outcomes)} requests, 0 failed, 0 to the decoy; event: {events[0]['message']}")
