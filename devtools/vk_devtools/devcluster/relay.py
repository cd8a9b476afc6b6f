"""A TCP relay: listen on one address, forward each connection to another. TLS passes through as is.

Two uses. The development plane's `kubernetes` Service: nothing here routes cluster IPs, so a relay on
the Service's address and port carries pods' connections to the apiserver (see `servicenetwork`), as
kube-proxy would. And the tests' network namespaces: the apiserver's node proxy only dials routable
node addresses, so the tests give a node such an address inside a namespace (a veth pair, never a real
network), and a relay there carries the connections to the daemon on the veth's other end.

    python -m vk_devtools.devcluster.relay LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT
"""

from __future__ import annotations

import asyncio
import contextlib
import sys


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(ConnectionError, OSError):
            writer.close()


async def main(listen_host: str, listen_port: int, target_host: str, target_port: int) -> None:
    async def handle(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(target_host, target_port)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(pipe(client_reader, upstream_writer), pipe(upstream_reader, client_writer))

    # reuse_port: the development plane holds the `kubernetes` Service's address with a socket of its
    # own until this relay serves there (see servicenetwork).
    server = await asyncio.start_server(handle, listen_host, listen_port, reuse_port=True)
    print("relay ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    host, port, target, target_port = sys.argv[1:5]
    asyncio.run(main(host, int(port), target, int(target_port)))
