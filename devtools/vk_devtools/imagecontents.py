"""What the image contains, read from the two lists in `image/` that both of its build paths use.

`image/debian-packages.txt` names the Debian packages (some `build-only`, purged before packing);
`image/requirements.txt` pins every Python distribution of `vk-provider[router]` with hashes
(`make lock` writes it with pip-compile). The Containerfile reads the same files, and the development
venv installs the same pins, so the image, its two builds and the dev cluster run one set of versions.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

DEBIAN_PACKAGES = Path("image") / "debian-packages.txt"
REQUIREMENTS = Path("image") / "requirements.txt"
BUILD_ONLY = "build-only"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


class ImageContentsError(ValueError):
    """A list in image/ cannot be read as the image's contents; the message names the file and line."""


@dataclasses.dataclass(frozen=True)
class DebianPackages:
    installed: tuple[str, ...]
    """Every package to install, in the file's order."""
    build_only: tuple[str, ...]
    """Those purged again before the image is packed."""


def debian_packages(source: Path) -> DebianPackages:
    path = source / DEBIAN_PACKAGES
    installed: list[str] = []
    build_only: list[str] = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) > 2 or (len(words) == 2 and words[1] != BUILD_ONLY):
            raise ImageContentsError(
                f"{path}:{number}: expected `PACKAGE` or `PACKAGE {BUILD_ONLY}`: {line!r}"
            )
        installed.append(words[0])
        if len(words) == 2:
            build_only.append(words[0])
    if not installed:
        raise ImageContentsError(f"{path} names no package")
    return DebianPackages(tuple(installed), tuple(build_only))


def normalized(name: str) -> str:
    """A distribution's name as PEP 503 compares them: `PyYAML` and `pyyaml`, `a_b` and `a-b` agree."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned_requirements(source: Path) -> dict[str, str]:
    """Each pinned distribution of the lock (normalized name -> version)."""
    path = source / REQUIREMENTS
    pins: dict[str, str] = {}
    for line in path.read_text().splitlines():
        match = _PIN.match(line)
        if match:
            pins[normalized(match[1])] = match[2]
    if not pins:
        raise ImageContentsError(f"{path} pins nothing: regenerate it with `make lock`")
    return pins
