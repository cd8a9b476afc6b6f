"""Service links: the `{NAME}_SERVICE_HOST`-style variables every container gets for its Services.

Which Services: those of the pod's namespace that have a cluster IP (not headless "None", not the
empty one of ExternalName Services) when `enableServiceLinks` is on, plus the API server's own
`kubernetes` Service of the `default` namespace always, even with links off, because in-cluster
clients find the API server through `KUBERNETES_SERVICE_HOST`. A Service of the pod's namespace that
is also called `kubernetes` wins over the API server's.

For a Service `my-db` at 10.0.0.5 with ports 5432/TCP (unnamed) and 9187/TCP named `metrics`:

    MY_DB_SERVICE_HOST=10.0.0.5
    MY_DB_SERVICE_PORT=5432                       (the first port)
    MY_DB_SERVICE_PORT_METRICS=9187               (each named port)
    MY_DB_PORT=tcp://10.0.0.5:5432                (Docker-link style, first port)
    MY_DB_PORT_5432_TCP=tcp://10.0.0.5:5432       (Docker-link style, each port, with
    MY_DB_PORT_5432_TCP_PROTO=tcp                  _PROTO, _PORT and _ADDR)
    MY_DB_PORT_5432_TCP_PORT=5432
    MY_DB_PORT_5432_TCP_ADDR=10.0.0.5
    MY_DB_PORT_9187_TCP=...

The kubelet takes Services in no particular order; here they go by name, so the output is stable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vk_provider.environment.model import ReferenceReader

API_SERVER_NAMESPACE = "default"
API_SERVER_SERVICES = frozenset({"kubernetes"})
_NO_CLUSTER_IPS = frozenset({"", "None"})


async def service_link_variables(
    reader: ReferenceReader, namespace: str, *, links_enabled: bool
) -> list[tuple[str, str]]:
    """The service-link variables of a pod in `namespace`, Service by Service in name order."""
    services = await _linked_services(reader, namespace, links_enabled=links_enabled)
    variables: list[tuple[str, str]] = []
    for name in sorted(services):
        variables.extend(variables_for_service(services[name]))
    return variables


async def _linked_services(
    reader: ReferenceReader, namespace: str, *, links_enabled: bool
) -> dict[str, Mapping[str, Any]]:
    default_services = await reader.services(API_SERVER_NAMESPACE)
    linked: dict[str, Mapping[str, Any]] = {}
    if links_enabled:
        own = default_services if namespace == API_SERVER_NAMESPACE else await reader.services(namespace)
        linked.update(_with_cluster_ips(own))
    for name, service in _with_cluster_ips(default_services).items():
        if name in API_SERVER_SERVICES:
            linked.setdefault(name, service)
    return linked


def _with_cluster_ips(services: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    return {
        _service_name(service): service for service in services if _cluster_ip(service) not in _NO_CLUSTER_IPS
    }


def variables_for_service(service: Mapping[str, Any]) -> list[tuple[str, str]]:
    """One Service's variables, in the kubelet's order (see the module docstring)."""
    prefix = env_name_for(_service_name(service))
    cluster_ip = _cluster_ip(service)
    ports: Sequence[Mapping[str, Any]] = (service.get("spec") or {}).get("ports") or ()
    variables = [(f"{prefix}_SERVICE_HOST", cluster_ip)]
    # A Service with a cluster IP always has a port (the API insists); the guard is for odd input.
    if ports:
        variables.append((f"{prefix}_SERVICE_PORT", str(ports[0]["port"])))
    variables.extend(
        (f"{prefix}_SERVICE_PORT_{env_name_for(port['name'])}", str(port["port"]))
        for port in ports
        if port.get("name")
    )
    for index, port in enumerate(ports):
        variables.extend(_docker_link_variables(prefix, cluster_ip, port, first=index == 0))
    return variables


def _docker_link_variables(
    prefix: str, cluster_ip: str, port: Mapping[str, Any], *, first: bool
) -> list[tuple[str, str]]:
    number = str(port["port"])
    protocol = str(port.get("protocol") or "TCP")
    url = f"{protocol.lower()}://{_host_port(cluster_ip, number)}"
    port_prefix = f"{prefix}_PORT_{number}_{protocol.upper()}"
    variables = [(f"{prefix}_PORT", url)] if first else []
    variables += [
        (port_prefix, url),
        (f"{port_prefix}_PROTO", protocol.lower()),
        (f"{port_prefix}_PORT", number),
        (f"{port_prefix}_ADDR", cluster_ip),
    ]
    return variables


def env_name_for(name: str) -> str:
    """A Service or port name as it appears in variable names: upper case, `-` as `_`."""
    return name.replace("-", "_").upper()


def _host_port(host: str, port: str) -> str:
    # IPv6 addresses are bracketed, as in any URL.
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _service_name(service: Mapping[str, Any]) -> str:
    return str((service.get("metadata") or {}).get("name") or "")


def _cluster_ip(service: Mapping[str, Any]) -> str:
    return str((service.get("spec") or {}).get("clusterIP") or "")
