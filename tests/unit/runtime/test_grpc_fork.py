"""gRPC's fork handlers stay out of the processes our daemons start.

uvloop starts a child with fork(2), which runs gRPC's at-fork handlers; with gRPC's fork support on, the
child starts gRPC's threads between fork and exec, and under load one of them crashed the child (an
`echo` through a served plugin exited with 139). Importing `vk_provider` turns the support off. gRPC
says when its handlers run: "skipping fork() handlers" while its poller thread is inside gRPC, which it
always is in a serving process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.unit

pytest.importorskip("uvloop", reason="the fork that runs gRPC's handlers is uvloop's (the `router` extra)")

SERVE_AND_SPAWN = textwrap.dedent(
    """
    import asyncio, sys
    if sys.argv[1] == "with-vk-provider":
        import vk_provider
    import grpc, uvloop

    async def echo(request, context):
        return request

    async def main():
        server = grpc.aio.server()
        handler = grpc.unary_unary_rpc_method_handler(echo)
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("t.T", {"E": handler}),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            await channel.unary_unary("/t.T/E")(b"x")
            for _ in range(3):
                child = await asyncio.create_subprocess_exec("true")
                assert await child.wait() == 0
        await server.stop(None)

    uvloop.run(main())
    """
)


def serve_and_spawn(variant: str) -> str:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("GRPC_")}
    done = subprocess.run(
        [sys.executable, "-c", SERVE_AND_SPAWN, variant],
        env={**environment, "GRPC_VERBOSITY": "INFO"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_grpc_fork_handlers_do_not_run_in_a_process_that_imported_vk_provider() -> None:
    assert "fork() handlers" not in serve_and_spawn("with-vk-provider")


def test_without_vk_provider_grpc_runs_its_fork_handlers_so_the_check_above_can_fail() -> None:
    assert "fork() handlers" in serve_and_spawn("grpc-alone")
