"""A pod that waits on its provider (no capacity yet, a model loading for minutes) is not failed by the
node: only a refusal for good fails a pod that must not restart, and nothing of the node's fails a pod for
taking long."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from tests.unit.node.test_pod_updates import CachedPods, RecordingApi, make_reconciler, pod
from vk_provider.errors import InvalidPodError, ProviderError
from vk_provider.provider import ContainerState, ContainerStateKind, PodRef, PodState, ProviderContext
from vk_providers.mock import MockProvider
from vk_providers.mock.provider import FAIL_CREATE_LABEL


def never_restarting(labels: dict[str, str]) -> dict[str, Any]:
    job_pod = copy.deepcopy(pod())
    job_pod["spec"]["restartPolicy"] = "Never"
    job_pod["metadata"]["labels"].update(labels)
    return job_pod


def last_status(api: RecordingApi) -> dict[str, Any]:
    status: dict[str, Any] = api.patches[-1][1]["status"]
    return status


@pytest.mark.parametrize(
    ("refusal", "phase"),
    [
        ("no-capacity-for-the-gpu", "Pending"),  # temporary: the pod waits, as a Job's pod must
        ("invalid-gpu-type", "Failed"),  # for good: a pod that never restarts fails
    ],
)
async def test_a_pod_that_never_restarts_fails_only_when_the_provider_refuses_it_for_good(
    tmp_path: Path, refusal: str, phase: str
) -> None:
    api = RecordingApi()
    provider = MockProvider(ProviderContext("n", {}, "127.0.0.1", tmp_path))
    pods = CachedPods()
    reconciler = make_reconciler(api, provider, pods)
    pods.objects["u1"] = never_restarting({FAIL_CREATE_LABEL: refusal})
    with pytest.raises(ProviderError) as raised:
        await reconciler.reconcile("u1")
    assert isinstance(raised.value, InvalidPodError) == (phase == "Failed")
    await reconciler._failed("u1", raised.value)
    status = last_status(api)
    assert (status["phase"], status["reason"]) == (phase, "ProviderFailed")
    assert refusal in status["message"]
    await provider.aclose()


class SlowLoading(MockProvider):
    """A provider whose pod is PROVISIONING, then pulling, then loading its model, for as long as told."""

    def __init__(self, context: ProviderContext) -> None:
        super().__init__(context)
        self.stage = "Provisioning"

    async def get_pod_state(self, ref: PodRef) -> PodState | None:
        state = await super().get_pod_state(ref)
        if state is None:
            return None
        waiting = ContainerState(
            "app", "img:1", ContainerStateKind.WAITING, reason=self.stage, message=f"{self.stage}..."
        )
        return PodState(ref, "Pending", containers=(waiting,))


async def test_a_pod_in_its_providers_stages_for_minutes_stays_pending_and_shows_the_stage(
    tmp_path: Path,
) -> None:
    api = RecordingApi()
    provider = SlowLoading(ProviderContext("n", {}, "127.0.0.1", tmp_path))
    pods = CachedPods()
    reconciler = make_reconciler(api, provider, pods)
    pods.objects["u1"] = never_restarting({})
    # Each pass is a status poll; the node keeps no clock of its own on a starting pod, so however
    # many passes (minutes) go by, only the provider's word moves the pod.
    for stage in ("Provisioning", "PullingImage", "LoadingModel"):
        provider.stage = stage
        for _ in range(3):
            await reconciler.reconcile("u1")
            pods.objects["u1"]["status"] = last_status(api)
        status = pods.objects["u1"]["status"]
        assert status["phase"] == "Pending"
        [container] = status["containerStatuses"]
        assert container["state"] == {"waiting": {"reason": stage, "message": f"{stage}..."}}
    await provider.aclose()
