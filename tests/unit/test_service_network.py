"""Service ranges of development planes: two planes starting at once never take the same one."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

import pytest

from vk_devtools.devcluster import podnetwork, servicenetwork

pytestmark = [
    pytest.mark.unit,
    pytest.mark.skipif(os.geteuid() != 0, reason="routing the dev pod network to this host needs root"),
]


def test_a_held_range_is_skipped_by_the_next_plane_and_the_relay_can_serve_beside_the_hold(
    tmp_path: Path,
) -> None:
    first = servicenetwork.reserve_subnet(tmp_path / "one")
    try:
        second = servicenetwork.reserve_subnet(tmp_path / "one")  # the same folder: the same first choice
        try:
            assert second.subnet != first.subnet
            assert second.group != first.group  # and so none of the plane's pod or host addresses
        finally:
            second.release()
        address = str(servicenetwork.kubernetes_service_address(first.subnet))
        assert podnetwork.is_local_range(podnetwork.POD_NETWORK)

        async def relay_binds_beside_the_hold() -> None:
            server = await asyncio.start_server(
                lambda reader, writer: writer.close(),
                address,
                servicenetwork.KUBERNETES_SERVICE_PORT,
                reuse_port=True,
            )
            server.close()
            await server.wait_closed()

        asyncio.run(relay_binds_beside_the_hold())
    finally:
        first.release()
    with socket.socket() as check:  # released: free again
        check.bind((address, servicenetwork.KUBERNETES_SERVICE_PORT))
