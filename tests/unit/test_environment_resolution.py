"""The whole resolution: sources in the kubelet's precedence, overrides, expansion in context, errors."""

from __future__ import annotations

import pytest

from tests.unit.environment_fakes import (
    NAMESPACE,
    FakeReader,
    env_from_field,
    env_value,
    make_container,
    make_pod,
    make_port,
    make_service,
    resolve,
    resolve_variables,
)
from vk_provider import environment
from vk_provider.environment import InvalidEnvironmentError, ResolvedEnvironment


def full_reader() -> FakeReader:
    return FakeReader(
        config_maps={(NAMESPACE, "settings"): {"MODE": "fast", "REDIS_SERVICE_PORT": "7000"}},
        secrets={(NAMESPACE, "token"): {"TOKEN": b"t0k3n"}},
        services_by_namespace={NAMESPACE: [make_service("redis", "10.0.0.11", make_port(6379))]},
    )


async def test_service_links_come_first_then_env_from_then_env() -> None:
    container = make_container(
        env_from=[{"configMapRef": {"name": "settings"}}, {"secretRef": {"name": "token"}}],
        env=[env_value("GREETING", "hello")],
    )
    resolved = await resolve(make_pod(container), reader=full_reader())
    names = [name for name, _ in resolved.variables]
    assert names == [
        "REDIS_SERVICE_HOST",
        "REDIS_SERVICE_PORT",
        "REDIS_PORT",
        "REDIS_PORT_6379_TCP",
        "REDIS_PORT_6379_TCP_PROTO",
        "REDIS_PORT_6379_TCP_PORT",
        "REDIS_PORT_6379_TCP_ADDR",
        "MODE",
        "TOKEN",
        "GREETING",
    ]


async def test_a_redefined_name_keeps_its_first_position_and_takes_the_last_value() -> None:
    container = make_container(
        env_from=[{"configMapRef": {"name": "settings"}}],
        env=[env_value("A", "1"), env_value("MODE", "slow"), env_value("A", "2")],
    )
    resolved = await resolve(make_pod(container), reader=full_reader())
    assert resolved.variables == (
        ("REDIS_SERVICE_HOST", "10.0.0.11"),
        ("REDIS_SERVICE_PORT", "7000"),
        ("REDIS_PORT", "tcp://10.0.0.11:6379"),
        ("REDIS_PORT_6379_TCP", "tcp://10.0.0.11:6379"),
        ("REDIS_PORT_6379_TCP_PROTO", "tcp"),
        ("REDIS_PORT_6379_TCP_PORT", "6379"),
        ("REDIS_PORT_6379_TCP_ADDR", "10.0.0.11"),
        ("MODE", "slow"),
        ("A", "2"),
    )


async def test_an_env_value_expands_references_to_everything_defined_before_it() -> None:
    container = make_container(
        env_from=[{"configMapRef": {"name": "settings"}}, {"secretRef": {"name": "token"}}],
        env=[
            env_value("HOST", "$(REDIS_SERVICE_HOST)"),
            env_value("URL", "redis://$(HOST):$(REDIS_SERVICE_PORT)/$(MODE)?auth=$(TOKEN)"),
            env_value("EARLY", "$(LATE)"),
            env_value("LATE", "late"),
            env_value("ESCAPED", "$$(HOST)"),
        ],
    )
    variables = await resolve_variables(make_pod(container), reader=full_reader())
    assert variables["HOST"] == "10.0.0.11"
    assert variables["URL"] == "redis://10.0.0.11:7000/fast?auth=t0k3n"
    assert variables["EARLY"] == "$(LATE)"
    assert variables["ESCAPED"] == "$(HOST)"


async def test_an_env_value_can_extend_its_own_earlier_definition() -> None:
    container = make_container(
        env=[env_value("PATH", "/usr/bin"), env_value("PATH", "/opt/bin:$(PATH)")],
    )
    assert await resolve_variables(make_pod(container)) == {"PATH": "/opt/bin:/usr/bin"}


async def test_values_from_field_refs_can_be_referred_to_later() -> None:
    container = make_container(
        env=[env_from_field("POD", "metadata.name"), env_value("LOG", "/var/log/$(POD).log")],
    )
    assert (await resolve_variables(make_pod(container)))["LOG"] == "/var/log/web-0.log"


async def test_an_entry_with_neither_value_nor_value_from_is_an_empty_variable() -> None:
    container = make_container(
        env=[{"name": "EMPTY"}, env_value("ALSO_EMPTY", ""), {"name": "NULL", "valueFrom": None}]
    )
    resolved = await resolve(make_pod(container))
    assert resolved.variables == (("EMPTY", ""), ("ALSO_EMPTY", ""), ("NULL", ""))


async def test_a_value_wins_over_value_from_as_in_the_kubelet() -> None:
    entry = {"name": "X", "value": "literal", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    assert await resolve_variables(make_pod(make_container(env=[entry]))) == {"X": "literal"}


async def test_a_null_selector_is_ignored_in_favour_of_the_one_that_is_set() -> None:
    entry = {"name": "X", "valueFrom": {"configMapKeyRef": None, "fieldRef": {"fieldPath": "metadata.uid"}}}
    assert await resolve_variables(make_pod(make_container(env=[entry]))) == {"X": "uid-1234"}


async def test_an_unsupported_value_from_source_raises_instead_of_starting_without_it() -> None:
    entry = {
        "name": "FROM_FILE",
        "valueFrom": {"fileKeyRef": {"volumeName": "cfg", "path": "a.env", "key": "K"}},
    }
    with pytest.raises(InvalidEnvironmentError) as raised:
        await resolve(make_pod(make_container(env=[entry])))
    assert (
        str(raised.value)
        == 'container "app", environment variable "FROM_FILE": unsupported valueFrom source fileKeyRef'
    )


async def test_an_init_container_is_resolved_like_any_other() -> None:
    init = make_container(
        "migrate",
        env=[
            env_value("STEP", "migrate"),
            {"name": "C", "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "K", "optional": True}}},
        ],
    )
    pod = make_pod(make_container(), initContainers=[init])
    resolved = await resolve(pod, init)
    assert resolved.variables == (("STEP", "migrate"),)
    assert 'container "migrate"' in resolved.events[0].message


async def test_a_container_without_env_gets_only_service_links() -> None:
    resolved = await resolve(make_pod(), reader=full_reader())
    assert resolved.variables[0] == ("REDIS_SERVICE_HOST", "10.0.0.11")
    assert resolved.events == ()


async def test_a_container_without_env_and_services_gets_an_empty_environment() -> None:
    assert await resolve(make_pod()) == ResolvedEnvironment(variables=(), events=())


async def test_a_pod_without_a_namespace_is_resolved_in_the_default_namespace() -> None:
    reader = FakeReader(config_maps={("default", "settings"): {"K": "v"}})
    pod = make_pod(make_container(env_from=[{"configMapRef": {"name": "settings"}}]))
    del pod["metadata"]["namespace"]
    assert await resolve_variables(pod, reader=reader) == {"K": "v"}


def test_the_package_exports_the_public_api() -> None:
    assert set(environment.__all__) == {
        "EnvironmentEvent",
        "InvalidEnvironmentError",
        "InvalidQuantityError",
        "MandatoryReferenceError",
        "ReferenceReader",
        "ResolvedEnvironment",
        "TokenIssuer",
        "expand",
        "parse_quantity",
        "resolve_container_environment",
        "resolve_volume_files",
    }
    assert issubclass(environment.InvalidEnvironmentError, ValueError)
