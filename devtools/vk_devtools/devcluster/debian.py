"""Programs from Debian's packages, unpacked into our cache rather than installed on the machine.

Some tools the tests run are not Go modules of ours to build but ship in Debian (Prometheus, to run
the `gatewayapi` data plane's home-side queries for real). `apt-get download` fetches the package as
any user, `dpkg-deb -x` unpacks it into the cache folder (`<cache>/debian/<package file name>/`), and
nothing is installed system-wide. The version is the one the machine's package lists name; a cached
unpacking of the package is used as long as it is there.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import tempfile
from pathlib import Path

from vk_devtools.devcluster.building import cache_root

TIMEOUT_SECONDS = 300


class DebianPackageError(RuntimeError):
    """The package could not be fetched or unpacked; the message says what apt or dpkg said."""


def _run(command: list[str], cwd: Path) -> None:
    completed = subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_SECONDS, check=False
    )
    if completed.returncode != 0:
        raise DebianPackageError(
            f"`{' '.join(command)}` failed (exit {completed.returncode}): "
            f"{(completed.stderr or completed.stdout).strip()[-2000:]}"
        )


def _download(package: str, into: Path) -> Path:
    """The package's .deb, fetched into `into` (with `apt-get update` first when the lists lack it
    and we may update them)."""
    try:
        _run(["apt-get", "download", package], into)
    except DebianPackageError:
        if os.geteuid() != 0:
            raise
        _run(["apt-get", "update"], into)
        _run(["apt-get", "download", package], into)
    (deb,) = into.glob(f"{package}_*.deb")
    return deb


def debian_program(package: str, program: str) -> Path:
    """The path of `program` (e.g. `usr/bin/prometheus`) from Debian's `package`, unpacked on first use."""
    root = cache_root() / "debian"
    root.mkdir(parents=True, exist_ok=True)
    with (root / f"{package}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one download at a time; a second caller then finds it
        for unpacked in sorted(root.glob(f"{package}_*")):
            if (unpacked / program).is_file():
                return unpacked / program
        with tempfile.TemporaryDirectory(dir=root) as scratch:
            deb = _download(package, Path(scratch))
            target = root / deb.stem
            partial = Path(scratch) / "unpacked"
            _run(["dpkg-deb", "-x", str(deb), str(partial)], Path(scratch))
            if not (partial / program).is_file():
                raise DebianPackageError(f"{deb.name} has no {program}")
            partial.rename(target)
        return target / program
