"""The node daemon's settings: defaults, then a YAML file, then environment variables, then flags.

Every setting has one name used in all three places: `node_name` in the file, `VK_PROVIDER_NODE_NAME`
in the environment, `--node-name` on the command line. Parsing errors name the setting and the source.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import yaml

from vk_provider.kit.traffic_signature import secret_location
from vk_provider.offload.names import VIRTUAL_NODE_LABEL, VIRTUAL_NODE_TAINT
from vk_provider.runtime.flagaliases import warn_deprecated
from vk_provider.runtime.flagenvironment import ENV_PREFIX, boolean, service_link
from vk_provider.runtime.logsetup import log_format, log_level

TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
TAINT_EFFECTS: tuple[TaintEffect, ...] = ("NoSchedule", "PreferNoSchedule", "NoExecute")
ServingCertificateMode = Literal["auto", "csr", "self-signed", "file"]
SERVING_CERTIFICATE_MODES: tuple[ServingCertificateMode, ...] = ("auto", "csr", "self-signed", "file")
DEFAULT_TAINT_KEY = VIRTUAL_NODE_TAINT
_QUANTITY = re.compile(r"^[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+|[numkMGTPE]i?|Ki)?$")
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


class SettingsError(ValueError):
    """A setting is malformed; the message names it and where it came from."""


@dataclasses.dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: TaintEffect

    def to_json(self) -> dict[str, str]:
        return {"key": self.key, "value": self.value, "effect": self.effect}


@dataclasses.dataclass(frozen=True, slots=True)
class NodeSettings:
    node_name: str = "vk-provider"
    provider: str = "mock"
    provider_config: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """The provider's own settings (its section of the file, or --provider-config FILE)."""
    kubeconfig: str | None = None
    """None: use the in-cluster service account."""
    taint: Taint | None = None
    """None with `no_taint` False means the default vk-provider.dev/virtual-node=<provider>:NoSchedule."""
    no_taint: bool = False
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    capacity: Mapping[str, str] = dataclasses.field(
        default_factory=lambda: {"cpu": "100", "memory": "512Gi", "pods": "1000"}
    )
    max_provider_pods: int | None = None
    """The most pods this node may run at its provider at once; beyond it a pod is refused (OutOfBudget).
    None: no ceiling but `capacity`'s pods."""
    max_spend_per_hour: float | None = None
    """The most US dollars an hour this node's pods may cost at its provider's list prices; a pod that
    would take it past this is refused (OutOfBudget). None: no ceiling. See `node.admission`."""
    allow_unpriced_pods: bool = False
    """Under `max_spend_per_hour`, admit pods whose price is not known (no price annotation, and none
    their provider can tell), counted as 0 while the known spend is below the ceiling. False: refuse them
    (OutOfBudget), since nothing would bound what they cost."""
    namespaces: tuple[str, ...] = ()
    """Serve only the pods of these namespaces, watching pods and Services in each and never
    cluster-wide, so the node's RBAC can be Roles in these namespaces (manifests/components/namespaced,
    the chart's `node.namespaces`). A pod of another namespace bound to this node is never seen: it
    stays Pending until deleted, unless an admission policy refuses the binding (the chart's, and
    manifests/examples/namespaced-node's binding-guard.yaml). Empty: every namespace."""
    kubelet_port: int = 10250
    addresses: tuple[str, ...] = ("127.0.0.1",)
    """InternalIP addresses reported on the Node; the first is every pod's hostIP."""
    operating_system: str = "linux"
    state_dir: Path = Path("/var/lib/vk-provider")
    concurrent_pod_reconciles: int = 20
    lease_duration_seconds: int = 40
    lease_renew_interval_seconds: float = 10.0
    node_status_interval_seconds: float = 60.0
    health_check_interval_seconds: float = 10.0
    status_poll_interval_seconds: float = 5.0
    """Only for providers that cannot push state changes."""
    retry_initial_seconds: float = 1.0
    retry_max_seconds: float = 60.0
    orphan_sweep_interval_seconds: float = 30.0
    token_refresh_fraction: float = 0.8
    """For a provider that mounts ServiceAccount tokens: replace a token once it has lived this part of
    its lifetime (the kubelet's 80%); in (0, 1]."""
    log_level: str = "INFO"
    log_format: str = "text"
    """`text`, or `json`: one JSON object a line (`vk_provider.runtime.logsetup`)."""
    api_qps: float = 0.0
    """A hard ceiling on the node's requests a second to the apiserver, its Lease and Node heartbeats
    and watches excluded; 0 = none. Below it the node paces itself by the apiserver's 429s (API Priority
    and Fairness), per request class: see `kit.apibudget`."""
    api_burst: int = 0
    """Requests the ceiling lets through at once; 0 = as many as `api_qps` (one second's worth)."""
    kubelet_bind_address: str = "0.0.0.0"  # noqa: S104 - the apiserver must reach the kubelet API
    health_port: int = 0
    """Plain HTTP `/healthz` and `/readyz` on `kubelet_bind_address` for the pod's probes; 0 = not served.
    Separate from the kubelet API: that one needs a client certificate or token (probes send none) and
    is served only by the leader, while every replica, standbys too, must answer its probes."""
    serving_certificate: ServingCertificateMode = "auto"
    """Where the kubelet API's serving certificate comes from. `auto`: a kubelet-serving CSR, and a
    self-signed certificate while none is issued (after `serving_certificate_wait_seconds`, or at once
    when the CSR is denied), replaced by the issued one when it comes; with kubelet_serving_cert_file
    set, the files. `csr`: only the CSR (no kubelet API until it is issued). `self-signed`: never asks.
    `file`: kubelet_serving_cert_file and kubelet_serving_key_file, reloaded when they change."""
    serving_certificate_wait_seconds: float = 60.0
    """With `auto`: how long a CSR may go unissued before the node serves its own certificate."""
    kubelet_serving_cert_file: Path | None = None
    """With kubelet_serving_key_file: serve this certificate (reloaded when the file changes) instead of
    asking the cluster for one through a kubelet-serving CSR (serving_certificate `file`)."""
    kubelet_serving_key_file: Path | None = None
    kubelet_client_ca_file: Path | None = None
    """CA bundle for client certificates; default: the CA the node's own kubeconfig trusts."""
    kubelet_csr_self_approve: bool = False
    """Approve our own serving-certificate CSR (needs the approve RBAC); otherwise an operator runs
    `kubectl certificate approve`."""
    insecure_kubelet_api_allow_all: bool = False
    """Development only: serve the kubelet API without authentication or authorization."""
    kubelet_websocket: bool = True
    """Declare `ExtendWebSocketsToKubelet` in the node's status, so that apiservers of 1.36 and later pass
    kubectl's WebSocket streams (exec, attach, port-forward) through; False keeps them on SPDY."""
    leader_elect: bool = True
    """Replicas of the daemon for one node elect a leader through a Lease; only the leader runs the node.
    On by default: a lone replica takes a free Lease at once, and a second one makes the node survive
    a crash or an upgrade of the first."""
    traffic_key_secret: str | None = None
    """`NAMESPACE/NAME` of the Secret holding the key the node seals its pods' traffic addresses with
    (`vk_provider.kit.traffic_signature`), created if missing; default: `vk-provider-traffic-key` in the
    pod's own namespace, outside a pod in `default`. The router must read the same Secret."""
    leader_election_namespace: str | None = None
    """Namespace of the leader Lease; default: the pod's own (its service account mount); outside a pod,
    kube-node-lease, which every cluster has."""
    leader_election_identity: str | None = None
    """This replica's name in the Lease; default: host name (the pod's name) and a random suffix."""
    leader_election_lease_duration_seconds: float = 15.0
    """How long a standby waits, after the leader's last renewal, before taking over. With the renew
    deadline and retry period below, a standby leads about 17 s after a kill -9 of the leader, plus at
    most one node heartbeat interval since the last heartbeat: well inside the node-monitor grace period
    (40 s by default) that would turn the node Unknown."""
    leader_election_renew_deadline_seconds: float = 10.0
    """The leader stops leading when it could not renew for this long (before a standby may take over)."""
    leader_election_retry_period_seconds: float = 2.0
    """Between the leader's renewals, and between a standby's attempts to take the Lease."""

    def __post_init__(self) -> None:
        files = (self.kubelet_serving_cert_file, self.kubelet_serving_key_file)
        if (files[0] is None) != (files[1] is None):
            raise SettingsError("kubelet_serving_cert_file and kubelet_serving_key_file go together")
        if self.serving_certificate == "file" and files[0] is None:
            raise SettingsError(
                "serving_certificate file needs kubelet_serving_cert_file and kubelet_serving_key_file"
            )
        if self.serving_certificate in ("csr", "self-signed") and files[0] is not None:
            raise SettingsError(
                f"serving_certificate {self.serving_certificate} does not use kubelet_serving_cert_file; "
                "set serving_certificate to file, or drop the files"
            )
        if not (
            self.leader_election_retry_period_seconds
            < self.leader_election_renew_deadline_seconds
            < self.leader_election_lease_duration_seconds
        ):
            raise SettingsError(
                "leader election: the retry period must be shorter than the renew deadline, and the renew "
                "deadline shorter than the lease duration (or a standby could take over from a leader "
                "that still acts)"
            )

    @property
    def effective_taint(self) -> Taint | None:
        if self.no_taint:
            return None
        return self.taint or Taint(DEFAULT_TAINT_KEY, self.provider, "NoSchedule")

    @property
    def serving_certificate_mode(self) -> ServingCertificateMode:
        """The mode in effect: `auto` with certificate files is `file` (as before the setting existed)."""
        if self.serving_certificate == "auto" and self.kubelet_serving_cert_file is not None:
            return "file"
        return self.serving_certificate

    def serves(self, namespace: str) -> bool:
        """Whether this node watches, runs and collects pods of `namespace`."""
        return not self.namespaces or namespace in self.namespaces

    @property
    def host_ip(self) -> str:
        return self.addresses[0]


FIELDS = {field.name: field for field in dataclasses.fields(NodeSettings)}
DEPRECATED_SETTINGS = {"pod_workers": "concurrent_pod_reconciles"}
"""Old names still read, in the file, the environment and on the command line, each use with a warning."""


def parse_taint(text: str, source: str) -> Taint:
    """KEY=VALUE:EFFECT, as kubectl taint writes it."""
    match = re.fullmatch(r"([^=:]+)=([^:]*):(\w+)", text.strip())
    if match is None or match.group(3) not in TAINT_EFFECTS:
        raise SettingsError(
            f"{source}: taint {text!r} must look like KEY=VALUE:EFFECT "
            f"with EFFECT one of {', '.join(TAINT_EFFECTS)}"
        )
    key, value, effect = match.groups()
    if not _LABEL_KEY.match(key):
        raise SettingsError(f"{source}: taint key {key!r} is not a valid Kubernetes key")
    return Taint(key, value, effect)  # type: ignore[arg-type]


def parse_pairs(items: Mapping[str, Any] | list[str] | str, source: str, *, what: str) -> dict[str, str]:
    """K=V pairs from a mapping, a list of 'K=V' strings, or one comma-separated string."""
    if isinstance(items, Mapping):
        pairs = {str(key): str(value) for key, value in items.items()}
    else:
        entries = items.split(",") if isinstance(items, str) else items
        pairs = {}
        for entry in entries:
            key, sep, value = str(entry).partition("=")
            if not sep or not key.strip():
                raise SettingsError(f"{source}: {what} {entry!r} must look like KEY=VALUE")
            pairs[key.strip()] = value.strip()
    for key in pairs:
        if not _LABEL_KEY.match(key):
            raise SettingsError(f"{source}: {what} key {key!r} is not a valid Kubernetes key")
    return pairs


def _labels(items: Mapping[str, Any] | list[str] | str, source: str) -> dict[str, str]:
    pairs = parse_pairs(items, source, what="label")
    if VIRTUAL_NODE_LABEL in pairs:
        raise SettingsError(
            f"{source}: label {VIRTUAL_NODE_LABEL} is the node's own (it marks a vk-provider virtual "
            "node, always set to true); leave it out of `labels`"
        )
    return pairs


def _capacity(items: Mapping[str, Any] | list[str] | str, source: str) -> dict[str, str]:
    pairs = parse_pairs(items, source, what="capacity")
    for resource, quantity in pairs.items():
        if not _QUANTITY.match(quantity):
            raise SettingsError(f"{source}: capacity {resource}={quantity!r} is not a Kubernetes quantity")
    return pairs


def _addresses(value: Any, source: str) -> tuple[str, ...]:
    addresses = tuple(str(item).strip() for item in (value.split(",") if isinstance(value, str) else value))
    if not addresses:
        raise SettingsError(f"{source}: addresses must name at least one IP")
    for address in addresses:
        ipaddress.ip_address(address)
    return addresses


def _log_level(value: Any, source: str) -> str:
    try:
        return log_level(str(value))
    except ValueError as error:
        raise SettingsError(f"{source}: log_level: {error}") from error


def _log_format(value: Any, source: str) -> str:
    try:
        return log_format(str(value))
    except ValueError as error:
        raise SettingsError(f"{source}: log_format: {error}") from error


def _traffic_key_secret(value: Any, source: str) -> str | None:
    if value in (None, ""):
        return None
    try:
        secret_location(str(value))
    except ValueError as error:
        raise SettingsError(f"{source}: traffic_key_secret: {error}") from error
    return str(value)


def _namespaces(value: Any, source: str) -> tuple[str, ...]:
    """Namespace names from a list or comma-separated strings (a repeated flag gives a list of them);
    duplicates dropped, order kept."""
    entries = [value] if isinstance(value, str) else list(value or ())
    names: list[str] = []
    for entry in entries:
        for part in str(entry).split(","):
            name = part.strip()
            if not name:
                continue
            if not _NAMESPACE.match(name):
                raise SettingsError(f"{source}: namespaces: {name!r} is not a valid namespace name")
            if name not in names:
                names.append(name)
    return tuple(names)


def _provider_config(value: Any, source: str) -> dict[str, Any]:
    if isinstance(value, str):
        return load_yaml_file(Path(value), source)
    if not isinstance(value, Mapping):
        raise SettingsError(f"{source}: provider_config must be a mapping or a file path")
    return dict(value)


def _serving_certificate(value: Any, source: str) -> ServingCertificateMode:
    mode = str(value).strip()
    for known in SERVING_CERTIFICATE_MODES:
        if mode == known:
            return known
    raise SettingsError(
        f"{source}: serving_certificate {value!r} must be one of {', '.join(SERVING_CERTIFICATE_MODES)}"
    )


def _optional_path(value: Any) -> Path | None:
    return None if value in (None, "") else Path(value)


def _boolean(value: Any) -> bool:
    return boolean(value)


def _positive_int(name: str, upper: int | None = None) -> Callable[[Any, str], int]:
    def convert(value: Any, source: str) -> int:
        number = int(value)
        if number <= 0 or (upper is not None and number > upper):
            raise SettingsError(f"{source}: {name} {value!r} is out of range")
        return number

    return convert


def _positive_number(name: str) -> Callable[[Any, str], float]:
    def convert(value: Any, source: str) -> float:
        seconds = float(value)
        if seconds <= 0:
            raise SettingsError(f"{source}: {name} must be greater than zero, not {value!r}")
        return seconds

    return convert


def _non_negative_int(name: str) -> Callable[[Any, str], int]:
    def convert(value: Any, source: str) -> int:
        number = int(value)
        if number < 0:
            raise SettingsError(f"{source}: {name} must be 0 (none) or more, not {value!r}")
        return number

    return convert


def _non_negative_number(name: str) -> Callable[[Any, str], float]:
    def convert(value: Any, source: str) -> float:
        number = float(value)
        if not number >= 0 or number == float("inf"):
            raise SettingsError(f"{source}: {name} must be 0 (none) or more, not {value!r}")
        return number

    return convert


def _fraction(name: str, value: Any, source: str) -> float:
    number = _positive_number(name)(value, source)
    if number > 1:
        raise SettingsError(f"{source}: {name} must be a fraction in (0, 1], not {value!r}")
    return number


def _optional(convert: Callable[[Any, str], Any], value: Any, source: str) -> Any:
    """None for an empty value ("no ceiling"), else `convert`'s."""
    return None if value in (None, "") else convert(value, source)


_CONVERTERS: dict[str, Callable[[Any, str], Any]] = {
    "taint": lambda value, source: None if value in (None, "") else parse_taint(str(value), source),
    "labels": _labels,
    "capacity": _capacity,
    "max_provider_pods": lambda value, source: _optional(_positive_int("max_provider_pods"), value, source),
    "max_spend_per_hour": lambda value, source: _optional(
        _positive_number("max_spend_per_hour"), value, source
    ),
    "addresses": _addresses,
    "namespaces": _namespaces,
    "provider_config": _provider_config,
    "state_dir": lambda value, source: Path(value),
    "serving_certificate": _serving_certificate,
    "kubelet_serving_cert_file": lambda value, source: _optional_path(value),
    "kubelet_serving_key_file": lambda value, source: _optional_path(value),
    "kubelet_client_ca_file": lambda value, source: _optional_path(value),
    "kubelet_csr_self_approve": lambda value, source: _boolean(value),
    "insecure_kubelet_api_allow_all": lambda value, source: _boolean(value),
    "kubelet_websocket": lambda value, source: _boolean(value),
    "no_taint": lambda value, source: _boolean(value),
    "allow_unpriced_pods": lambda value, source: _boolean(value),
    "leader_elect": lambda value, source: _boolean(value),
    "leader_election_namespace": lambda value, source: None if value in (None, "") else str(value),
    "traffic_key_secret": _traffic_key_secret,
    "log_level": _log_level,
    "log_format": _log_format,
    "leader_election_identity": lambda value, source: None if value in (None, "") else str(value),
    "kubelet_port": _positive_int("kubelet_port", 65535),
    "health_port": lambda value, source: (
        0 if value in (None, "", 0, "0") else _positive_int("health_port", 65535)(value, source)
    ),
    "concurrent_pod_reconciles": _positive_int("concurrent_pod_reconciles"),
    "api_burst": _non_negative_int("api_burst"),
    "api_qps": _non_negative_number("api_qps"),
    "lease_duration_seconds": _positive_int("lease_duration_seconds"),
    "token_refresh_fraction": lambda value, source: _fraction("token_refresh_fraction", value, source),
}


def _coerce(name: str, value: Any, source: str) -> Any:
    """Turn a file/env/flag value into the type the field holds, or explain what is wrong."""
    converter = _CONVERTERS.get(name)
    if converter is None:
        converter = (
            _positive_number(name) if name.endswith("_seconds") else (lambda value, source: str(value))
        )
    try:
        return converter(value, source)
    except SettingsError:
        raise
    except (TypeError, ValueError) as error:
        raise SettingsError(f"{source}: {name} {value!r} is invalid ({error})") from None


def load_yaml_file(path: Path, source: str) -> dict[str, Any]:
    try:
        document = yaml.safe_load(path.read_text())
    except OSError as error:
        raise SettingsError(f"{source}: cannot read {path}: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise SettingsError(f"{source}: {path} is not valid YAML: {error}") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise SettingsError(f"{source}: {path} must hold a mapping of settings")
    return document


def _apply(values: dict[str, Any], raw: Mapping[str, Any], source: str) -> None:
    for key, value in raw.items():
        name = key.replace("-", "_")
        if name in DEPRECATED_SETTINGS:
            warn_deprecated(_named_as_in(source, name), _named_as_in(source, DEPRECATED_SETTINGS[name]))
            name = DEPRECATED_SETTINGS[name]
        if name not in FIELDS:
            raise SettingsError(f"{source}: unknown setting {key!r}; known: {', '.join(sorted(FIELDS))}")
        values[name] = _coerce(name, value, source)


def _named_as_in(source: str, name: str) -> str:
    """A setting's name as `source` spells it: the file's key, the variable, the flag."""
    if source == "environment":
        return f"{ENV_PREFIX}{name.upper()}"
    if source == "command line":
        return "--" + name.replace("_", "-")
    return name


def load_settings(
    *, config_file: Path | None, environ: Mapping[str, str] | None = None, flags: Mapping[str, Any]
) -> NodeSettings:
    """Defaults < file < environment (VK_PROVIDER_<NAME>) < flags (those not None)."""
    values: dict[str, Any] = {}
    if config_file is not None:
        _apply(
            values, load_yaml_file(config_file, f"config file {config_file}"), f"config file {config_file}"
        )
    environment = os.environ if environ is None else environ
    variables = {name: f"{ENV_PREFIX}{name.upper()}" for name in (*DEPRECATED_SETTINGS, *FIELDS)}
    from_env = {
        name: environment[variable]
        for name, variable in variables.items()
        if variable in environment and not service_link(variable, environment[variable])
    }
    _apply(values, from_env, "environment")
    _apply(values, {name: value for name, value in flags.items() if value is not None}, "command line")
    return NodeSettings(**values)
