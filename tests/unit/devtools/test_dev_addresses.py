"""The development cluster's host processes get routable, distinct addresses outside every pod range."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
import yaml

from vk_devtools.devcluster import localnode, podnetwork

pytestmark = pytest.mark.unit


def test_the_nodes_and_metrics_server_get_distinct_addresses_of_the_host_subnet(tmp_path: Path) -> None:
    addresses = [podnetwork.host_address(tmp_path, slot) for slot in (1, 2, 3)]
    assert addresses == [localnode.HOME.address(tmp_path), localnode.AWAY.address(tmp_path), addresses[2]]
    assert len(set(addresses)) == 3
    host_subnet = podnetwork.subnet(podnetwork.HOST_SUBNET_INDEX)
    for address in map(ipaddress.IPv4Address, addresses):
        assert address in host_subnet
        assert not address.is_loopback  # the apiserver's node proxy refuses loopback
        assert address not in ipaddress.IPv4Network(localnode.HOME.subnet(tmp_path))
        assert address not in ipaddress.IPv4Network(localnode.AWAY.subnet(tmp_path))


def test_every_folder_group_has_its_own_block_and_no_pod_range_overlaps_it() -> None:
    host_subnet = podnetwork.subnet(podnetwork.HOST_SUBNET_INDEX)
    pod_ranges = [podnetwork.subnet(2 + index) for index in range(2 * localnode.DEV_SUBNET_PAIRS)]
    assert not any(host_subnet.overlaps(pod_range) for pod_range in pod_ranges)
    assert host_subnet.num_addresses >= podnetwork.FOLDER_GROUPS * podnetwork.HOST_SLOTS_PER_CLUSTER


@pytest.mark.parametrize("slot", [0, podnetwork.HOST_SLOTS_PER_CLUSTER])
def test_a_slot_out_of_range_is_refused(slot: int, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="slot"):
        podnetwork.host_address(tmp_path, slot)


def test_a_dev_node_publishes_and_listens_on_its_own_address(tmp_path: Path) -> None:
    path = localnode.write_config(
        tmp_path, localnode.HOME, kubeconfig=tmp_path / "kubeconfig", kubelet_port=10250
    )
    config = yaml.safe_load(path.read_text())
    address = localnode.HOME.address(tmp_path)
    assert config["addresses"] == [address]
    assert config["kubelet_bind_address"] == address
