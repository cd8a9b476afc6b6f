"""The kubernetes provider's copies of ConfigMap, Secret and projected volumes: Secrets mounted by items."""

from __future__ import annotations

import base64
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from tests.unit.environment_fakes import FakeReader, make_pod
from vk_provider.errors import InvalidPodError
from vk_provider.node.podrequest import build_pod_request
from vk_provider.provider import PodRequest
from vk_providers.kubernetes.config import KubernetesSettings
from vk_providers.kubernetes.states import (
    owner_ref,
)
from vk_providers.kubernetes.translate import (
    NODE_LABEL,
    UID_LABEL,
    pod_selector,
    remote_objects,
    volume_secret_name,
)

NODE = "gpu-burst"
SETTINGS = KubernetesSettings(kubeconfig_file=Path("/etc/remote/kubeconfig"), namespace="remote-ns")
LOGO = b"\x89PNG\r\n\x1a\n\x00\xff"
CONFIG = {
    "name": "config",
    "configMap": {
        "name": "settings",
        "defaultMode": 0o440,
        "items": [
            {"key": "app.yaml", "path": "conf/app.yaml"},
            {"key": "logo.png", "path": "logo.png", "mode": 0o400},
        ],
    },
}
CREDENTIALS = {"name": "creds", "secret": {"secretName": "api", "defaultMode": 0o420}}
BUNDLE = {
    "name": "bundle",
    "projected": {
        "defaultMode": 0o444,
        "sources": [
            {"configMap": {"name": "settings", "items": [{"key": "level", "path": "level"}]}},
            {"secret": {"name": "api", "items": [{"key": "token", "path": "auth/token"}]}},
        ],
    },
}
TOKEN_VOLUME = {
    "name": "kube-api-access-x1y2z",
    "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}, {"configMap": {"name": "ca"}}]},
}
SERVER = {
    "name": "server",
    "image": "example/app:1",
    "volumeMounts": [
        {"name": "config", "mountPath": "/etc/app", "readOnly": True},
        {"name": "creds", "mountPath": "/run/token", "subPath": "token"},
        {"name": "bundle", "mountPath": "/bundle"},
        {"name": "kube-api-access-x1y2z", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"},
    ],
}


def reader() -> FakeReader:
    return FakeReader(
        config_maps={("team", "settings"): {"app.yaml": "workers: 4\n", "level": "debug"}},
        binary_data={("team", "settings"): {"logo.png": LOGO}},
        secrets={("team", "api"): {"token": b"s3cret-token"}},
    )


async def request_for(*volumes: dict[str, Any]) -> PodRequest:
    pod = make_pod(SERVER, namespace="team", nodeName=NODE, volumes=list(volumes))
    request, _ = await build_pod_request(pod, reader=reader(), pod_ip="", host_ip="", node_allocatable={})
    return request


def decoded(secret: dict[str, Any]) -> dict[str, bytes]:
    return {key: base64.b64decode(value) for key, value in secret["data"].items()}


async def test_each_volume_becomes_a_secret_mounted_by_items_at_the_files_paths_with_their_modes() -> None:
    objects = remote_objects(await request_for(CONFIG, CREDENTIALS, BUNDLE, TOKEN_VOLUME), SETTINGS, NODE)
    names = [volume_secret_name(SETTINGS, "uid-1234", index) for index in range(3)]
    assert [secret["metadata"]["name"] for secret in objects.volume_secrets] == names
    assert names[0] == "vk-uid-1234-vol-0"
    config, credentials, bundle = (decoded(secret) for secret in objects.volume_secrets)
    assert config == {"file-0": b"workers: 4\n", "file-1": LOGO}
    assert credentials == {"file-0": b"s3cret-token"}
    assert bundle == {"file-0": b"debug", "file-1": b"s3cret-token"}
    volumes = {volume["name"]: volume for volume in objects.pod["spec"]["volumes"]}
    assert set(volumes) == {"config", "creds", "bundle"}  # the home token volume stays home
    assert volumes["config"] == {
        "name": "config",
        "secret": {
            "secretName": names[0],
            "items": [
                {"key": "file-0", "path": "conf/app.yaml", "mode": 0o440},
                {"key": "file-1", "path": "logo.png", "mode": 0o400},
            ],
        },
    }
    assert volumes["creds"]["secret"]["items"] == [{"key": "file-0", "path": "token", "mode": 0o420}]
    assert volumes["bundle"]["secret"]["items"] == [
        {"key": "file-0", "path": "level", "mode": 0o444},
        {"key": "file-1", "path": "auth/token", "mode": 0o444},
    ]


async def test_the_mounts_of_copied_volumes_are_kept_as_written() -> None:
    objects = remote_objects(await request_for(CONFIG, CREDENTIALS, BUNDLE, TOKEN_VOLUME), SETTINGS, NODE)
    assert objects.pod["spec"]["containers"][0]["volumeMounts"] == SERVER["volumeMounts"][:3]


async def test_file_contents_never_appear_in_the_pod_spec() -> None:
    objects = remote_objects(await request_for(CONFIG, CREDENTIALS), SETTINGS, NODE)
    assert "s3cret" not in json.dumps(objects.pod)
    assert "workers" not in json.dumps(objects.pod)


async def test_volume_secrets_carry_the_pods_identity_so_they_are_found_and_deleted_with_it() -> None:
    objects = remote_objects(await request_for(CONFIG), SETTINGS, NODE)
    (secret,) = objects.volume_secrets
    assert secret["metadata"]["labels"][UID_LABEL] == "uid-1234"
    assert secret["metadata"]["labels"][NODE_LABEL] == NODE
    assert secret["metadata"]["namespace"] == "remote-ns"
    assert secret["type"] == "Opaque"
    assert owner_ref(secret, NODE) is not None
    assert pod_selector(NODE, "uid-1234") == (
        f"{NODE_LABEL}={NODE},app.kubernetes.io/managed-by=vk-provider,{UID_LABEL}=uid-1234"
    )


async def test_a_missing_optional_object_makes_an_empty_volume() -> None:
    absent = {"name": "config", "configMap": {"name": "nowhere", "optional": True}}
    objects = remote_objects(await request_for(absent), SETTINGS, NODE)
    (secret,) = objects.volume_secrets
    assert secret["data"] == {}
    assert objects.pod["spec"]["volumes"] == [
        {"name": "config", "secret": {"secretName": "vk-uid-1234-vol-0"}}
    ]


async def test_a_volume_the_node_did_not_read_is_refused() -> None:
    request = dataclasses.replace(await request_for(CONFIG), volume_files={})
    with pytest.raises(InvalidPodError, match=r"config \(configMap\)"):
        remote_objects(request, SETTINGS, NODE)


async def test_a_pod_without_such_volumes_has_no_volume_secrets() -> None:
    objects = remote_objects(await request_for({"name": "scratch", "emptyDir": {}}), SETTINGS, NODE)
    assert objects.volume_secrets == ()
