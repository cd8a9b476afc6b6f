"""The local provider's settings, read once from its section of the node configuration.

All parsing is here so that a wrong value fails when the daemon starts, with a message naming the key,
rather than later and far away as a confusing runtime error.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

LOOPBACK_NETWORK = ipaddress.IPv4Network("127.0.0.0/8")
DEFAULT_ADDRESS_RANGE = ipaddress.IPv4Network("127.1.0.0/16")
DEFAULT_INHERITED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "USER", "LOGNAME")
"""Containers start from an empty environment, as they would in an image; these few variables of the
daemon's are passed on (unless the pod sets them) because a host process cannot do without PATH, and a
home folder and locale are what an image would normally provide."""


@dataclasses.dataclass(frozen=True, slots=True)
class LocalSettings:
    address_range: ipaddress.IPv4Network = DEFAULT_ADDRESS_RANGE
    restart_backoff_initial_seconds: float = 10.0
    restart_backoff_max_seconds: float = 300.0
    terminated_pod_retention_seconds: float = 600.0
    """How long a deleted pod that has stopped is kept (state, logs, IP) if the node never asks again."""
    unhealthy_marker_file: Path | None = None
    capacity: Mapping[str, str] = dataclasses.field(default_factory=dict)
    inherited_env: tuple[str, ...] = DEFAULT_INHERITED_ENV
    image_entrypoints: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    """Image -> the argv its ENTRYPOINT would run: what a container of that image without `command`
    runs (followed by its `args`). A host has no images to read entrypoints from, yet pods meant for
    providers that only take `args` (RunPod) must run here too, e.g. on a home node they migrate from.
    A key without a tag or digest names a repository: every tag and digest of it (`entrypoint_for`)."""
    mount_volumes: bool = False
    """Mount each container's volumes at their paths in a mount namespace of its own (see `mounts`),
    the ServiceAccount token the node requests among them, so in-cluster clients work in local pods.
    Needs root (CAP_SYS_ADMIN). Off: volumes are not mounted, and the node requests no tokens."""


def parse_settings(config: Mapping[str, Any]) -> LocalSettings:
    known = {field.name for field in dataclasses.fields(LocalSettings)}
    unknown = sorted(set(config) - known)
    if unknown:
        # A warning, not an error: the node's section may carry keys meant for others.
        logger.warning("ignoring unknown local provider settings %s (known: %s)", unknown, sorted(known))
    defaults = LocalSettings()
    return LocalSettings(
        address_range=_address_range(config.get("address_range", str(defaults.address_range))),
        restart_backoff_initial_seconds=_seconds(
            config, "restart_backoff_initial_seconds", defaults.restart_backoff_initial_seconds
        ),
        restart_backoff_max_seconds=_seconds(
            config, "restart_backoff_max_seconds", defaults.restart_backoff_max_seconds
        ),
        terminated_pod_retention_seconds=_seconds(
            config, "terminated_pod_retention_seconds", defaults.terminated_pod_retention_seconds
        ),
        unhealthy_marker_file=_optional_path(config.get("unhealthy_marker_file")),
        capacity=_capacity(config.get("capacity", {})),
        inherited_env=_names(config.get("inherited_env", defaults.inherited_env)),
        image_entrypoints=_entrypoints(config.get("image_entrypoints", {})),
        mount_volumes=_mount_volumes(config),
    )


def _mount_volumes(config: Mapping[str, Any]) -> bool:
    wanted = _flag(config, "mount_volumes")
    if wanted and os.geteuid() != 0:
        raise ValueError(
            "local provider setting mount_volumes needs root: mount namespaces need CAP_SYS_ADMIN"
        )
    return wanted


def _flag(config: Mapping[str, Any], key: str) -> bool:
    value = config.get(key, False)
    if not isinstance(value, bool):
        raise ValueError(f"local provider setting {key} must be true or false, not {value!r}")
    return value


def _address_range(value: Any) -> ipaddress.IPv4Network:
    try:
        network = ipaddress.IPv4Network(str(value))
    except ValueError as error:
        raise ValueError(f"local provider: address_range {value!r} is not an IPv4 network: {error}") from None
    if not network.subnet_of(LOOPBACK_NETWORK) and not is_local_range(network):
        # Loopback works without setup, but the apiserver refuses loopback EndpointSlice addresses, so
        # pods behind a Service need a range the host treats as its own (an "AnyIP" local route).
        raise ValueError(
            f"local provider: address_range {network} is not local to this host: make it so with "
            f"`ip route replace local {network} dev lo` (as root), or use a range within {LOOPBACK_NETWORK}"
        )
    if network.num_addresses < 2 and network.network_address == ipaddress.IPv4Address("127.0.0.1"):
        raise ValueError("local provider: address_range must offer addresses other than 127.0.0.1")
    return network


def is_local_range(network: ipaddress.IPv4Network) -> bool:
    """Whether a process may bind to addresses of `network` (the host routes it to itself)."""
    probe = network.network_address + 1 if network.num_addresses > 1 else network.network_address
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((str(probe), 0))
        except OSError:
            return False
    return True


def _seconds(config: Mapping[str, Any], key: str, default: float) -> float:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ValueError(f"local provider: {key} must be a number of seconds >= 0, not {value!r}")
    return float(value)


def _optional_path(value: Any) -> Path | None:
    if value is None or value == "":
        return None
    return Path(str(value))


def _capacity(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise ValueError(
            f"local provider: capacity must be a mapping like {{'nvidia.com/gpu': '8'}}, not {value!r}"
        )
    return {str(name): str(quantity) for name, quantity in value.items()}


def image_repository(image: str) -> str:
    """`registry:5000/team/app:1.2@sha256:...` -> `registry:5000/team/app`: the image without its tag
    and digest (a colon after the last slash starts a tag; one before it is a registry's port)."""
    name = image.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    return name[:colon] if colon > slash else name


def entrypoint_for(image: str, entrypoints: Mapping[str, tuple[str, ...]]) -> tuple[str, ...] | None:
    """The argv standing in for `image`'s ENTRYPOINT: its own key's, else its repository's. By
    repository, so an image pinned by digest (a release's chart: `vk-provider@sha256:...`) runs as its
    tag does, though no configuration can know the digest of a build that has not happened yet."""
    exact = entrypoints.get(image)
    if exact is not None:
        return exact
    return entrypoints.get(image_repository(image))


def _entrypoints(value: Any) -> dict[str, tuple[str, ...]]:
    if not isinstance(value, Mapping) or not all(
        isinstance(image, str)
        and image
        and isinstance(argv, list | tuple)
        and argv
        and all(isinstance(word, str) for word in argv)
        for image, argv in value.items()
    ):
        raise ValueError(
            "local provider: image_entrypoints must map image names to non-empty argv lists, "
            f"like {{'vk-provider/tokens': ['python', '-m', 'vk_devtools.demo.tokens']}}, not {value!r}"
        )
    return {image: tuple(argv) for image, argv in value.items()}


def _names(value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not all(isinstance(name, str) for name in value):
        raise ValueError(f"local provider: inherited_env must be a list of variable names, not {value!r}")
    return tuple(value)
