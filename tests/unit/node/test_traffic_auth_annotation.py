"""How the router must authenticate a pod's traffic goes on the pod next to its traffic address.

Driven like test_pod_updates: the reconciler directly, an in-memory provider whose states ask for
SigV4, and a recording stand-in for the KubeApi wrapper.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

from tests.unit.node.test_pod_updates import CachedPods, RecordingApi, RecordingMock, make_reconciler, pod
from vk_provider.kit.traffic_auth import AwsSigV4
from vk_provider.node.pods import (
    OWN_ANNOTATIONS,
    TRAFFIC_ADDRESS_ANNOTATION,
    TRAFFIC_AUTH_ANNOTATION,
)
from vk_provider.provider import PodRef, PodState, ProviderContext

MARKER = AwsSigV4(region="eu-west-1").marker()


class SignedMock(RecordingMock):
    async def get_pod_state(self, ref: PodRef) -> PodState | None:
        state = await super().get_pod_state(ref)
        return None if state is None else dataclasses.replace(state, traffic_auth=MARKER)


def written_annotations(api: RecordingApi) -> list[dict[str, str]]:
    return [
        body["metadata"]["annotations"]
        for _, body in api.patches
        if "annotations" in (body.get("metadata") or {})
    ]


async def test_the_traffic_auth_marker_is_written_once_beside_the_address(tmp_path: Path) -> None:
    api = RecordingApi()
    provider = SignedMock(ProviderContext("n", {}, "127.0.0.1", tmp_path))
    pods = CachedPods()
    reconciler = make_reconciler(api, provider, pods)
    pods.objects["u1"] = pod()
    await reconciler.reconcile("u1")
    (written,) = written_annotations(api)
    assert written[TRAFFIC_AUTH_ANNOTATION] == "aws-sigv4; service=sagemaker; region=eu-west-1"
    assert written[TRAFFIC_ADDRESS_ANNOTATION].startswith("http://")

    annotated = copy.deepcopy(pods.objects["u1"])
    annotated["metadata"]["annotations"].update(written)
    pods.objects["u1"] = annotated
    await reconciler.reconcile("u1")
    assert len(written_annotations(api)) == 1  # already on the pod: not written again
    assert provider.updates == []  # and writing our own annotation is no change to the pod


def test_the_marker_is_one_of_the_nodes_own_annotations() -> None:
    assert TRAFFIC_AUTH_ANNOTATION in OWN_ANNOTATIONS
