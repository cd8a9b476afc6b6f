"""Building the Go example plugin (examples/plugin-go) with the Go toolchain, for the tests that run it."""

from __future__ import annotations

import subprocess
from pathlib import Path

EXAMPLE = Path(__file__).parents[3] / "examples" / "plugin-go"


def build_go_plugin(folder: Path) -> Path:
    """`go build` of the example into `folder` (modules from the proxy, cached by Go); the binary."""
    binary = folder / "plugin-go-example"
    subprocess.run(["go", "build", "-o", str(binary), "."], cwd=EXAMPLE, check=True, timeout=900)
    return binary
