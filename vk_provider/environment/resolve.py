"""The container environment, put together from its sources in the kubelet's order of precedence."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from vk_provider.environment.expansion import expand
from vk_provider.environment.field_refs import PodFields, field_ref_value
from vk_provider.environment.model import (
    InvalidEnvironmentError,
    ReferenceReader,
    ResolvedEnvironment,
    SelectorError,
)
from vk_provider.environment.references import (
    CONFIG_MAP,
    SECRET,
    ReferenceLookup,
    env_from_variables,
    key_reference_value,
)
from vk_provider.environment.resource_refs import resource_field_value
from vk_provider.environment.service_links import service_link_variables
from vk_provider.kit.quantity import InvalidQuantityError

# Where a namespace-less pod (hand-written, never from the API) lives, as kubectl would put it.
DEFAULT_NAMESPACE = "default"


async def resolve_container_environment(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    *,
    reader: ReferenceReader,
    pod_ip: str,
    host_ip: str,
    node_allocatable: Mapping[str, str],
) -> ResolvedEnvironment:
    """The container's environment as the kubelet would hand it to the container runtime.

    Sources in increasing precedence: service links, `envFrom` entries in order, `env` entries in
    order. A name defined again keeps its first position and takes the later value (the kubelet
    builds a map, so it promises no order at all; this order is stable and readable). An `env`
    value's `$(NAME)` references see everything defined before that entry.

    Raises `MandatoryReferenceError` for the first missing mandatory ConfigMap, Secret or key, and
    `InvalidEnvironmentError` for a selector that cannot be evaluated or a source it does not know.
    """
    metadata = pod.get("metadata") or {}
    namespace = str(metadata.get("namespace") or DEFAULT_NAMESPACE)
    lookup = ReferenceLookup(reader, namespace, str(container.get("name") or ""))
    # enableServiceLinks defaults to true; only an explicit false turns the links off.
    links_enabled = (pod.get("spec") or {}).get("enableServiceLinks") is not False
    variables = dict(await service_link_variables(reader, namespace, links_enabled=links_enabled))
    for source in container.get("envFrom") or ():
        variables.update(await env_from_variables(source, lookup))
    sources = _ValueSources(
        lookup, PodFields(pod, pod_ip=pod_ip, host_ip=host_ip), container, node_allocatable
    )
    for entry in container.get("env") or ():
        value = await _entry_value(entry, variables, sources)
        # None: an optional reference missed, so the entry defines nothing.
        if value is not None:
            variables[str(entry["name"])] = value
    return ResolvedEnvironment(variables=tuple(variables.items()), events=tuple(lookup.events))


@dataclasses.dataclass(frozen=True, slots=True)
class _ValueSources:
    """Where `valueFrom` looks: references, the pod's fields, and resources."""

    lookup: ReferenceLookup
    pod_fields: PodFields
    container: Mapping[str, Any]
    node_allocatable: Mapping[str, str]

    def field(self, selector: Mapping[str, Any], variable: str) -> str:
        return self._evaluate(lambda: field_ref_value(selector, self.pod_fields), variable)

    def resource(self, selector: Mapping[str, Any], variable: str) -> str:
        pod = self.pod_fields.pod
        return self._evaluate(
            lambda: resource_field_value(selector, pod, self.container, self.node_allocatable), variable
        )

    def _evaluate(self, selector_value: Callable[[], str], variable: str) -> str:
        """A downward API value, with errors naming the container and variable they concern."""
        try:
            return selector_value()
        except (SelectorError, InvalidQuantityError) as error:
            raise InvalidEnvironmentError(self.lookup.container_name, variable, str(error)) from error


async def _entry_value(
    entry: Mapping[str, Any], variables: Mapping[str, str], sources: _ValueSources
) -> str | None:
    # As in the kubelet, a non-empty value wins over valueFrom (the API forbids having both).
    value = str(entry.get("value") or "")
    if value:
        return expand(value, variables)
    # A null selector is as good as an absent one (hand-written JSON; the API drops nulls).
    source = {
        kind: selector for kind, selector in (entry.get("valueFrom") or {}).items() if selector is not None
    }
    if not source:
        return ""
    variable = str(entry["name"])
    if "fieldRef" in source:
        return sources.field(source["fieldRef"], variable)
    if "resourceFieldRef" in source:
        return sources.resource(source["resourceFieldRef"], variable)
    if "configMapKeyRef" in source:
        return await key_reference_value(CONFIG_MAP, source["configMapKeyRef"], variable, sources.lookup)
    if "secretKeyRef" in source:
        return await key_reference_value(SECRET, source["secretKeyRef"], variable, sources.lookup)
    # fileKeyRef and anything newer: better to refuse than to start the container without the value.
    unknown = ", ".join(sorted(source))
    raise InvalidEnvironmentError(
        sources.lookup.container_name, variable, f"unsupported valueFrom source {unknown}"
    )
