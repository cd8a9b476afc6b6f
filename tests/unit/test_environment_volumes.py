"""ConfigMap, Secret and projected volumes read into files: items, modes, optional, and FailedMount."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.environment_fakes import NAMESPACE, FakeReader, make_pod
from vk_provider.environment import EnvironmentEvent, MandatoryReferenceError, resolve_volume_files
from vk_provider.node.podrequest import build_pod_request
from vk_provider.provider import VolumeFile

SETTINGS = {"app.yaml": "workers: 4\n", "level": "debug"}
LOGO = b"\x89PNG\r\n\x1a\n\x00\xff"
CREDENTIALS = {"password": b"s3cret\x00\xfe", "user": b"admin"}


def reader() -> FakeReader:
    return FakeReader(
        config_maps={(NAMESPACE, "settings"): dict(SETTINGS)},
        binary_data={(NAMESPACE, "settings"): {"logo.png": LOGO}},
        secrets={(NAMESPACE, "credentials"): dict(CREDENTIALS)},
    )


async def files(
    *volumes: dict[str, Any], source: FakeReader | None = None
) -> dict[str, tuple[VolumeFile, ...]]:
    return await resolve_volume_files(make_pod(volumes=list(volumes)), source or reader())


async def failed_mount(*volumes: dict[str, Any]) -> EnvironmentEvent:
    with pytest.raises(MandatoryReferenceError) as stopped:
        await files(*volumes)
    return stopped.value.event


async def test_every_key_of_a_config_map_is_a_file_binary_data_too_with_the_default_mode() -> None:
    resolved = await files({"name": "config", "configMap": {"name": "settings"}})
    assert resolved == {
        "config": (
            VolumeFile("app.yaml", b"workers: 4\n", 0o644),
            VolumeFile("level", b"debug", 0o644),
            VolumeFile("logo.png", LOGO, 0o644),
        )
    }


async def test_a_secret_volume_gives_the_exact_bytes_with_its_default_mode() -> None:
    resolved = await files({"name": "creds", "secret": {"secretName": "credentials", "defaultMode": 0o400}})
    assert resolved["creds"] == (
        VolumeFile("password", b"s3cret\x00\xfe", 0o400),
        VolumeFile("user", b"admin", 0o400),
    )


async def test_items_choose_keys_and_place_them_with_their_own_modes() -> None:
    volume = {
        "name": "config",
        "configMap": {
            "name": "settings",
            "defaultMode": 0o440,
            "items": [
                {"key": "app.yaml", "path": "conf/app.yaml"},
                {"key": "logo.png", "path": "static/logo.png", "mode": 0o600},
            ],
        },
    }
    assert (await files(volume))["config"] == (
        VolumeFile("conf/app.yaml", b"workers: 4\n", 0o440),
        VolumeFile("static/logo.png", LOGO, 0o600),
    )


async def test_a_projected_volume_merges_its_sources_with_the_volumes_default_mode() -> None:
    volume = {
        "name": "bundle",
        "projected": {
            "defaultMode": 0o444,
            "sources": [
                {"configMap": {"name": "settings", "items": [{"key": "level", "path": "level.txt"}]}},
                {
                    "secret": {
                        "name": "credentials",
                        "items": [{"key": "user", "path": "user", "mode": 0o400}],
                    }
                },
            ],
        },
    }
    assert (await files(volume))["bundle"] == (
        VolumeFile("level.txt", b"debug", 0o444),
        VolumeFile("user", b"admin", 0o400),
    )


async def test_projected_volumes_with_other_sources_and_other_kinds_are_left_to_the_provider() -> None:
    source = reader()
    token = {
        "name": "kube-api-access-abcde",
        "projected": {
            "sources": [
                {"serviceAccountToken": {"path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt"}},
                {"downwardAPI": {"items": [{"path": "namespace"}]}},
            ]
        },
    }
    resolved = await files(token, {"name": "scratch", "emptyDir": {}}, source=source)
    assert resolved == {}
    assert source.reads == []  # the home token volume costs no reads


async def test_a_missing_optional_object_or_key_gives_what_there_is() -> None:
    resolved = await files(
        {"name": "absent", "configMap": {"name": "nowhere", "optional": True}},
        {
            "name": "partial",
            "secret": {
                "secretName": "credentials",
                "optional": True,
                "items": [{"key": "user", "path": "u"}, {"key": "token", "path": "t"}],
            },
        },
    )
    assert resolved == {"absent": (), "partial": (VolumeFile("u", b"admin", 0o644),)}


@pytest.mark.parametrize(
    ("volume", "detail"),
    [
        ({"name": "config", "configMap": {"name": "nowhere"}}, 'configmap "nowhere" not found'),
        ({"name": "config", "secret": {"secretName": "nowhere"}}, 'secret "nowhere" not found'),
        (
            {"name": "config", "configMap": {"name": "settings", "items": [{"key": "nope", "path": "x"}]}},
            "configmap references non-existent config key: nope",
        ),
        (
            {
                "name": "config",
                "secret": {"secretName": "credentials", "items": [{"key": "nope", "path": "x"}]},
            },
            "references non-existent secret key: nope",
        ),
        (
            {"name": "config", "projected": {"sources": [{"secret": {"name": "nowhere"}}]}},
            'secret "nowhere" not found',
        ),
    ],
)
async def test_a_missing_mandatory_object_or_key_stops_the_pod_with_the_kubelets_failed_mount(
    volume: dict[str, Any], detail: str
) -> None:
    event = await failed_mount(volume)
    assert event == EnvironmentEvent(
        "Warning", "FailedMount", f'MountVolume.SetUp failed for volume "config" : {detail}'
    )


async def test_each_object_is_read_once_per_pod() -> None:
    source = reader()
    await files(
        {"name": "a", "configMap": {"name": "settings"}},
        {"name": "b", "configMap": {"name": "settings", "items": [{"key": "level", "path": "l"}]}},
        source=source,
    )
    assert source.reads == [("configmap", NAMESPACE, "settings")]


async def test_the_pod_request_carries_the_files_and_other_pods_carry_none() -> None:
    volumes = [
        {"name": "creds", "secret": {"secretName": "credentials", "items": [{"key": "user", "path": "u"}]}}
    ]
    request, _ = await build_pod_request(
        make_pod(volumes=volumes), reader=reader(), pod_ip="", host_ip="", node_allocatable={}
    )
    assert request.volume_files == {"creds": (VolumeFile("u", b"admin", 0o644),)}
    plain, _ = await build_pod_request(
        make_pod(), reader=reader(), pod_ip="", host_ip="", node_allocatable={}
    )
    assert plain.volume_files == {}


class RecordingIssuer:
    """Hands out numbered tokens and remembers what each request asked for."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str, int]] = []

    async def service_account_token(
        self, pod: dict[str, Any], *, audience: str, expiration_seconds: int
    ) -> bytes:
        self.asked.append((pod["metadata"]["uid"], audience, expiration_seconds))
        return f"token-{len(self.asked)}".encode()


KUBE_API_ACCESS = {
    "name": "kube-api-access-abcde",
    "projected": {
        "defaultMode": 0o644,
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "settings", "items": [{"key": "level", "path": "ca.crt"}]}},
            {
                "downwardAPI": {
                    "items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]
                }
            },
        ],
    },
}


async def test_with_a_token_issuer_the_api_access_volume_resolves_whole() -> None:
    issuer = RecordingIssuer()
    audience = {
        "name": "vault",
        "projected": {"sources": [{"serviceAccountToken": {"audience": "vault", "path": "t"}}]},
    }
    resolved = await resolve_volume_files(
        make_pod(volumes=[KUBE_API_ACCESS, audience]), reader(), tokens=issuer
    )
    assert resolved["kube-api-access-abcde"] == (
        VolumeFile("token", b"token-1", 0o644),
        VolumeFile("ca.crt", b"debug", 0o644),
        VolumeFile("namespace", NAMESPACE.encode(), 0o644),
    )
    assert resolved["vault"] == (VolumeFile("t", b"token-2", 0o644),)
    # The source's lifetime, else the API's default hour; the audience, else the API server's ("").
    assert issuer.asked == [("uid-1234", "", 3607), ("uid-1234", "vault", 3600)]


async def test_a_downward_item_this_node_cannot_mount_fails_the_pod_by_name() -> None:
    cpu = {"path": "cpu", "resourceFieldRef": {"containerName": "app", "resource": "limits.cpu"}}
    volume = {"name": "info", "projected": {"sources": [{"downwardAPI": {"items": [cpu]}}]}}
    with pytest.raises(ValueError, match='volume "info", item "cpu": only fieldRef items'):
        await resolve_volume_files(make_pod(volumes=[volume]), reader(), tokens=RecordingIssuer())
