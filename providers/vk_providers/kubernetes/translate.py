"""Pods to remote Kubernetes objects. Pure, no I/O. (Remote pods back to pod states: `states`.)

A pod becomes, in the provider's remote namespace, all named after its UID (so a repeated create finds
them):

- a Secret `<prefix>-<uid>-env` with the pod's resolved environment, one key per variable; the remote
  containers read every variable from it (`secretKeyRef`), so values from the home pod's ConfigMaps and
  Secrets never appear in a remote pod spec, and the remote kubelet does not expand `$(...)` in values
  the node has already expanded. Variables that the home pod takes from `status.podIP`, `status.podIPs`,
  `status.hostIP` or `status.hostIPs` are read remotely instead (`fieldRef`): a server must bind to the
  address it really has. `command` and `args` are sent as the pod wrote them, and the remote kubelet
  expands them with these variables;
- a bare Pod `<prefix>-<uid>` (see the package docstring for why not a Deployment) with the containers,
  probes, resources, restart policy and grace period of the home pod, the provider's node selector,
  tolerations and image pull secrets, and no service account token;
- a Service `<prefix>-<uid>` of the configured type over the container ports, when there are any;
- a Secret `<prefix>-<uid>-vol-<n>` per ConfigMap, Secret or projected volume, with the files the node
  read (`PodRequest.volume_files`) under generated keys (`file-<i>`: a path is no valid key), and in
  the Pod a Secret volume of the same name whose `items` put each key back at its path with its mode.
  The containers' `volumeMounts` of carried volumes (emptyDir and these) are copied as they are.
  Volumes the node did not read (a projected volume with a token, downward API or trust bundle source,
  and every other kind but emptyDir) are refused; the home token volume is dropped.

Every object carries the labels `vk-provider.dev/node` (the node name, or a hash of it when it is not
a valid label value) and `vk-provider.dev/pod-uid`, and the annotations with the pod's namespace, name
and UID and the full node name, so `list_pods` can give full references after a restart.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from vk_provider.errors import InvalidPodError
from vk_provider.kit.podvolumes import is_home_token_volume, volume_kinds
from vk_provider.provider import (
    ContainerSpec,
    PodRequest,
    VolumeFile,
)
from vk_providers.kubernetes.config import KubernetesSettings

RawObject = dict[str, Any]

DOMAIN = "vk-provider.dev/"
NODE_LABEL = DOMAIN + "node"
UID_LABEL = DOMAIN + "pod-uid"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "vk-provider"
NODE_ANNOTATION = DOMAIN + "node-name"
NAMESPACE_ANNOTATION = DOMAIN + "pod-namespace"
NAME_ANNOTATION = DOMAIN + "pod-name"
UID_ANNOTATION = DOMAIN + "pod-uid"
TRAFFIC_PORT_NAME = "http"
"""A container port with this name carries the pod's traffic; otherwise the first TCP port does."""
REMOTE_ADDRESS_FIELDS = frozenset({"status.podIP", "status.podIPs", "status.hostIP", "status.hostIPs"})
"""Downward API fields read where the pod runs: the home pod's values are not the remote pod's."""
"""The home cluster's token volume (added by its ServiceAccount admission): not carried over."""
_LABEL_VALUE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_SECRET_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_CONTAINER_FIELDS = (
    "imagePullPolicy",
    "workingDir",
    "readinessProbe",
    "livenessProbe",
    "startupProbe",
    "lifecycle",
    "securityContext",
    "terminationMessagePath",
    "terminationMessagePolicy",
)
"""Container fields the remote pod takes from the home pod as they are."""
_POD_FIELDS = ("activeDeadlineSeconds", "securityContext", "dnsConfig")
_UNSUPPORTED_POD_FIELDS = ("hostNetwork", "hostPID", "hostIPC")


def object_name(settings: KubernetesSettings, uid: str) -> str:
    """The remote Pod's and Service's name."""
    return f"{settings.name_prefix}-{uid}"


def env_secret_name(settings: KubernetesSettings, uid: str) -> str:
    return f"{object_name(settings, uid)}-env"


def volume_secret_name(settings: KubernetesSettings, uid: str, index: int) -> str:
    """The Secret holding the files of the pod's `index`th copied volume (in the order of its volumes)."""
    return f"{object_name(settings, uid)}-vol-{index}"


def pod_selector(node_name: str, uid: str) -> str:
    """The label selector of one pod's remote objects (its env and volume Secrets, to delete them)."""
    return f"{node_selector(node_name)},{UID_LABEL}={uid}"


def node_label_value(node_name: str) -> str:
    """The node's name if it is a valid label value, else a stable hash of it."""
    if len(node_name) <= 63 and _LABEL_VALUE.fullmatch(node_name):
        return node_name
    return "h-" + hashlib.sha256(node_name.encode()).hexdigest()[:40]


def node_selector(node_name: str) -> str:
    """The label selector of this node's remote objects."""
    return f"{NODE_LABEL}={node_label_value(node_name)},{MANAGED_BY_LABEL}={MANAGED_BY}"


@dataclasses.dataclass(frozen=True, slots=True)
class RemoteObjects:
    """What one pod becomes in the remote namespace."""

    secret: RawObject
    pod: RawObject
    service: RawObject | None
    """None when the pod exposes no port."""
    volume_secrets: tuple[RawObject, ...] = ()
    """One Secret per ConfigMap, Secret or projected volume, with the files the node read."""


def remote_objects(pod: PodRequest, settings: KubernetesSettings, node_name: str) -> RemoteObjects:
    """The remote objects for `pod`; InvalidPodError for what the remote cluster cannot be given."""
    spec = pod.raw.get("spec") or {}
    for field in _UNSUPPORTED_POD_FIELDS:
        if spec.get(field):
            raise InvalidPodError(f"{field} is not supported by the kubernetes provider")
    metadata = _metadata(pod, settings, node_name, object_name(settings, pod.ref.uid))
    carried_volumes, volume_secrets = _carried_volumes(pod, settings, metadata)
    secret_name = env_secret_name(settings, pod.ref.uid)
    secret_data: dict[str, str] = {}
    raw_containers = {container.get("name"): container for container in spec.get("containers") or []}
    raw_init = {container.get("name"): container for container in spec.get("initContainers") or []}

    def convert(container: ContainerSpec, raw: Mapping[str, Any]) -> RawObject:
        return _container(container, raw, secret_name, secret_data, carried_volumes)

    pod_spec: RawObject = {
        "containers": [convert(c, raw_containers.get(c.name, {})) for c in pod.containers],
        "restartPolicy": pod.restart_policy,
        "terminationGracePeriodSeconds": int(pod.termination_grace_period_seconds),
        "automountServiceAccountToken": False,
        # The node resolved the home pod's service links into the environment already; remote ones would
        # add variables for every other remote pod's Service in the namespace.
        "enableServiceLinks": False,
    }
    if pod.init_containers:
        pod_spec["initContainers"] = [convert(c, raw_init.get(c.name, {})) for c in pod.init_containers]
    for field in _POD_FIELDS:
        if field in spec:
            pod_spec[field] = spec[field]
    if carried_volumes:
        pod_spec["volumes"] = [carried_volumes[name] for name in sorted(carried_volumes)]
    if settings.node_selector:
        pod_spec["nodeSelector"] = dict(settings.node_selector)
    if settings.tolerations:
        pod_spec["tolerations"] = [dict(toleration) for toleration in settings.tolerations]
    if settings.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": name} for name in settings.image_pull_secrets]
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {**metadata, "name": secret_name},
        "type": "Opaque",
        "stringData": secret_data,
    }
    remote_pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}
    return RemoteObjects(
        secret=secret,
        pod=remote_pod,
        service=_service(pod, settings, metadata),
        volume_secrets=tuple(volume_secrets),
    )


def _metadata(pod: PodRequest, settings: KubernetesSettings, node_name: str, name: str) -> RawObject:
    return {
        "name": name,
        "namespace": settings.namespace,
        "labels": {
            MANAGED_BY_LABEL: MANAGED_BY,
            NODE_LABEL: node_label_value(node_name),
            UID_LABEL: pod.ref.uid,
        },
        "annotations": {
            NODE_ANNOTATION: node_name,
            NAMESPACE_ANNOTATION: pod.ref.namespace,
            NAME_ANNOTATION: pod.ref.name,
            UID_ANNOTATION: pod.ref.uid,
        },
    }


def _carried_volumes(
    pod: PodRequest, settings: KubernetesSettings, metadata: RawObject
) -> tuple[dict[str, RawObject], list[RawObject]]:
    """The volumes the remote pod gets, by name, and the Secrets that hold the copied files.

    emptyDir travels as it is; a ConfigMap, Secret or projected volume the node read (`volume_files`)
    becomes a Secret volume of its own Secret; the home token volume is dropped; the rest is refused.
    """
    carried: dict[str, RawObject] = {}
    secrets: list[RawObject] = []
    refused: list[str] = []
    for volume in (pod.raw.get("spec") or {}).get("volumes") or []:
        name = str(volume.get("name", ""))
        kinds = volume_kinds(volume)
        if is_home_token_volume(volume):
            continue
        if kinds == ["emptyDir"]:
            carried[name] = dict(volume)
        elif kinds in (["configMap"], ["secret"], ["projected"]) and name in pod.volume_files:
            secret_name = volume_secret_name(settings, pod.ref.uid, len(secrets))
            secret, carried[name] = _file_volume(name, pod.volume_files[name], secret_name, metadata)
            secrets.append(secret)
        else:
            refused.append(f"{name} ({_describe_kinds(volume, kinds)})")
    if refused:
        raise InvalidPodError(
            "the kubernetes provider carries only emptyDir, configMap, secret and projected volumes (of "
            f"ConfigMaps and Secrets) to the remote cluster; unsupported: {', '.join(refused)}"
        )
    return carried, secrets


def _describe_kinds(volume: Mapping[str, Any], kinds: Sequence[str]) -> str:
    """The volume's kind; for a projected volume, the sources that made it uncarriable."""
    if kinds != ["projected"]:
        return ", ".join(kinds) or "no source"
    sources = {key for source in volume["projected"].get("sources") or [] for key in source}
    others = sorted(sources - {"configMap", "secret"})
    return f"projected with {', '.join(others)}" if others else "projected"


def _file_volume(
    name: str, files: Sequence[VolumeFile], secret_name: str, metadata: RawObject
) -> tuple[RawObject, RawObject]:
    """A Secret with the volume's files and the Secret volume that mounts them where they were.

    A Secret even for a ConfigMap, so the contents stay as private as the home pod's Secrets may be.
    Keys are generated (a path such as `conf/app.yaml` is no valid key) and `items` put each back at its
    path with its mode. No files (an optional object that is missing) makes an empty volume.
    """
    keys = [f"file-{index}" for index in range(len(files))]
    secret: RawObject = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {**metadata, "name": secret_name},
        "type": "Opaque",
        "data": {key: base64.b64encode(file.content).decode() for key, file in zip(keys, files, strict=True)},
    }
    source: RawObject = {"secretName": secret_name}
    if files:
        source["items"] = [
            {"key": key, "path": file.path, "mode": file.mode} for key, file in zip(keys, files, strict=True)
        ]
    return secret, {"name": name, "secret": source}


def _container(
    container: ContainerSpec,
    raw: Mapping[str, Any],
    secret_name: str,
    secret_data: dict[str, str],
    carried_volumes: Mapping[str, Any],
) -> RawObject:
    remote: RawObject = {"name": container.name, "image": container.image}
    # As written, not as expanded at home: the remote kubelet expands them with the remote variables.
    # A request with no pod object behind it (the conformance kit's) has only the expanded ones.
    for field in ("command", "args"):
        if raw.get(field):
            remote[field] = list(raw[field])
        elif not raw and getattr(container, field):
            remote[field] = list(getattr(container, field))
    remote["env"] = _environment(container, raw, secret_name, secret_data)
    if container.ports:
        remote["ports"] = [_port(port) for port in raw.get("ports") or []] or [
            {"containerPort": port.container_port, "protocol": port.protocol, **_named(port.name)}
            for port in container.ports
        ]
    resources = {
        key: dict(values)
        for key, values in (("requests", container.requests), ("limits", container.limits))
        if values
    }
    if resources:
        remote["resources"] = resources
    for field in _CONTAINER_FIELDS:
        if field in raw:
            remote[field] = raw[field]
    mounts = [dict(mount) for mount in raw.get("volumeMounts") or [] if mount.get("name") in carried_volumes]
    if mounts:
        remote["volumeMounts"] = mounts
    return remote


def _named(name: str | None) -> dict[str, str]:
    return {"name": name} if name else {}


def _port(raw: Mapping[str, Any]) -> RawObject:
    # hostPort and hostIP would claim ports on the remote node: not carried.
    return {key: raw[key] for key in ("name", "containerPort", "protocol") if key in raw}


def _environment(
    container: ContainerSpec, raw: Mapping[str, Any], secret_name: str, secret_data: dict[str, str]
) -> list[RawObject]:
    remote_fields = _remote_address_variables(raw)
    values = dict(container.env)  # a later duplicate wins, at the place of the first
    env: list[RawObject] = []
    for index, (name, value) in enumerate(values.items()):
        if name in remote_fields:
            env.append({"name": name, "valueFrom": {"fieldRef": {"fieldPath": remote_fields[name]}}})
            continue
        key = secret_key(container.name, name, index)
        secret_data[key] = value
        env.append({"name": name, "valueFrom": {"secretKeyRef": {"name": secret_name, "key": key}}})
    return env


def secret_key(container: str, variable: str, index: int) -> str:
    """A variable's key in the env Secret: readable when the name allows it, else by position.

    Names of digits only are keyed by position too, so no name can take another variable's key.
    """
    if _SECRET_KEY.fullmatch(variable) and not variable.isdigit():
        return f"{container}.{variable}"
    return f"{container}.{index}"


def _remote_address_variables(raw: Mapping[str, Any]) -> dict[str, str]:
    """Variables whose last definition in the home pod is an address field of the downward API."""
    fields: dict[str, str] = {}
    for entry in raw.get("env") or []:
        name = entry.get("name")
        path = ((entry.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        if path in REMOTE_ADDRESS_FIELDS:
            fields[name] = path
        else:
            fields.pop(name, None)
    return fields


def _service(pod: PodRequest, settings: KubernetesSettings, metadata: RawObject) -> RawObject | None:
    ports: list[RawObject] = []
    seen: set[tuple[int, str]] = set()
    for container in pod.containers:
        for port in container.ports:
            protocol = port.protocol.upper()
            if (port.container_port, protocol) in seen:
                continue
            seen.add((port.container_port, protocol))
            name = port.name or f"{protocol.lower()}-{port.container_port}"
            ports.append(
                {
                    "name": name,
                    "port": port.container_port,
                    "targetPort": port.container_port,
                    "protocol": protocol,
                }
            )
    if not ports:
        return None
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": {"type": settings.service_type, "selector": {UID_LABEL: pod.ref.uid}, "ports": ports},
    }
