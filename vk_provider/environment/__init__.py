"""Container environment resolution: the flat list of variables the kubelet would give a container.

Why: providers run containers far from any kubelet, so the node must do the kubelet's part and hand
each provider a ready environment. Everything a pod's `env` and `envFrom` can say is resolved here,
with the kubelet's precedence, defaults, rounding, event reasons and `$(VAR)` expansion:

- service links (`{SERVICE}_SERVICE_HOST`, Docker-link `{SERVICE}_PORT_...`; `service_links`);
- `envFrom` ConfigMaps and Secrets with prefixes and optional references (`references`);
- `env` values with `$(VAR)` expansion (`expansion`; `expand` serves command and args too);
- `valueFrom`: ConfigMap and Secret keys (`references`), pod fields (`field_refs`), container
  resources (`resource_refs`, with the quantity arithmetic in `quantity`).

The same reader gives the files of ConfigMap, Secret and projected volumes (`volumes`), with the
kubelet's `FailedMount` event for a mandatory object or key that is missing.

Boundaries: API objects come only through the caller's `ReferenceReader`; events are returned, not
recorded; nothing is logged, so Secret values cannot leak through here. The pod is trusted to have
passed API validation, so only what the kubelet itself checks is checked again. `fileKeyRef`
(environment files on volumes) is not supported and raises `InvalidEnvironmentError`.

Event reasons (all Warning): `InvalidEnvironmentVariableNames`, `OptionalConfigMapNotFound`,
`OptionalConfigMapKeyNotFound`, `MandatoryConfigMapNotFound`, `MandatoryConfigMapKeyNotFound`,
`OptionalSecretNotFound`, `OptionalSecretKeyNotFound`, `MandatorySecretNotFound`,
`MandatorySecretKeyNotFound`. The Mandatory ones come inside `MandatoryReferenceError`.
"""

from vk_provider.environment.expansion import expand
from vk_provider.environment.model import (
    EnvironmentEvent,
    InvalidEnvironmentError,
    MandatoryReferenceError,
    ReferenceReader,
    ResolvedEnvironment,
    TokenIssuer,
)
from vk_provider.environment.resolve import resolve_container_environment
from vk_provider.environment.volumes import resolve_volume_files
from vk_provider.kit.quantity import InvalidQuantityError, parse_quantity

__all__ = [
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
]
