"""The `vk-provider dev ...` commands the tools print as advice, ready to paste.

Each carries `--dir` whenever the cluster's folder is not the default one: advice that silently points
at another folder (the default plane, or none) is worse than none.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from vk_devtools.devcluster import cluster


def dev(directory: Path, command: str, *arguments: str) -> str:
    """`vk-provider dev COMMAND ARGUMENTS... [--dir D]`; `--dir` goes before a `--` among the arguments,
    so it stays an option of `dev COMMAND` (as in `dev kubectl --dir D -- get nodes`)."""
    words = ["vk-provider", "dev", command, *arguments]
    if directory.absolute() != cluster.default_directory().absolute():
        at = words.index("--") if "--" in words else len(words)
        words[at:at] = ["--dir", str(directory.absolute())]
    return shlex.join(words)


def env(directory: Path) -> str:
    """The line that points this shell at the plane."""
    return f'eval "$({dev(directory, "env")})"'
