"""The node publishes a pod's traffic address and auth marker in its status, never in annotations, and
only for the pods an Offload routes to.

The router trusts only the status (which NodeRestriction lets only the pod's node write), so the
address and the marker must ride in the status patch that reports the pod's state, one write per
transition. It reads them only from pods carrying the Offload label, so no other pod carries them. Driven
like test_pod_updates: the reconciler directly, an in-memory provider whose states ask for SigV4, and
a recording stand-in for the KubeApi wrapper.
"""

from __future__ import annotations

import copy
import dataclasses
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.unit.node.test_pod_updates import CachedPods, RecordingApi, RecordingMock, make_reconciler, pod
from vk_provider.kit.traffic_auth import AwsSigV4
from vk_provider.kit.traffic_signature import TrafficKey, seal, seal_refusal
from vk_provider.node import podstatus
from vk_provider.node.pods import OWN_ANNOTATIONS
from vk_provider.offload.names import (
    OFFLOAD_LABEL,
    TRAFFIC_ADDRESS_ANNOTATION,
    TRAFFIC_ADDRESS_CONDITION,
    TRAFFIC_AUTH_ANNOTATION,
    TRAFFIC_AUTH_CONDITION,
    TRAFFIC_SIGNATURE_CONDITION,
)
from vk_provider.provider import PodRef, PodState, ProviderContext

MARKER = AwsSigV4(region="eu-west-1").marker()
NOW = datetime(2026, 12, 3, 13, 0, 0, tzinfo=UTC)


class SignedMock(RecordingMock):
    async def get_pod_state(self, ref: PodRef) -> PodState | None:
        state = await super().get_pod_state(ref)
        return None if state is None else dataclasses.replace(state, traffic_auth=MARKER)


def away_pod() -> dict[str, Any]:
    """A pod of an Offload's away Deployment."""
    the_pod = pod()
    the_pod["metadata"]["labels"][OFFLOAD_LABEL] = "web"
    return the_pod


def status_patches(api: RecordingApi) -> list[dict[str, Any]]:
    return [body["status"] for path, body in api.patches if path.endswith("/status")]


def written_annotations(api: RecordingApi) -> list[dict[str, str]]:
    return [
        body["metadata"]["annotations"]
        for _, body in api.patches
        if "annotations" in (body.get("metadata") or {})
    ]


def conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {condition["type"]: condition for condition in status.get("conditions", [])}


async def test_address_and_marker_ride_in_the_status_patch_and_never_in_annotations(tmp_path: Path) -> None:
    api = RecordingApi()
    provider = SignedMock(ProviderContext("n", {}, "127.0.0.1", tmp_path))
    pods = CachedPods()
    reconciler = make_reconciler(api, provider, pods)
    pods.objects["u1"] = away_pod()
    await reconciler.reconcile("u1")

    (status,) = status_patches(api)
    published = conditions(status)
    assert published[TRAFFIC_AUTH_CONDITION]["message"] == "aws-sigv4; service=sagemaker; region=eu-west-1"
    assert published[TRAFFIC_ADDRESS_CONDITION]["message"].startswith("http://")
    for kind in (TRAFFIC_ADDRESS_CONDITION, TRAFFIC_AUTH_CONDITION):
        assert published[kind]["status"] == "True"
        assert published[kind]["reason"] == "Published"
    assert not any(
        key in (TRAFFIC_ADDRESS_ANNOTATION, TRAFFIC_AUTH_ANNOTATION)
        for written in written_annotations(api)
        for key in written
    )

    # Once the cache shows the status written, nothing is written again.
    stored = copy.deepcopy(pods.objects["u1"])
    stored["status"] = {**status, "conditions": list(status["conditions"])}
    pods.objects["u1"] = stored
    await reconciler.reconcile("u1")
    assert len(status_patches(api)) == 1
    assert provider.updates == []


def state(address: str | None, auth: str | None = None) -> PodState:
    return PodState(
        ref=PodRef("ns", "web", "u1"), phase="Running", traffic_address=address, traffic_auth=auth
    )


def test_a_new_address_is_a_difference_and_foreign_conditions_are_not() -> None:
    the_pod = away_pod()
    first = podstatus.pod_status(the_pod, state("http://10.0.0.1:80"), host_ip="127.0.0.1", now=NOW)
    foreign = {"type": "example.com/Gate", "status": "False", "message": "someone else's"}
    current = {**first, "conditions": [*first["conditions"], foreign]}
    assert not podstatus.differs(current, first)
    moved = podstatus.pod_status(
        {**the_pod, "status": current}, state("http://10.0.0.2:80"), host_ip="127.0.0.1", now=NOW
    )
    assert podstatus.differs(current, moved)
    # Only our own condition types go in the patch: the merge by type keeps the foreign one.
    assert "example.com/Gate" not in conditions(moved)


def test_a_state_without_an_address_leaves_the_published_one_alone() -> None:
    """A provider reports the address only while the pod runs; the merge keeps the last one."""
    the_pod = away_pod()
    first = podstatus.pod_status(the_pod, state("http://10.0.0.1:80"), host_ip="127.0.0.1", now=NOW)
    later = podstatus.pod_status({**the_pod, "status": first}, state(None), host_ip="127.0.0.1", now=NOW)
    assert TRAFFIC_ADDRESS_CONDITION not in conditions(later)
    assert not podstatus.differs(first, later)


def test_the_old_annotations_stay_out_of_the_pods_fingerprint() -> None:
    assert {TRAFFIC_ADDRESS_ANNOTATION, TRAFFIC_AUTH_ANNOTATION} <= OWN_ANNOTATIONS


def test_a_pod_no_offload_routes_to_publishes_no_address_until_it_gets_the_label() -> None:
    plain = pod()
    status = podstatus.pod_status(plain, state("http://10.0.0.1:80", MARKER), host_ip="127.0.0.1", now=NOW)
    assert TRAFFIC_ADDRESS_CONDITION not in conditions(status)
    assert TRAFFIC_AUTH_CONDITION not in conditions(status)
    labelled = away_pod()
    labelled["status"] = status
    later = podstatus.pod_status(labelled, state("http://10.0.0.1:80", MARKER), host_ip="127.0.0.1", now=NOW)
    assert conditions(later)[TRAFFIC_ADDRESS_CONDITION]["message"] == "http://10.0.0.1:80"
    assert podstatus.differs(status, later)  # one status write publishes it


KEY = TrafficKey(b"the node's traffic key, 32 bytes")


def test_the_seal_covers_the_pods_uid_the_address_and_the_marker() -> None:
    the_pod = away_pod()
    uid = the_pod["metadata"]["uid"]
    status = podstatus.pod_status(
        the_pod, state("http://10.0.0.1:80", MARKER), host_ip="127.0.0.1", now=NOW, traffic_key=KEY
    )
    published = conditions(status)[TRAFFIC_SIGNATURE_CONDITION]
    assert (published["status"], published["reason"]) == ("True", "Published")
    sealed = published["message"]
    assert sealed == seal(KEY, uid=uid, address="http://10.0.0.1:80", marker=MARKER)
    check = {"uid": uid, "address": "http://10.0.0.1:80", "marker": MARKER}
    assert seal_refusal((KEY,), sealed, **check) is None
    for field, other in (("uid", "another-uid"), ("address", "http://evil:80"), ("marker", "")):
        assert seal_refusal((KEY,), sealed, **{**check, field: other}) is not None
    # Without a key nothing is sealed (and the router sends such an address nothing).
    unsealed = podstatus.pod_status(the_pod, state("http://10.0.0.1:80"), host_ip="127.0.0.1", now=NOW)
    assert TRAFFIC_SIGNATURE_CONDITION not in conditions(unsealed)


def test_an_address_someone_else_wrote_is_rewritten_and_never_sealed() -> None:
    """The node seals only what its provider says: a forged address in the status is replaced while
    the provider gives one, and left unsealed while it gives none."""
    the_pod = away_pod()
    first = podstatus.pod_status(
        the_pod, state("http://10.0.0.1:80"), host_ip="127.0.0.1", now=NOW, traffic_key=KEY
    )
    forged_conditions = [
        {**condition, "message": "http://evil:80"}
        if condition["type"] == TRAFFIC_ADDRESS_CONDITION
        else condition
        for condition in first["conditions"]
    ]
    forged = {**first, "conditions": forged_conditions}
    repaired = podstatus.pod_status(
        {**the_pod, "status": forged},
        state("http://10.0.0.1:80"),
        host_ip="127.0.0.1",
        now=NOW,
        traffic_key=KEY,
    )
    assert podstatus.differs(forged, repaired)
    assert conditions(repaired)[TRAFFIC_ADDRESS_CONDITION]["message"] == "http://10.0.0.1:80"

    quiet = podstatus.pod_status(
        {**the_pod, "status": forged}, state(None), host_ip="127.0.0.1", now=NOW, traffic_key=KEY
    )
    assert TRAFFIC_SIGNATURE_CONDITION not in conditions(quiet)  # the old seal stays, over the real address
    old_seal = conditions(forged)[TRAFFIC_SIGNATURE_CONDITION]["message"]
    uid = the_pod["metadata"]["uid"]
    assert seal_refusal((KEY,), old_seal, uid=uid, address="http://evil:80", marker="") is not None


async def test_the_reconciler_seals_with_the_key_the_daemon_hands_it(tmp_path: Path) -> None:
    api = RecordingApi()
    provider = SignedMock(ProviderContext("n", {}, "127.0.0.1", tmp_path))
    pods = CachedPods()
    reconciler = make_reconciler(api, provider, pods)
    reconciler.traffic_key = KEY
    pods.objects["u1"] = away_pod()
    await reconciler.reconcile("u1")

    (status,) = status_patches(api)
    published = conditions(status)
    sealed = published[TRAFFIC_SIGNATURE_CONDITION]["message"]
    address = published[TRAFFIC_ADDRESS_CONDITION]["message"]
    uid = pods.objects["u1"]["metadata"]["uid"]
    assert seal_refusal((KEY,), sealed, uid=uid, address=address, marker=MARKER) is None
