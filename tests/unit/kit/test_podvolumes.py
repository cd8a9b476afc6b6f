"""Volumes a provider that runs one image on its own disk keeps, leaves behind, or refuses."""

from __future__ import annotations

from typing import Any

import pytest

from vk_provider.errors import InvalidPodError
from vk_provider.kit.podvolumes import is_home_token_volume, refuse_volumes_beyond_own_disk

TOKEN = {
    "name": "kube-api-access-x7k2p",
    "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]},
}
SCRATCH = {"name": "shm", "emptyDir": {"medium": "Memory"}}


def test_the_api_servers_token_volume_is_recognised_by_name_and_kind() -> None:
    assert is_home_token_volume(TOKEN)
    assert not is_home_token_volume({"name": "kube-api-access-x", "secret": {"secretName": "s"}})
    assert not is_home_token_volume({"name": "tokens", "projected": {"sources": []}})


def test_empty_dirs_and_the_token_volume_pass() -> None:
    refuse_volumes_beyond_own_disk({"volumes": [TOKEN, SCRATCH]}, "RunPod")
    refuse_volumes_beyond_own_disk({}, "RunPod")


@pytest.mark.parametrize(
    ("volume", "named"),
    [
        ({"name": "weights", "persistentVolumeClaim": {"claimName": "w"}}, "weights (persistentVolumeClaim)"),
        ({"name": "creds", "secret": {"secretName": "hf"}}, "creds (secret)"),
        ({"name": "conf", "configMap": {"name": "c"}}, "conf (configMap)"),
        ({"name": "odd"}, "odd (no source)"),
    ],
)
def test_any_other_volume_refuses_the_pod_naming_it(volume: dict[str, Any], named: str) -> None:
    with pytest.raises(InvalidPodError) as refused:
        refuse_volumes_beyond_own_disk({"volumes": [TOKEN, SCRATCH, volume]}, "SageMaker")
    message = str(refused.value)
    assert message.startswith("SageMaker cannot mount volumes")
    assert named in message
    assert "shm" not in message
    assert "kube-api-access" not in message
