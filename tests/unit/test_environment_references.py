"""ConfigMaps and Secrets: envFrom, key references, prefixes, invalid names, and the kubelet's events."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import pytest

from tests.unit.environment_fakes import (
    NAMESPACE,
    FakeReader,
    env_value,
    make_container,
    make_pod,
    resolve,
    resolve_variables,
)
from vk_provider.environment import EnvironmentEvent, MandatoryReferenceError
from vk_provider.environment.references import is_env_var_name

SETTINGS = {"LOG_LEVEL": "debug", "WORKERS": "4"}
CREDENTIALS = {"PASSWORD": b"s3cret-value", "USER": b"admin"}


def reader() -> FakeReader:
    return FakeReader(
        config_maps={(NAMESPACE, "settings"): dict(SETTINGS)},
        secrets={(NAMESPACE, "credentials"): dict(CREDENTIALS)},
    )


def config_map_ref(name: str, *, prefix: str | None = None, optional: bool | None = None) -> dict[str, Any]:
    return _env_from("configMapRef", name, prefix, optional)


def secret_ref(name: str, *, prefix: str | None = None, optional: bool | None = None) -> dict[str, Any]:
    return _env_from("secretRef", name, prefix, optional)


def _env_from(kind: str, name: str, prefix: str | None, optional: bool | None) -> dict[str, Any]:
    reference: dict[str, Any] = {"name": name}
    if optional is not None:
        reference["optional"] = optional
    source: dict[str, Any] = {kind: reference}
    if prefix is not None:
        source["prefix"] = prefix
    return source


def key_ref(variable: str, kind: str, name: str, key: str, *, optional: bool | None = None) -> dict[str, Any]:
    selector: dict[str, Any] = {"name": name, "key": key}
    if optional is not None:
        selector["optional"] = optional
    return {"name": variable, "valueFrom": {kind: selector}}


# envFrom


async def test_env_from_a_config_map_defines_every_key_in_key_order() -> None:
    pod = make_pod(make_container(env_from=[config_map_ref("settings")]))
    resolved = await resolve(pod, reader=reader())
    assert resolved.variables == (("LOG_LEVEL", "debug"), ("WORKERS", "4"))
    assert resolved.events == ()


async def test_env_from_a_secret_defines_every_key_as_text() -> None:
    pod = make_pod(make_container(env_from=[secret_ref("credentials")]))
    assert await resolve_variables(pod, reader=reader()) == {"PASSWORD": "s3cret-value", "USER": "admin"}


async def test_env_from_puts_the_prefix_before_every_key() -> None:
    pod = make_pod(make_container(env_from=[config_map_ref("settings", prefix="APP_")]))
    assert await resolve_variables(pod, reader=reader()) == {"APP_LOG_LEVEL": "debug", "APP_WORKERS": "4"}


async def test_keys_that_are_not_valid_names_are_skipped_with_one_event_listing_them_sorted() -> None:
    reader_ = FakeReader(
        config_maps={(NAMESPACE, "mixed"): {"GOOD": "1", "2BAD": "2", "a=b": "3", "..x": "4"}}
    )
    pod = make_pod(make_container(env_from=[config_map_ref("mixed")]))
    resolved = await resolve(pod, reader=reader_)
    assert resolved.variables == (("GOOD", "1"),)
    assert resolved.events == (
        EnvironmentEvent(
            "Warning",
            "InvalidEnvironmentVariableNames",
            f"Keys [..x, 2BAD, a=b] from the EnvFrom configMap {NAMESPACE}/mixed were skipped since they "
            "are considered invalid environment variable names.",
        ),
    )


async def test_names_are_checked_after_the_prefix_is_added() -> None:
    reader_ = FakeReader(config_maps={(NAMESPACE, "numbers"): {"1ST": "a", "OK": "b"}})
    fixed = make_pod(make_container(env_from=[config_map_ref("numbers", prefix="N_")]))
    assert await resolve_variables(fixed, reader=reader_) == {"N_1ST": "a", "N_OK": "b"}
    broken = make_pod(make_container(env_from=[config_map_ref("numbers", prefix="9")]))
    resolved = await resolve(broken, reader=reader_)
    assert resolved.variables == ()
    assert "Keys [91ST, 9OK]" in resolved.events[0].message


async def test_invalid_secret_keys_are_named_in_the_event_but_their_values_never_are() -> None:
    reader_ = FakeReader(secrets={(NAMESPACE, "odd"): {"bad key": b"hunter2"}})
    resolved = await resolve(make_pod(make_container(env_from=[secret_ref("odd")])), reader=reader_)
    (event,) = resolved.events
    assert event.reason == "InvalidEnvironmentVariableNames"
    assert f"[bad key] from the EnvFrom secret {NAMESPACE}/odd" in event.message
    assert "hunter2" not in event.message


@pytest.mark.parametrize(
    ("name", "valid"),
    [
        pytest.param("PATH", True, id="upper case letters are valid"),
        pytest.param("my.env-name", True, id="dots and dashes are valid"),
        pytest.param("_private", True, id="a leading underscore is valid"),
        pytest.param("-dash", True, id="a leading dash is valid"),
        pytest.param(".hidden", True, id="a single leading dot is valid"),
        pytest.param("A1", True, id="digits after the first character are valid"),
        pytest.param("1A", False, id="a leading digit is invalid"),
        pytest.param("", False, id="an empty name is invalid"),
        pytest.param(".", False, id="a single dot is invalid"),
        pytest.param("..", False, id="two dots are invalid"),
        pytest.param("..x", False, id="a name starting with two dots is invalid"),
        pytest.param("A=B", False, id="an equals sign is invalid"),
        pytest.param("A B", False, id="a space is invalid"),
        pytest.param("ÄPFEL", False, id="non-ASCII letters are invalid"),
        pytest.param("A\n", False, id="a trailing newline is invalid"),
    ],
)
def test_environment_variable_names_follow_the_kubelets_rule(name: str, valid: bool) -> None:
    assert is_env_var_name(name) is valid


async def test_a_later_env_from_source_overrides_an_earlier_one_in_place() -> None:
    reader_ = FakeReader(
        config_maps={(NAMESPACE, "base"): {"A": "1", "B": "2"}, (NAMESPACE, "overlay"): {"B": "3", "C": "4"}}
    )
    pod = make_pod(make_container(env_from=[config_map_ref("base"), config_map_ref("overlay")]))
    resolved = await resolve(pod, reader=reader_)
    assert resolved.variables == (("A", "1"), ("B", "3"), ("C", "4"))


async def test_secret_bytes_that_are_not_utf8_survive_and_encode_back_exactly() -> None:
    raw = b"caf\xe9\xff-ok"
    reader_ = FakeReader(secrets={(NAMESPACE, "binary"): {"BLOB": raw, "TEXT": "żółw".encode()}})
    variables = await resolve_variables(
        make_pod(make_container(env_from=[secret_ref("binary")])), reader=reader_
    )
    assert variables["TEXT"] == "żółw"
    assert os.fsencode(variables["BLOB"]) == raw
    assert variables["BLOB"].encode("utf-8", "surrogateescape") == raw


async def test_a_missing_optional_env_from_source_is_skipped_with_an_event() -> None:
    pod = make_pod(
        make_container(env_from=[config_map_ref("absent", optional=True), secret_ref("gone", optional=True)])
    )
    resolved = await resolve(pod, reader=reader())
    assert resolved.variables == ()
    assert [event.reason for event in resolved.events] == [
        "OptionalConfigMapNotFound",
        "OptionalSecretNotFound",
    ]
    assert all(event.type == "Warning" for event in resolved.events)
    assert resolved.events[0].message == 'configmap "absent" not found (envFrom of container "app")'
    assert resolved.events[1].message == 'secret "gone" not found (envFrom of container "app")'


@pytest.mark.parametrize(
    ("source", "reason", "message"),
    [
        pytest.param(
            config_map_ref("absent"),
            "MandatoryConfigMapNotFound",
            'configmap "absent" not found (envFrom of container "app")',
            id="a config map without optional",
        ),
        pytest.param(
            config_map_ref("absent", optional=False),
            "MandatoryConfigMapNotFound",
            'configmap "absent" not found (envFrom of container "app")',
            id="a config map with optional false",
        ),
        pytest.param(
            secret_ref("gone"),
            "MandatorySecretNotFound",
            'secret "gone" not found (envFrom of container "app")',
            id="a secret without optional",
        ),
    ],
)
async def test_a_missing_mandatory_env_from_source_stops_resolution(
    source: dict[str, Any], reason: str, message: str
) -> None:
    with pytest.raises(MandatoryReferenceError) as raised:
        await resolve(make_pod(make_container(env_from=[source])), reader=reader())
    assert raised.value.event == EnvironmentEvent("Warning", reason, message)
    assert str(raised.value) == message


# valueFrom: configMapKeyRef and secretKeyRef


async def test_key_references_take_one_value_each() -> None:
    container = make_container(
        env=[
            key_ref("LEVEL", "configMapKeyRef", "settings", "LOG_LEVEL"),
            key_ref("DB_PASSWORD", "secretKeyRef", "credentials", "PASSWORD"),
        ]
    )
    resolved = await resolve(make_pod(container), reader=reader())
    assert resolved.variables == (("LEVEL", "debug"), ("DB_PASSWORD", "s3cret-value"))
    assert resolved.events == ()


@dataclasses.dataclass(frozen=True)
class KeyMiss:
    kind: str
    name: str
    key: str
    reason: str
    """The reason without its Optional/Mandatory start."""
    message: str


KEY_MISSES = [
    pytest.param(
        KeyMiss(
            "configMapKeyRef",
            "absent",
            "LOG_LEVEL",
            "ConfigMapNotFound",
            'configmap "absent" not found (key "LOG_LEVEL" for variable "TARGET" of container "app")',
        ),
        id="a missing config map",
    ),
    pytest.param(
        KeyMiss(
            "configMapKeyRef",
            "settings",
            "NOPE",
            "ConfigMapKeyNotFound",
            'key "NOPE" not found in configmap "settings" (variable "TARGET" of container "app")',
        ),
        id="a missing config map key",
    ),
    pytest.param(
        KeyMiss(
            "secretKeyRef",
            "gone",
            "PASSWORD",
            "SecretNotFound",
            'secret "gone" not found (key "PASSWORD" for variable "TARGET" of container "app")',
        ),
        id="a missing secret",
    ),
    pytest.param(
        KeyMiss(
            "secretKeyRef",
            "credentials",
            "NOPE",
            "SecretKeyNotFound",
            'key "NOPE" not found in secret "credentials" (variable "TARGET" of container "app")',
        ),
        id="a missing secret key",
    ),
]


@pytest.mark.parametrize("miss", KEY_MISSES)
async def test_an_optional_key_reference_that_misses_leaves_the_variable_out_with_an_event(
    miss: KeyMiss,
) -> None:
    container = make_container(
        env=[key_ref("TARGET", miss.kind, miss.name, miss.key, optional=True), env_value("AFTER", "yes")]
    )
    resolved = await resolve(make_pod(container), reader=reader())
    assert resolved.variables == (("AFTER", "yes"),)
    assert resolved.events == (EnvironmentEvent("Warning", f"Optional{miss.reason}", miss.message),)


@pytest.mark.parametrize("miss", KEY_MISSES)
@pytest.mark.parametrize("optional", [None, False], ids=["without optional", "with optional false"])
async def test_a_mandatory_key_reference_that_misses_raises_with_its_event(
    miss: KeyMiss, optional: bool | None
) -> None:
    container = make_container(env=[key_ref("TARGET", miss.kind, miss.name, miss.key, optional=optional)])
    with pytest.raises(MandatoryReferenceError) as raised:
        await resolve(make_pod(container), reader=reader())
    assert raised.value.event == EnvironmentEvent("Warning", f"Mandatory{miss.reason}", miss.message)
    assert raised.value.earlier_events == ()


async def test_an_optional_miss_keeps_a_value_defined_earlier_under_the_same_name() -> None:
    container = make_container(
        env_from=[config_map_ref("settings")],
        env=[key_ref("WORKERS", "configMapKeyRef", "settings", "NOPE", optional=True)],
    )
    assert (await resolve_variables(make_pod(container), reader=reader()))["WORKERS"] == "4"


async def test_the_first_mandatory_miss_stops_resolution_and_carries_the_earlier_warnings() -> None:
    container = make_container(
        env=[
            key_ref("FIRST", "configMapKeyRef", "absent", "K", optional=True),
            key_ref("SECOND", "secretKeyRef", "gone", "K"),
            key_ref("THIRD", "configMapKeyRef", "never-read", "K"),
        ]
    )
    reader_ = reader()
    with pytest.raises(MandatoryReferenceError) as raised:
        await resolve(make_pod(container), reader=reader_)
    assert raised.value.event.reason == "MandatorySecretNotFound"
    assert [event.reason for event in raised.value.earlier_events] == ["OptionalConfigMapNotFound"]
    assert ("configmap", NAMESPACE, "never-read") not in reader_.reads


async def test_each_object_is_read_once_per_container_even_when_missing() -> None:
    container = make_container(
        env_from=[config_map_ref("settings"), config_map_ref("absent", optional=True)],
        env=[
            key_ref("A", "configMapKeyRef", "settings", "LOG_LEVEL"),
            key_ref("B", "configMapKeyRef", "settings", "WORKERS"),
            key_ref("C", "configMapKeyRef", "absent", "X", optional=True),
            key_ref("D", "secretKeyRef", "credentials", "USER"),
            key_ref("E", "secretKeyRef", "credentials", "PASSWORD"),
        ],
    )
    reader_ = reader()
    await resolve(make_pod(container), reader=reader_)
    object_reads = [read for read in reader_.reads if read[0] != "services"]
    assert object_reads == [
        ("configmap", NAMESPACE, "settings"),
        ("configmap", NAMESPACE, "absent"),
        ("secret", NAMESPACE, "credentials"),
    ]


async def test_a_config_map_and_a_secret_with_the_same_name_are_different_objects() -> None:
    reader_ = FakeReader(
        config_maps={(NAMESPACE, "same"): {"K": "from-configmap"}},
        secrets={(NAMESPACE, "same"): {"K": b"from-secret"}},
    )
    container = make_container(
        env=[key_ref("C", "configMapKeyRef", "same", "K"), key_ref("S", "secretKeyRef", "same", "K")]
    )
    assert await resolve_variables(make_pod(container), reader=reader_) == {
        "C": "from-configmap",
        "S": "from-secret",
    }


async def test_references_are_looked_up_in_the_pods_namespace() -> None:
    reader_ = FakeReader(config_maps={("elsewhere", "settings"): {"K": "v"}})
    container = make_container(env=[key_ref("K", "configMapKeyRef", "settings", "K")])
    assert await resolve_variables(make_pod(container, namespace="elsewhere"), reader=reader_) == {"K": "v"}
    with pytest.raises(MandatoryReferenceError):
        await resolve(make_pod(container), reader=reader_)


async def test_mandatory_miss_messages_never_contain_secret_values() -> None:
    container = make_container(
        env_from=[secret_ref("credentials")], env=[key_ref("X", "secretKeyRef", "credentials", "MISSING")]
    )
    with pytest.raises(MandatoryReferenceError) as raised:
        await resolve(make_pod(container), reader=reader())
    assert "s3cret-value" not in str(raised.value)
    assert 'key "MISSING" not found in secret "credentials"' in raised.value.event.message
