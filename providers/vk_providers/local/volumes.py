"""A local pod's volumes as folders in its state folder, written the way the kubelet writes them.

With `mount_volumes` on, each volume a container mounts gets a folder, `<pod>/volumes/<name>`:
- the files the node resolved (`PodRequest.volume_files`: ConfigMap, Secret and projected volumes, the
  ServiceAccount token included) are written there atomically, as the kubelet's atomic writer does:
  into a fresh hidden folder, then one rename of the `..data` link makes them visible, and each
  top-level name is a link through `..data`. A reader therefore sees the old set or the new one, never
  a mix, and a rotated token replaces the old one in place (the bind mount shows the folder, so the
  change reaches the running container);
- an `emptyDir` is an empty folder;
- a `hostPath` is its own path on this host.
Any other volume kind a container mounts (a claim, an image volume), and any `subPath`, is refused:
the pod fails with a message naming it, rather than running without the files it expects.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vk_provider.errors import InvalidPodError
from vk_provider.provider import PodRequest, VolumeFile

DATA_LINK = "..data"


def volume_folder(pod_directory: Path, volume: str) -> Path:
    return pod_directory / "volumes" / volume


def plan_mounts(request: PodRequest, pod_directory: Path, container: str) -> tuple[dict[str, Any], ...]:
    """The container's mounts (`source`, `target`, `read_only`), for the monitor; InvalidPodError for a
    mount this provider cannot make."""
    spec = request.raw.get("spec") or {}
    volumes = {str(volume.get("name")): volume for volume in spec.get("volumes") or []}
    raw: Mapping[str, Any] = next(
        (
            candidate
            for candidate in (*(spec.get("initContainers") or ()), *(spec.get("containers") or ()))
            if candidate.get("name") == container
        ),
        {},
    )
    mounts = []
    for mount in raw.get("volumeMounts") or []:
        name, target = str(mount.get("name")), str(mount.get("mountPath"))
        where = f'container "{container}", volume mount "{name}" at {target}'
        if mount.get("subPath") or mount.get("subPathExpr"):
            raise InvalidPodError(f"{where}: the local provider does not mount a subPath")
        volume = volumes.get(name)
        if volume is None:
            raise InvalidPodError(f"{where}: the pod has no such volume")
        mounts.append(
            {
                "source": str(_source(request, pod_directory, name, volume, where)),
                "target": target,
                "read_only": bool(mount.get("readOnly")),
            }
        )
    return tuple(mounts)


def _source(
    request: PodRequest, pod_directory: Path, name: str, volume: Mapping[str, Any], where: str
) -> Path:
    if "hostPath" in volume:
        return Path(str(volume["hostPath"].get("path")))
    folder = volume_folder(pod_directory, name)
    # Written at creation (`prepare_volumes`); an adopted pod's request no longer carries the files.
    if name in request.volume_files or "emptyDir" in volume or folder.is_dir():
        return folder
    kinds = sorted(key for key in volume if key != "name")
    raise InvalidPodError(f"{where}: the local provider cannot mount a volume of kind {', '.join(kinds)}")


def prepare_volumes(request: PodRequest, pod_directory: Path) -> None:
    """Create every volume's folder: emptyDirs empty, resolved volumes with their files."""
    for volume in (request.raw.get("spec") or {}).get("volumes") or []:
        name = str(volume.get("name"))
        if name in request.volume_files:
            write_volume(volume_folder(pod_directory, name), request.volume_files[name])
        elif "emptyDir" in volume:
            volume_folder(pod_directory, name).mkdir(parents=True, exist_ok=True)


def write_volume(folder: Path, files: Sequence[VolumeFile]) -> None:
    """Make `folder` show exactly `files`, switched over in one rename (see the module docstring)."""
    folder.mkdir(parents=True, exist_ok=True)
    data_link = folder / DATA_LINK
    previous = os.readlink(data_link) if data_link.is_symlink() else None
    payload = folder / f"..{secrets.token_hex(8)}"
    payload.mkdir(mode=0o755)
    for file in files:
        path = payload / file.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(file.content)
        path.chmod(file.mode)
    staged = folder / f"{DATA_LINK}_tmp"
    staged.unlink(missing_ok=True)
    staged.symlink_to(payload.name)
    staged.replace(data_link)
    names = {file.path.split("/", 1)[0] for file in files}
    for name in names:
        link = folder / name
        if not link.is_symlink():
            link.symlink_to(f"{DATA_LINK}/{name}")
    for entry in folder.iterdir():
        if entry.is_symlink() and not entry.name.startswith("..") and entry.name not in names:
            entry.unlink()  # a key the new set no longer has
    if previous is not None and previous != payload.name:
        shutil.rmtree(folder / previous, ignore_errors=True)
