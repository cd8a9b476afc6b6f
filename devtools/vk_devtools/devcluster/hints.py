"""The `vk-provider dev ...` commands the tools print as advice, ready to paste.

Each carries `--dir` whenever the cluster's folder is not the default one: advice that silently points
at another folder (the default plane, or none) is worse than none.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from vk_devtools.devcluster import cluster


def dev(directory: Path, command: str, *arguments: str) -> str:
    """`vk-provider dev COMMAND [--dir D] ARGUMENTS...` (`--dir` before the arguments, so it stays an
    option of `dev COMMAND` even when the arguments start with `--`, as `dev kubectl -- get nodes`)."""
    words = ["vk-provider", "dev", command]
    if directory.absolute() != cluster.default_directory().absolute():
        words += ["--dir", str(directory.absolute())]
    return shlex.join([*words, *arguments])


def env(directory: Path) -> str:
    """The line that points this shell at the plane."""
    return f'eval "$({dev(directory, "env")})"'
