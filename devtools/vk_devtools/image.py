"""The container image of the node, the router and the controller, built without a registry.

A machine with a container builder and a registry builds `Containerfile` (`make image`). This machine
has neither, so the same image is made from Debian's packages, as `Containerfile` describes it:

1. `mmdebstrap` (Debian's, unpacked into our cache) makes a minimal Debian root file system with
   Python 3.11 (`PACKAGES`);
2. the project and its dependencies are built as wheels on this machine (`pip wheel`), and installed
   into a virtual environment in that root (`/opt/vk-provider`) by the root's own Python, offline;
   then what only the installation needed goes (pip, the venv package, apt's lists);
3. a user 65532 (`nonroot`) owns the state folder, and nothing else is writable by it;
4. `umoci` (Debian's too) packs the root as one layer of an OCI image layout, with the user, the
   entrypoint and the OCI labels in its configuration.

It needs root (mmdebstrap's root mode, and chroot). The result is an OCI layout folder that
`skopeo copy oci:<folder>:<tag> docker://<registry>/...` pushes anywhere.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from vk_devtools.devcluster.debian import debian_program

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
PACKAGES = ("python3", "python3-venv", "ca-certificates")
BUILD_ONLY_PACKAGES = ("python3-venv", "python3.11-venv", "python3-pip-whl", "python3-setuptools-whl")
"""Needed to make the virtual environment, not to run it: purged before packing."""
EXCLUDED_PATHS = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/locale/*", "/usr/share/info/*")
USER_ID = 65532
VENV = "/opt/vk-provider"
ENTRYPOINT = f"{VENV}/bin/vk-provider"
STATE_DIR = "/var/lib/vk-provider"
WHEELS_INSIDE = "/opt/wheels"
"""Where the wheels wait inside the root while they are installed (removed after)."""
STEP_TIMEOUT_SECONDS = 900
PROJECT_FILES = ("pyproject.toml", "README.md", "vk_provider", "providers")
"""What the image is built from, as the Containerfile copies it."""


class ImageBuildError(RuntimeError):
    """A step of the build failed; the message names it and quotes what it said."""


@dataclasses.dataclass(frozen=True)
class BuiltImage:
    layout: Path
    """The OCI image layout folder."""
    tag: str
    layer_bytes: int
    """The compressed layer: what a registry stores and a node pulls."""
    root_bytes: int
    """The unpacked root file system."""

    @property
    def reference(self) -> str:
        """As umoci and skopeo name it: `<layout>:<tag>`."""
        return f"{self.layout}:{self.tag}"


def umoci() -> Path:
    return debian_program("umoci", "usr/bin/umoci")


def build_image(
    source: Path,
    layout: Path,
    *,
    tag: str,
    version: str,
    revision: str,
    source_url: str | None = None,
    log: TextIO = sys.stderr,
) -> BuiltImage:
    """Build the image of the project at `source` into the OCI layout `layout` (replaced); the OCI
    labels name `version`, `revision` and, when known, `source_url`."""
    if os.geteuid() != 0:
        raise ImageBuildError("building the image needs root (mmdebstrap's root mode and chroot)")
    with tempfile.TemporaryDirectory(prefix="vk-image-") as scratch:
        root = Path(scratch) / "rootfs"
        _debian_root(root, log)
        _install_project(source, root, Path(scratch) / "wheels", log)
        _prepare_for_nonroot(root)
        root_bytes = _size(root)
        labels = _labels(version, revision, source_url)
        _pack(root, layout, Path(scratch) / "bundle", tag=tag, labels=labels, log=log)
    return BuiltImage(layout, tag, _layer_bytes(layout, tag), root_bytes)


def _run(step: str, command: Sequence[object], log: TextIO, env: dict[str, str] | None = None) -> str:
    print(f"image: {step}", file=log, flush=True)
    done = subprocess.run(
        [str(part) for part in command],
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT_SECONDS,
        check=False,
        env=env,
    )
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip()[-3000:]
        raise ImageBuildError(f"image: {step} failed (exit {done.returncode}): {said}")
    return done.stdout


def _debian_root(root: Path, log: TextIO) -> None:
    mmdebstrap = debian_program("mmdebstrap", "usr/bin/mmdebstrap")
    # mmdebstrap runs its helper mmtarfilter from PATH: the unpacked package's folder goes first.
    env = {**os.environ, "PATH": f"{mmdebstrap.parent}:{os.environ.get('PATH', '')}"}
    excluded = [f"--dpkgopt=path-exclude={path}" for path in EXCLUDED_PATHS]
    command = [
        mmdebstrap,
        "--variant=minbase",
        f"--include={','.join(PACKAGES)}",
        *excluded,
        SUITE,
        root,
        MIRROR,
    ]
    _run(f"a Debian {SUITE} root with {', '.join(PACKAGES)} (mmdebstrap)", command, log, env)


def _install_project(source: Path, root: Path, wheels: Path, log: TextIO) -> None:
    # From a copy: setuptools builds in the tree it is given (its build/ folder), and the checkout's
    # own must stay the user's (two builds at once collided there).
    tree = wheels.with_name("source")
    tree.mkdir()
    for name in PROJECT_FILES:
        if (source / name).is_dir():
            shutil.copytree(source / name, tree / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source / name, tree / name)
    _run(
        "wheels of the project and its dependencies",
        [sys.executable, "-m", "pip", "wheel", "--quiet", tree, "-w", wheels],
        log,
    )
    inside = root / WHEELS_INSIDE.lstrip("/")
    shutil.copytree(wheels, inside)
    _run("the virtual environment", ["chroot", root, "python3", "-m", "venv", VENV], log)
    pip = f"{VENV}/bin/pip"
    install = [
        "chroot",
        root,
        pip,
        "install",
        "--quiet",
        "--no-index",
        "--find-links",
        WHEELS_INSIDE,
        "vk-provider",
    ]
    _run("the project into it, offline", install, log)
    _run(
        "pip and setuptools out of it",
        ["chroot", root, pip, "uninstall", "--quiet", "--yes", "pip", "setuptools"],
        log,
    )
    purge = ["chroot", root, "dpkg", "--purge", *BUILD_ONLY_PACKAGES]
    _run("the packages only the installation needed", purge, log)
    shutil.rmtree(inside)
    for leftovers in ("var/lib/apt/lists", "var/cache/apt", "var/log"):
        folder = root / leftovers
        for entry in folder.iterdir() if folder.is_dir() else ():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()


def _prepare_for_nonroot(root: Path) -> None:
    """The user 65532 (`nonroot`, as distroless names it), its home, and the state folder it owns."""
    with (root / "etc" / "passwd").open("a") as passwd:
        passwd.write(f"nonroot:x:{USER_ID}:{USER_ID}:nonroot:/home/nonroot:/usr/sbin/nologin\n")
    with (root / "etc" / "group").open("a") as group:
        group.write(f"nonroot:x:{USER_ID}:\n")
    for folder in ("home/nonroot", STATE_DIR.lstrip("/")):
        path = root / folder
        path.mkdir(parents=True, exist_ok=True)
        os.chown(path, USER_ID, USER_ID)


def _labels(version: str, revision: str, source_url: str | None) -> dict[str, str]:
    labels = {
        "org.opencontainers.image.title": "vk-provider",
        "org.opencontainers.image.description": "vk-provider: the node daemon, the router and the controller",
        "org.opencontainers.image.version": version,
        "org.opencontainers.image.revision": revision,
        "org.opencontainers.image.licenses": "Apache-2.0",
        "org.opencontainers.image.created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if source_url:
        labels["org.opencontainers.image.source"] = source_url
    return labels


def _pack(root: Path, layout: Path, bundle: Path, *, tag: str, labels: dict[str, str], log: TextIO) -> None:
    tool = umoci()
    if layout.exists():
        shutil.rmtree(layout)
    reference = f"{layout}:{tag}"
    _run("an empty OCI layout (umoci init)", [tool, "init", "--layout", layout], log)
    _run("an empty image in it", [tool, "new", "--image", reference], log)
    _run("its bundle", [tool, "unpack", "--image", reference, bundle], log)
    shutil.rmtree(bundle / "rootfs")
    shutil.move(root, bundle / "rootfs")
    _run("the root as the image's layer (umoci repack)", [tool, "repack", "--image", reference, bundle], log)
    config = [
        tool,
        "config",
        "--image",
        reference,
        f"--config.user={USER_ID}:{USER_ID}",
        f"--config.entrypoint={ENTRYPOINT}",
        "--config.cmd=--help",
        f"--config.workingdir={STATE_DIR}",
        f"--config.env=PATH={VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "--config.env=PYTHONDONTWRITEBYTECODE=1",
        *(f"--config.label={key}={value}" for key, value in labels.items()),
        *(f"--manifest.annotation={key}={value}" for key, value in labels.items()),
    ]
    _run("the image's configuration: user, entrypoint, labels", config, log)
    _run("unreferenced blobs out (umoci gc)", [tool, "gc", "--layout", layout], log)


def image_config(layout: Path, tag: str) -> tuple[dict[str, object], dict[str, object]]:
    """The image's manifest and configuration, read from the layout as a runtime would."""
    index = json.loads((layout / "index.json").read_text())
    (descriptor,) = [
        item
        for item in index["manifests"]
        if item.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag
    ]
    manifest = json.loads(_blob(layout, descriptor["digest"]).read_text())
    config = json.loads(_blob(layout, manifest["config"]["digest"]).read_text())
    return manifest, config


def _blob(layout: Path, digest: str) -> Path:
    algorithm, _, value = digest.partition(":")
    return layout / "blobs" / algorithm / value


def _layer_bytes(layout: Path, tag: str) -> int:
    manifest, _ = image_config(layout, tag)
    layers = manifest["layers"]
    if not isinstance(layers, list):
        raise ImageBuildError(f"the manifest of {layout}:{tag} has no list of layers")
    return sum(int(layer["size"]) for layer in layers)


def _size(root: Path) -> int:
    total = 0
    for folder, _, files in os.walk(root):
        for name in files:
            path = Path(folder) / name
            if not path.is_symlink():
                total += path.stat().st_size
    return total
