"""Shared fakes for the environment tests: an in-memory reader and small pod builders (no tests here)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from vk_provider.environment import ResolvedEnvironment, resolve_container_environment

NAMESPACE = "team"
POD_IP = "10.1.2.3"
HOST_IP = "192.168.0.10"


@dataclasses.dataclass
class FakeReader:
    """API objects held in dicts, keyed by (namespace, name); records every read."""

    config_maps: dict[tuple[str, str], dict[str, str]] = dataclasses.field(default_factory=dict)
    secrets: dict[tuple[str, str], dict[str, bytes]] = dataclasses.field(default_factory=dict)
    services_by_namespace: dict[str, list[dict[str, Any]]] = dataclasses.field(default_factory=dict)
    binary_data: dict[tuple[str, str], dict[str, bytes]] = dataclasses.field(default_factory=dict)
    """ConfigMaps' binaryData, beside their `config_maps` data (a ConfigMap may have only this)."""
    reads: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)

    async def config_map(self, namespace: str, name: str) -> Mapping[str, str] | None:
        self.reads.append(("configmap", namespace, name))
        return self.config_maps.get((namespace, name))

    async def config_map_files(self, namespace: str, name: str) -> Mapping[str, bytes] | None:
        self.reads.append(("configmap", namespace, name))
        key = (namespace, name)
        if key not in self.config_maps and key not in self.binary_data:
            return None
        text = {item: value.encode() for item, value in self.config_maps.get(key, {}).items()}
        return {**text, **self.binary_data.get(key, {})}

    async def secret(self, namespace: str, name: str) -> Mapping[str, bytes] | None:
        self.reads.append(("secret", namespace, name))
        return self.secrets.get((namespace, name))

    async def services(self, namespace: str) -> Sequence[Mapping[str, Any]]:
        self.reads.append(("services", namespace, ""))
        return self.services_by_namespace.get(namespace, [])


def make_container(
    name: str = "app",
    *,
    env: Sequence[Mapping[str, Any]] = (),
    env_from: Sequence[Mapping[str, Any]] = (),
    resources: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": "example/app:1"}
    if env:
        container["env"] = list(env)
    if env_from:
        container["envFrom"] = list(env_from)
    if resources is not None:
        container["resources"] = dict(resources)
    return container


def make_pod(
    *containers: Mapping[str, Any],
    namespace: str = NAMESPACE,
    metadata: Mapping[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-0", "namespace": namespace, "uid": "uid-1234", **(metadata or {})},
        "spec": {"containers": list(containers) or [make_container()], **spec},
        "status": {"phase": "Pending"},
    }


def make_service(name: str, cluster_ip: str, *ports: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"clusterIP": cluster_ip, "ports": list(ports)},
    }


def make_port(number: int, name: str | None = None, protocol: str | None = None) -> dict[str, Any]:
    port: dict[str, Any] = {"port": number, "targetPort": number}
    if name is not None:
        port["name"] = name
    if protocol is not None:
        port["protocol"] = protocol
    return port


async def resolve(
    pod: Mapping[str, Any],
    container: Mapping[str, Any] | None = None,
    *,
    reader: FakeReader | None = None,
    pod_ip: str = POD_IP,
    host_ip: str = HOST_IP,
    node_allocatable: Mapping[str, str] | None = None,
) -> ResolvedEnvironment:
    """Resolves `container` (the pod's first container by default) with test defaults."""
    return await resolve_container_environment(
        pod,
        container if container is not None else pod["spec"]["containers"][0],
        reader=reader if reader is not None else FakeReader(),
        pod_ip=pod_ip,
        host_ip=host_ip,
        node_allocatable=node_allocatable if node_allocatable is not None else {},
    )


async def resolve_variables(pod: Mapping[str, Any], **kwargs: Any) -> dict[str, str]:
    return dict((await resolve(pod, **kwargs)).variables)


def env_value(name: str, value: str) -> dict[str, Any]:
    return {"name": name, "value": value}


def env_from_field(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}}
