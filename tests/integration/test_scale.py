"""The scale benchmark's quick variant (bench/scale.py at N = 5 and 20): what the controller with its
policy asks of the apiserver at rest must not grow with the Offloads it serves, and a wave of all of
them flipped away at once must fail no request.

The rig (vk_devtools.scale): a pool mock daemon carrying one GPU replica per service, an away mock
daemon, the router and the controller (with its policy loop at the default interval) each under a
user of its own, whose requests API Priority and Fairness counts (vk_devtools.scale.attribution), and an
OffloadPolicy selecting the services. The rig grows from 5 to 20 services on one set of processes; each
size is measured over a window once every service is served at home and the components' writes have
reached a steady rate.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.conftest import POLICY_GROUP
from tests.integration.migration_rig import pod_range
from vk_devtools.devcluster import cluster, podnetwork
from vk_devtools.scale import services
from vk_devtools.scale.rig import RigSettings, ScaleRig
from vk_provider.kit.kube import KubeApi

pytestmark = [POLICY_GROUP, pytest.mark.usefixtures("policy_crd")]

SIZES = (5, 20)
WINDOW_SECONDS = 12.0
"""The at-rest window: six of the policy's 2 s passes."""
TARGET_PER_SECOND = 1.0
GROWTH_ALLOWANCE_PER_SECOND = 0.5


async def test_requests_at_rest_do_not_grow_with_offloads_and_a_wave_fails_nothing(
    control_plane: cluster.ClusterState, api: KubeApi, namespace: str, tmp_path: Path
) -> None:
    podnetwork.ensure_local_route()
    settings = RigSettings(
        folder=tmp_path,
        namespace=namespace,
        pod_cidrs=[pod_range(), pod_range()],
        max_services=max(SIZES),
        scoped=True,
    )
    rig = ScaleRig(settings, api, control_plane.directory / "pki", control_plane.server)
    rates: dict[int, float] = {}
    by_verb: dict[int, dict[str, float]] = {}
    try:
        await rig.start()
        for size in SIZES:
            await rig.add_services(size)
            await rig.settle(timeout_seconds=120, sample_seconds=3.0, max_steady_wait=20)
            rest, _ = await rig.at_rest(WINDOW_SECONDS)
            rates[size] = rest.component("controller")
            by_verb[size] = rest.by_verb("controller")
        wave = await rig.wave(
            [services.service_name(index) for index in range(max(SIZES))], rate=25.0, timeout_seconds=180
        )
    finally:
        await rig.close()
    small, large = rates[SIZES[0]], rates[SIZES[-1]]
    measured = f"controller+policy at rest: {rates} req/s (by verb {by_verb}); wave: {wave}"
    problems = []
    if wave["failed"] or wave["outcomes"] != {"Succeeded": max(SIZES)}:
        problems.append("the wave failed requests or did not succeed for every Offload")
    if large > small + GROWTH_ALLOWANCE_PER_SECOND:
        problems.append(
            f"the rate at rest grew with N: {small:.2f}/s at {SIZES[0]}, {large:.2f}/s at {SIZES[-1]}"
        )
    if large > TARGET_PER_SECOND:
        problems.append(f"{large:.2f} requests/s at rest at N={SIZES[-1]}, above {TARGET_PER_SECOND:g}")
    assert not problems, f"{'; '.join(problems)}. Measured: {measured}"
