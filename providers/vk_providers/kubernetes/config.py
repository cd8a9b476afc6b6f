"""The kubernetes provider's settings, read once from its section of the node configuration.

A wrong value fails when the daemon starts, with a message naming the key. The remote cluster's
credentials are not settings: only where the kubeconfig is (`kubeconfig_file`, a mounted Secret) and
which of its contexts to use.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, cast

from vk_provider.kit.resilience.settings import CallSettings, ConfigValues, read_call_settings

ServiceType = Literal["ClusterIP", "NodePort", "LoadBalancer"]
SERVICE_TYPES: tuple[ServiceType, ...] = ("ClusterIP", "NodePort", "LoadBalancer")
DEFAULT_NAMESPACE = "vk-provider-remote"
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
MAX_NAME_PREFIX = 20
"""Leaves room for a dash, the 36 characters of a pod UID and "-env" within a DNS label's 63."""
TOLERATION_KEYS = frozenset({"key", "operator", "value", "effect", "tolerationSeconds"})


@dataclasses.dataclass(frozen=True, slots=True)
class KubernetesSettings:
    kubeconfig_file: Path = Path()
    """The remote cluster's kubeconfig (a mounted Secret); re-read when it changes. Required."""
    context: str | None = None
    """A context of that kubeconfig; None: its current context."""
    namespace: str = DEFAULT_NAMESPACE
    """The remote namespace the provider owns (created if missing); every remote object lives there."""
    service_type: ServiceType = "ClusterIP"
    """ClusterIP: traffic goes to the remote pod IP (the networks must be routable to each other);
    NodePort: to the remote node's address and the node port; LoadBalancer: to the load balancer."""
    node_selector: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Where remote pods may run, in the remote cluster's terms (e.g. its GPU node pool)."""
    tolerations: tuple[Mapping[str, Any], ...] = ()
    """Tolerations of remote pods (e.g. for tainted GPU nodes or a virtual node over there)."""
    image_pull_secrets: tuple[str, ...] = ()
    """Secrets in the remote namespace for pulling images (the home pod's own are not copied)."""
    name_prefix: str = "vk"
    """Remote objects are named `<name_prefix>-<pod UID>` (the Secret `...-env`)."""
    capacity: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Resources the node advertises, e.g. {"nvidia.com/gpu": "8"}."""
    gpu_prices_usd_per_hour: Mapping[str, float] = dataclasses.field(default_factory=dict)
    """USD per hour of one unit of each GPU (extended) resource, e.g. {"nvidia.com/gpu": 2.0}: what a
    pod's requests cost, for the node's spend ceiling and cost metric (`prices`). Empty: pods are of
    unknown price."""
    calls: CallSettings = dataclasses.field(default_factory=CallSettings)
    """Timeouts, retries, the circuit breaker and the health probe (flat keys: `call_timeout_seconds`...)."""
    namespace_ready_timeout_seconds: float = 20.0
    """How long a create waits for a namespace it just made to get its default ServiceAccount."""
    error_log_lines: int = 3
    """Log lines quoted as the message of a container that failed without a termination message."""


def parse_settings(config: Mapping[str, Any]) -> KubernetesSettings:
    values = ConfigValues("kubernetes", config)
    values.warn_unknown(KubernetesSettings)
    defaults = KubernetesSettings()
    kubeconfig = values.optional_path("kubeconfig_file")
    if kubeconfig is None:
        raise ValueError("kubernetes provider: kubeconfig_file (the remote cluster's kubeconfig) is required")
    return KubernetesSettings(
        kubeconfig_file=kubeconfig,
        context=_optional_text(config, "context"),
        namespace=_dns_label(config, "namespace", defaults.namespace, 63),
        service_type=_service_type(config.get("service_type", defaults.service_type)),
        node_selector=_string_map(config, "node_selector"),
        tolerations=_tolerations(config.get("tolerations", [])),
        image_pull_secrets=_names(config, "image_pull_secrets"),
        name_prefix=_dns_label(config, "name_prefix", defaults.name_prefix, MAX_NAME_PREFIX),
        capacity=values.capacity(),
        gpu_prices_usd_per_hour=values.prices_per_hour("gpu_prices_usd_per_hour", "{'nvidia.com/gpu': 2.0}"),
        calls=read_call_settings(values),
        namespace_ready_timeout_seconds=values.seconds(
            "namespace_ready_timeout_seconds", defaults.namespace_ready_timeout_seconds, positive=True
        ),
        error_log_lines=values.integer("error_log_lines", defaults.error_log_lines, minimum=0, maximum=50),
    )


def _invalid(key: str, expected: str, value: Any) -> ValueError:
    return ValueError(f"kubernetes provider: {key} must be {expected}, not {value!r}")


def _optional_text(config: Mapping[str, Any], key: str) -> str | None:
    value = config.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise _invalid(key, "a non-empty string", value)
    return value


def _dns_label(config: Mapping[str, Any], key: str, default: str, longest: int) -> str:
    value = config.get(key, default)
    if not isinstance(value, str) or len(value) > longest or not DNS_LABEL.fullmatch(value):
        raise _invalid(
            key, f"a DNS label (lowercase letters, digits, '-') of at most {longest} characters", value
        )
    return value


def _service_type(value: Any) -> ServiceType:
    if value not in SERVICE_TYPES:
        raise _invalid("service_type", f"one of {', '.join(SERVICE_TYPES)}", value)
    return cast(ServiceType, value)


def _string_map(config: Mapping[str, Any], key: str) -> dict[str, str]:
    value = config.get(key, {})
    if not isinstance(value, Mapping) or not all(isinstance(item, str) for item in value.values()):
        raise _invalid(key, "a mapping of strings to strings", value)
    return {str(name): item for name, item in value.items()}


def _tolerations(value: Any) -> tuple[Mapping[str, Any], ...]:
    if not isinstance(value, list) or not all(
        isinstance(item, Mapping) and set(item) <= TOLERATION_KEYS for item in value
    ):
        raise _invalid(
            "tolerations", f"a list of tolerations (mappings with the keys {sorted(TOLERATION_KEYS)})", value
        )
    return tuple(dict(item) for item in value)


def _names(config: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = config.get(key, ())
    if isinstance(value, str) or not all(isinstance(name, str) and name for name in value):
        raise _invalid(key, "a list of names", value)
    return tuple(value)
