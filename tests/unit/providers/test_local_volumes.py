"""The local provider's volume folders: the kubelet's atomic switch, and which mounts it refuses."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from vk_provider.errors import InvalidPodError
from vk_provider.provider import ContainerSpec, PodRef, PodRequest, VolumeFile
from vk_providers.local.volumes import DATA_LINK, plan_mounts, prepare_volumes, write_volume

pytestmark = pytest.mark.unit


def test_a_rewrite_switches_every_file_at_once_and_leaves_no_old_payload(tmp_path: Path) -> None:
    folder = tmp_path / "token"
    write_volume(folder, [VolumeFile("token", b"one", 0o600), VolumeFile("conf/a.yaml", b"a: 1", 0o644)])
    first_payload = os.readlink(folder / DATA_LINK)
    assert (folder / "token").read_bytes() == b"one"
    assert (folder / "conf" / "a.yaml").read_bytes() == b"a: 1"
    assert (folder / "token").stat().st_mode & 0o777 == 0o600
    write_volume(folder, [VolumeFile("token", b"two", 0o600)])
    assert (folder / "token").read_bytes() == b"two"
    assert not (folder / "conf").exists()  # a key the new set lacks is gone
    assert not (folder / first_payload).exists()
    # The top-level names are links through ..data: one rename switched them all.
    assert os.readlink(folder / "token") == f"{DATA_LINK}/token"
    assert sorted(entry.name for entry in folder.iterdir() if entry.name.startswith("..")) == sorted(
        [DATA_LINK, os.readlink(folder / DATA_LINK)]
    )


def request(mounts: list[dict[str, Any]], volumes: list[dict[str, Any]], files: dict[str, Any]) -> PodRequest:
    container = {"name": "app", "volumeMounts": mounts}
    return PodRequest(
        ref=PodRef("ns", "p", "uid-1"),
        node_name="n",
        containers=(ContainerSpec(name="app", image="local", command=("sleep", "1")),),
        raw={"spec": {"containers": [container], "volumes": volumes}},
        volume_files=files,
    )


def test_mounts_point_at_the_volume_folders_and_host_paths(tmp_path: Path) -> None:
    volumes = [
        {"name": "conf", "configMap": {"name": "c"}},
        {"name": "scratch", "emptyDir": {}},
        {"name": "host", "hostPath": {"path": "/srv/models"}},
    ]
    mounts = [
        {"name": "conf", "mountPath": "/etc/app", "readOnly": True},
        {"name": "scratch", "mountPath": "/scratch"},
        {"name": "host", "mountPath": "/models"},
    ]
    pod = request(mounts, volumes, {"conf": (VolumeFile("a", b"1"),)})
    prepare_volumes(pod, tmp_path)
    assert plan_mounts(pod, tmp_path, "app") == (
        {"source": str(tmp_path / "volumes" / "conf"), "target": "/etc/app", "read_only": True},
        {"source": str(tmp_path / "volumes" / "scratch"), "target": "/scratch", "read_only": False},
        {"source": "/srv/models", "target": "/models", "read_only": False},
    )
    assert (tmp_path / "volumes" / "conf" / "a").read_bytes() == b"1"
    assert (tmp_path / "volumes" / "scratch").is_dir()


@pytest.mark.parametrize(
    ("mount", "volume", "message"),
    [
        (
            {"name": "c", "mountPath": "/x", "subPath": "a"},
            {"name": "c", "emptyDir": {}},
            "does not mount a subPath",
        ),
        ({"name": "gone", "mountPath": "/x"}, {"name": "c", "emptyDir": {}}, "the pod has no such volume"),
        (
            {"name": "c", "mountPath": "/x"},
            {"name": "c", "persistentVolumeClaim": {"claimName": "d"}},
            "cannot mount a volume of kind persistentVolumeClaim",
        ),
    ],
)
def test_a_mount_it_cannot_make_is_refused_by_name(
    tmp_path: Path, mount: dict[str, Any], volume: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidPodError, match=message):
        plan_mounts(request([mount], [volume], {}), tmp_path, "app")
