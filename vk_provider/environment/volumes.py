"""The files of a pod's ConfigMap, Secret and projected volumes, as the kubelet would write them.

Why here: a provider that runs the pod far away (a remote cluster) cannot read the home cluster, so
the node reads the objects, as it does for the environment, and hands the provider the files.

Resolved: `configMap` and `secret` volumes, and `projected` volumes whose sources are all `configMap`
or `secret` (a projected volume with a token, downward API or trust bundle source is left out, so the
home token volume costs no reads; providers refuse or drop what they cannot carry). Given a token
issuer (for a provider that mounts tokens, see `SupportsServiceAccountTokens`), projected volumes with
`serviceAccountToken` and `downwardAPI` (`fieldRef`) sources resolve too: the API server's own
`kube-api-access-*` volume (token, `ca.crt`, `namespace`) for one. The kubelet's
rules: without `items` every key is a file named after it (a ConfigMap's `data` and `binaryData`
alike); with `items` only those keys, at their paths; an item's `mode`, else the volume's
`defaultMode`, else 0o644. A missing object or key is excused by `optional: true` (the volume gets
what there is, maybe nothing); otherwise the pod must not start: `MandatoryReferenceError` with the
kubelet's `FailedMount` event and message, which the node records and retries exactly as for a
missing environment reference. File contents are never logged or put in events.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from vk_provider.environment.field_refs import PodFields, field_ref_value
from vk_provider.environment.model import (
    EnvironmentEvent,
    MandatoryReferenceError,
    ReferenceReader,
    SelectorError,
    TokenIssuer,
)
from vk_provider.environment.resolve import DEFAULT_NAMESPACE
from vk_provider.provider import VolumeFile

FAILED_MOUNT_REASON = "FailedMount"
DEFAULT_MODE = 0o644
"""The API's default `defaultMode`; pods read from the API have it set already."""
_KINDS = ("configMap", "secret")
_PROJECTED_WITH_TOKENS = (*_KINDS, "downwardAPI", "serviceAccountToken")
DEFAULT_TOKEN_EXPIRATION_SECONDS = 3600
"""A `serviceAccountToken` source's lifetime when it names none (the API's default)."""


async def resolve_volume_files(
    pod: Mapping[str, Any], reader: ReferenceReader, *, tokens: TokenIssuer | None = None
) -> dict[str, tuple[VolumeFile, ...]]:
    """Volume name -> its files, for the volumes this module resolves (see the module docstring)."""
    namespace = str(pod["metadata"].get("namespace") or DEFAULT_NAMESPACE)
    objects = _ObjectCache(reader, namespace)
    resolved: dict[str, tuple[VolumeFile, ...]] = {}
    projected_kinds = _KINDS if tokens is None else _PROJECTED_WITH_TOKENS
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        name = str(volume.get("name", ""))
        sources = _sources(volume, projected_kinds)
        if sources is None:
            continue
        default_mode = _mode(volume, sources)
        files: dict[str, VolumeFile] = {}  # by path: a later projected source overwrites, as in the kubelet
        for kind, source in sources:
            if kind == "serviceAccountToken" and tokens is not None:
                found = [await _token_file(pod, source, default_mode, tokens)]
            elif kind == "downwardAPI":
                found = _downward_files(pod, name, source, default_mode)
            else:
                found = await _source_files(name, kind, source, default_mode, objects)
            for file in found:
                files[file.path] = file
        resolved[name] = tuple(files.values())
    return resolved


def _sources(
    volume: Mapping[str, Any], projected_kinds: Sequence[str]
) -> list[tuple[str, Mapping[str, Any]]] | None:
    """(kind, source) of each source the volume shows; None for a volume not resolved here."""
    for kind in _KINDS:
        if volume.get(kind) is not None:
            return [(kind, volume[kind])]
    projected = volume.get("projected")
    if projected is None:
        return None
    sources: list[tuple[str, Mapping[str, Any]]] = []
    for source in projected.get("sources") or []:
        kinds = [kind for kind in projected_kinds if source.get(kind) is not None]
        if len(kinds) != 1 or len(source) != 1:
            return None  # a source of a kind not carried (a token without an issuer, a trust bundle)
        sources.append((kinds[0], source[kinds[0]]))
    return sources


async def _token_file(
    pod: Mapping[str, Any], source: Mapping[str, Any], mode: int, tokens: TokenIssuer
) -> VolumeFile:
    lifetime = source.get("expirationSeconds")
    token = await tokens.service_account_token(
        pod,
        audience=str(source.get("audience") or ""),
        expiration_seconds=DEFAULT_TOKEN_EXPIRATION_SECONDS if lifetime is None else int(lifetime),
    )
    return VolumeFile(path=str(source.get("path") or "token"), content=token, mode=mode)


def _downward_files(
    pod: Mapping[str, Any], volume: str, source: Mapping[str, Any], default_mode: int
) -> list[VolumeFile]:
    """A projected downward API source's items: pod fields (`fieldRef`); a container's resources
    (`resourceFieldRef`) are not carried."""
    fields = PodFields(pod, pod_ip="", host_ip="")  # the API refuses status fields in volumes
    files = []
    for item in source.get("items") or []:
        path = str(item.get("path", ""))
        if item.get("fieldRef") is None:
            raise ValueError(f'volume "{volume}", item "{path}": only fieldRef items can be mounted here')
        try:
            value = field_ref_value(item["fieldRef"], fields)
        except SelectorError as error:
            raise ValueError(f'volume "{volume}", item "{path}": {error}') from None
        mode = item.get("mode")
        files.append(
            VolumeFile(path=path, content=value.encode(), mode=default_mode if mode is None else int(mode))
        )
    return files


def _mode(volume: Mapping[str, Any], sources: Sequence[tuple[str, Mapping[str, Any]]]) -> int:
    """The volume's defaultMode: on the source for configMap and secret, on the volume for projected."""
    holder = volume["projected"] if "projected" in volume else sources[0][1]
    mode = holder.get("defaultMode")
    return DEFAULT_MODE if mode is None else int(mode)


async def _source_files(
    volume: str, kind: str, source: Mapping[str, Any], default_mode: int, objects: _ObjectCache
) -> list[VolumeFile]:
    # A secret volume names its Secret `secretName`; every other source says `name`.
    object_name = str(source.get("secretName") or source.get("name") or "")
    optional = source.get("optional") is True
    data = await objects.read(kind, object_name)
    if data is None:
        if not optional:
            noun = "configmap" if kind == "configMap" else "secret"
            _fail(volume, f'{noun} "{object_name}" not found')
        data = {}
    items: Sequence[Mapping[str, Any]] = source.get("items") or []
    if not items:
        return [VolumeFile(path=key, content=data[key], mode=default_mode) for key in sorted(data)]
    files = []
    for item in items:
        key = str(item.get("key", ""))
        if key not in data:
            if optional:
                continue
            # The kubelet's own wording, which differs between the two kinds.
            if kind == "configMap":
                _fail(volume, f"configmap references non-existent config key: {key}")
            _fail(volume, f"references non-existent secret key: {key}")
        mode = item.get("mode")
        files.append(
            VolumeFile(
                path=str(item.get("path", key)),
                content=data[key],
                mode=default_mode if mode is None else int(mode),
            )
        )
    return files


def _fail(volume: str, detail: str) -> NoReturn:
    message = f'MountVolume.SetUp failed for volume "{volume}" : {detail}'
    raise MandatoryReferenceError(EnvironmentEvent("Warning", FAILED_MOUNT_REASON, message))


class _ObjectCache:
    """Reads each object once per pod, so every volume sees the same version of it."""

    def __init__(self, reader: ReferenceReader, namespace: str) -> None:
        self._reader = reader
        self._namespace = namespace
        self._read: dict[tuple[str, str], Mapping[str, bytes] | None] = {}

    async def read(self, kind: str, name: str) -> Mapping[str, bytes] | None:
        if (kind, name) not in self._read:
            if kind == "configMap":
                found = await self._reader.config_map_files(self._namespace, name)
            else:
                found = await self._reader.secret(self._namespace, name)
            self._read[kind, name] = found
        return self._read[kind, name]
