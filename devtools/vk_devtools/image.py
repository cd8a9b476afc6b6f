"""The container image of the node, the router and the controller, built without a registry.

A machine with a container builder and a registry builds `Containerfile` (`make image`). This machine
has neither, so the same image is made from Debian's packages, as `Containerfile` describes it:

1. `mmdebstrap` (Debian's, unpacked into our cache) makes a minimal Debian root file system with the
   packages `image/debian-packages.txt` names (the Containerfile installs the same list);
2. the Python distributions `image/requirements.txt` pins are downloaded on this machine as wheels,
   checked against the lock's hashes, and installed into a virtual environment in that root
   (`/opt/vk-provider`) by the root's own Python, offline, with the hashes checked again; then the
   project's wheel, without dependencies (the lock has them all, the `router` extra's uvloop too);
   then what only the installation needed goes (pip, the `build-only` packages, apt's lists);
3. a user 65532 (`nonroot`) owns the state folder, and nothing else is writable by it;
4. `umoci` (Debian's too) packs the root as one layer of an OCI image layout, with the user, the
   entrypoint and the OCI labels in its configuration.

It needs root (mmdebstrap's root mode, and chroot). The result is an OCI layout folder that
`skopeo copy oci:<folder>:<tag> docker://<registry>/...` pushes anywhere.
"""

from __future__ import annotations

import dataclasses
import hashlib
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
from vk_devtools.imagecontents import REQUIREMENTS, debian_packages

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
EXCLUDED_PATHS = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/locale/*", "/usr/share/info/*")
USER_ID = 65532
VENV = "/opt/vk-provider"
ENTRYPOINT = f"{VENV}/bin/vk-provider"
STATE_DIR = "/var/lib/vk-provider"
WHEELS_INSIDE = "/opt/wheels"
"""Where the wheels wait inside the root while they are installed (removed after)."""
LICENSE_INSIDE = "/usr/share/doc/vk-provider/LICENSE"
"""Where the image keeps the project's license (the Containerfile puts it there too)."""
STEP_TIMEOUT_SECONDS = 900
PROJECT_FILES = ("pyproject.toml", "README.md", "LICENSE", "vk_provider", "providers")
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
    project_wheel: Path | None = None,
    base_cache: Path | None = None,
    log: TextIO = sys.stderr,
) -> BuiltImage:
    """Build the image of the project at `source` into the OCI layout `layout` (replaced); the OCI
    labels name `version`, `revision` and, when known, `source_url`. `project_wheel`: the project's
    wheel to install (a release's own); by default one is built from `source`. `base_cache`: a folder
    that keeps the Debian root with the locked dependencies installed, reused while the package list
    and the lock are the same (the tests' builds; a release takes Debian's packages as they are today,
    so `make release` and `dev image` pass none)."""
    if os.geteuid() != 0:
        raise ImageBuildError("building the image needs root (mmdebstrap's root mode and chroot)")
    with tempfile.TemporaryDirectory(prefix="vk-image-") as scratch:
        root = Path(scratch) / "rootfs"
        packages = debian_packages(source)
        _base_root(source, root, packages.installed, Path(scratch) / "wheels", cache=base_cache, log=log)
        wheel = project_wheel or _project_wheel(source, Path(scratch) / "project", log)
        _install_project(root, wheel, log)
        _remove_build_only(root, packages.build_only, log)
        license_file = root / LICENSE_INSIDE.lstrip("/")
        license_file.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / "LICENSE", license_file)
        _prepare_for_nonroot(root)
        root_bytes = _size(root)
        labels = _labels(version, revision, source_url)
        _pack(root, layout, Path(scratch) / "bundle", tag=tag, labels=labels, log=log)
    return BuiltImage(layout, tag, _layer_bytes(layout, tag), root_bytes)


def run_step(
    who: str,
    step: str,
    command: Sequence[object],
    log: TextIO,
    *,
    error: type[RuntimeError],
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> str:
    """Run one build step, saying `who: step` on `log`; its output, or `error` quoting what it said."""
    print(f"{who}: {step}", file=log, flush=True)
    done = subprocess.run(
        [str(part) for part in command],
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT_SECONDS,
        check=False,
        env=env,
        cwd=cwd,
    )
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip()[-3000:]
        raise error(f"{who}: {step} failed (exit {done.returncode}): {said}")
    return done.stdout


def _run(step: str, command: Sequence[object], log: TextIO, env: dict[str, str] | None = None) -> str:
    return run_step("image", step, command, log, error=ImageBuildError, env=env)


def _debian_root(root: Path, packages: Sequence[str], log: TextIO) -> None:
    mmdebstrap = debian_program("mmdebstrap", "usr/bin/mmdebstrap")
    # mmdebstrap runs its helper mmtarfilter from PATH: the unpacked package's folder goes first.
    env = {**os.environ, "PATH": f"{mmdebstrap.parent}:{os.environ.get('PATH', '')}"}
    excluded = [f"--dpkgopt=path-exclude={path}" for path in EXCLUDED_PATHS]
    command = [
        mmdebstrap,
        "--variant=minbase",
        f"--include={','.join(packages)}",
        *excluded,
        SUITE,
        root,
        MIRROR,
    ]
    _run(f"a Debian {SUITE} root with {', '.join(packages)} (mmdebstrap)", command, log, env)


def _project_wheel(source: Path, folder: Path, log: TextIO) -> Path:
    """The project's own wheel, without its dependencies (the lock brings those)."""
    # From a copy: setuptools builds in the tree it is given (its build/ folder), and the checkout's
    # own must stay the user's (two builds at once collided there).
    tree = folder / "source"
    tree.mkdir(parents=True)
    for name in PROJECT_FILES:
        if (source / name).is_dir():
            shutil.copytree(source / name, tree / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source / name, tree / name)
    wheels = folder / "wheel"
    _run(
        "the project's wheel",
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", tree, "-w", wheels],
        log,
    )
    (wheel,) = wheels.glob("vk_provider-*.whl")
    return wheel


def _base_root(
    source: Path, root: Path, packages: Sequence[str], wheels: Path, *, cache: Path | None, log: TextIO
) -> None:
    """The Debian root with the locked dependencies in its virtual environment: from `cache` when it
    holds one of the same packages and lock, else built (and, with a `cache`, kept there)."""
    key = hashlib.sha256(
        json.dumps(
            [SUITE, MIRROR, EXCLUDED_PATHS, VENV, sorted(packages), (source / REQUIREMENTS).read_text()]
        ).encode()
    ).hexdigest()[:16]
    kept = None if cache is None else cache / f"base-{key}.tar"
    if kept is not None and kept.is_file():
        root.mkdir(parents=True)
        _run(
            f"the Debian root and the locked dependencies, from {kept}",
            ["tar", "-C", root, "-xpf", kept],
            log,
        )
        return
    _debian_root(root, packages, log)
    _install_locked(source, root, wheels, log)
    if kept is None:
        return
    kept.parent.mkdir(parents=True, exist_ok=True)
    partial = kept.with_name(kept.name + ".partial")
    _run(f"the base kept in {kept}", ["tar", "-C", root, "--numeric-owner", "-cpf", partial, "."], log)
    partial.replace(kept)
    for older in kept.parent.glob("base-*.tar"):  # another list or lock: it will not be read again
        if older != kept:
            older.unlink(missing_ok=True)


def _install_locked(source: Path, root: Path, wheels: Path, log: TextIO) -> None:
    # Binary wheels only: a wheel built here from an sdist would not have the hash the lock names.
    download = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--only-binary=:all:",
        "--require-hashes",
        "-r",
        source / REQUIREMENTS,
        "-d",
        wheels,
    ]
    _run(f"the wheels {REQUIREMENTS} pins, checked against its hashes", download, log)
    inside = root / WHEELS_INSIDE.lstrip("/")
    shutil.copytree(wheels, inside)
    shutil.copy2(source / REQUIREMENTS, inside / "requirements.txt")
    _run("the virtual environment", ["chroot", root, "python3", "-m", "venv", VENV], log)
    _run(
        "the locked dependencies into it, offline, hashes checked",
        [*_pip_install(root), "--require-hashes", "-r", f"{WHEELS_INSIDE}/requirements.txt"],
        log,
    )
    shutil.rmtree(inside)


def _pip_install(root: Path) -> list[object]:
    return [
        "chroot",
        root,
        f"{VENV}/bin/pip",
        "--disable-pip-version-check",
        "install",
        "--quiet",
        "--no-index",
        "--find-links",
        WHEELS_INSIDE,
    ]


def _install_project(root: Path, project_wheel: Path, log: TextIO) -> None:
    """The project's wheel, without dependencies (the base has them all); then pip and setuptools go."""
    inside = root / WHEELS_INSIDE.lstrip("/")
    inside.mkdir(parents=True, exist_ok=True)
    shutil.copy2(project_wheel, inside / project_wheel.name)
    _run(
        "the project's wheel into it, without dependencies",
        [*_pip_install(root), "--no-deps", f"{WHEELS_INSIDE}/{project_wheel.name}"],
        log,
    )
    _run(
        "pip and setuptools out of it",
        ["chroot", root, f"{VENV}/bin/pip", "uninstall", "--quiet", "--yes", "pip", "setuptools"],
        log,
    )
    shutil.rmtree(inside)


def _remove_build_only(root: Path, packages: Sequence[str], log: TextIO) -> None:
    if packages:
        _run("the packages only the installation needed", ["chroot", root, "dpkg", "--purge", *packages], log)
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
