"""The runpod provider's settings, read once from its section of the node configuration.

A wrong value fails when the daemon starts, with a message naming the key. The API key is not a
setting: only where to find it is (`api_key_file`, a mounted Secret, or `api_key_env`).
"""

from __future__ import annotations

import dataclasses
import string
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, cast

from vk_provider.kit.resilience.settings import CallSettings, ConfigValues, read_call_settings

Cloud = Literal["SECURE", "COMMUNITY"]
CLOUDS: tuple[Cloud, ...] = ("SECURE", "COMMUNITY")

DEFAULT_API_URL = "https://api.runpod.io/v2"
"""REST API v2. v1 (https://rest.runpod.io/v1) is deprecated, retired on 2026-12-01 (or -11-15)."""
DEFAULT_PROXY_URL_TEMPLATE = "https://{pod_id}-{port}.proxy.runpod.net"
"""RunPod's HTTPS proxy address of a pod's exposed HTTP port (docs: pods/configuration/expose-ports)."""
DEFAULT_API_KEY_ENV = "RUNPOD_API_KEY"


@dataclasses.dataclass(frozen=True, slots=True)
class RunPodSettings:
    api_url: str = DEFAULT_API_URL
    api_key_file: Path | None = None
    """A file holding the key (a mounted Secret); re-read when it changes. Wins over api_key_env."""
    api_key_env: str = DEFAULT_API_KEY_ENV
    proxy_url_template: str = DEFAULT_PROXY_URL_TEMPLATE
    """The traffic address of a pod; `{pod_id}` and `{port}` are filled in."""
    gpu_type: str | None = None
    """The GPU type id (e.g. "NVIDIA GeForce RTX 4090") for pods that do not name one."""
    gpu_count: int = 1
    """GPUs for pods whose container neither requests nor limits nvidia.com/gpu."""
    cloud: Cloud = "SECURE"
    data_center_ids: tuple[str, ...] = ()
    """Preferred data centers, in order; empty lets RunPod choose."""
    max_price_per_hour: float | None = None
    """The most a pod may cost (USD per hour, all its GPUs, at list price); None: no cap."""
    disk_gb: int | None = None
    """Container disk; None leaves RunPod's default."""
    name_prefix: str = "vk"
    capacity: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Resources the node advertises, e.g. {"nvidia.com/gpu": "8"}."""
    calls: CallSettings = dataclasses.field(default_factory=CallSettings)
    """Timeouts, retries, the circuit breaker and the health probe (flat keys: `call_timeout_seconds`...)."""
    log_idle_seconds: float = 2.0
    """A non-followed log ends once RunPod's stream has been quiet this long (it has no end marker)."""
    error_log_lines: int = 3
    """System log lines quoted as the message of a pod in ERROR (the API has no message field)."""
    catalog_ttl_seconds: float = 60.0
    """How long a GPU catalog answer is reused for price checks."""
    readiness_timeout_seconds: float = 2.0
    """Of one readiness check through the proxy (see `readiness`)."""
    readiness_interval_seconds: float = 2.0
    """The least time between two readiness checks of a pod."""


def parse_settings(config: Mapping[str, Any]) -> RunPodSettings:
    values = ConfigValues("runpod", config)
    values.warn_unknown(RunPodSettings)
    defaults = RunPodSettings()
    return RunPodSettings(
        api_url=_url(config.get("api_url", defaults.api_url)),
        api_key_file=values.optional_path("api_key_file"),
        api_key_env=_text(config, "api_key_env", defaults.api_key_env),
        proxy_url_template=_template(config.get("proxy_url_template", defaults.proxy_url_template)),
        gpu_type=_optional_text(config, "gpu_type"),
        gpu_count=values.integer("gpu_count", defaults.gpu_count, minimum=1),
        cloud=_cloud(config.get("cloud", defaults.cloud)),
        data_center_ids=_names(config, "data_center_ids"),
        max_price_per_hour=_optional_number(config, "max_price_per_hour"),
        disk_gb=None if config.get("disk_gb") is None else values.integer("disk_gb", 0, minimum=1),
        name_prefix=_text(config, "name_prefix", defaults.name_prefix),
        capacity=values.capacity(),
        calls=read_call_settings(values),
        log_idle_seconds=values.seconds("log_idle_seconds", defaults.log_idle_seconds, positive=True),
        error_log_lines=values.integer("error_log_lines", defaults.error_log_lines, minimum=0),
        catalog_ttl_seconds=values.seconds("catalog_ttl_seconds", defaults.catalog_ttl_seconds),
        readiness_timeout_seconds=values.seconds(
            "readiness_timeout_seconds", defaults.readiness_timeout_seconds, positive=True
        ),
        readiness_interval_seconds=values.seconds(
            "readiness_interval_seconds", defaults.readiness_interval_seconds
        ),
    )


def _url(value: Any) -> str:
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        raise ValueError(f"runpod provider: api_url must be an http(s) URL, not {value!r}")
    return value.rstrip("/")


def _template(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"runpod provider: proxy_url_template must be a string, not {value!r}")
    fields = {name for _, name, _, _ in string.Formatter().parse(value) if name is not None}
    if fields != {"pod_id", "port"}:
        raise ValueError(
            "runpod provider: proxy_url_template must use exactly the fields {pod_id} and {port}, "
            f"not {sorted(fields)} (in {value!r})"
        )
    return value


def _cloud(value: Any) -> Cloud:
    if value not in CLOUDS:
        raise ValueError(f"runpod provider: cloud must be one of {', '.join(CLOUDS)}, not {value!r}")
    return cast(Cloud, value)


def _text(config: Mapping[str, Any], key: str, default: str) -> str:
    value = config.get(key, default)
    if not isinstance(value, str) or not value:
        raise ValueError(f"runpod provider: {key} must be a non-empty string, not {value!r}")
    return value


def _optional_text(config: Mapping[str, Any], key: str) -> str | None:
    value = config.get(key)
    return None if value is None else _text(config, key, "")


def _optional_number(config: Mapping[str, Any], key: str) -> float | None:
    value = config.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"runpod provider: {key} must be a positive number, not {value!r}")
    return float(value)


def _names(config: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = config.get(key, ())
    if isinstance(value, str) or not all(isinstance(name, str) and name for name in value):
        raise ValueError(f"runpod provider: {key} must be a list of names, not {value!r}")
    return tuple(value)
