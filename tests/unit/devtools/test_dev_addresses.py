"""The development cluster's host processes get routable, distinct addresses outside every pod range,
and two planes in different address groups share none."""

from __future__ import annotations

import ipaddress
import itertools
from pathlib import Path

import pytest
import yaml

from vk_devtools.devcluster import localnode, metricsserver, podnetwork, servicenetwork

pytestmark = pytest.mark.unit

GROUPS = range(podnetwork.ADDRESS_GROUPS)


def _addresses_of(group: int) -> set[ipaddress.IPv4Address]:
    """Every host address of the plane holding `group`."""
    hosts = [localnode.HOME.address(group), localnode.AWAY.address(group), metricsserver.address(group)]
    return set(map(ipaddress.IPv4Address, hosts))


def _ranges_of(group: int) -> list[ipaddress.IPv4Network]:
    """Every pod and Service range of the plane holding `group`."""
    pods = [ipaddress.IPv4Network(node.subnet(group)) for node in (localnode.HOME, localnode.AWAY)]
    service = servicenetwork.service_range(servicenetwork.FIRST_SUBNET + group)
    return [*pods, service]


@pytest.mark.parametrize("group", GROUPS)
def test_the_nodes_and_metrics_server_get_distinct_addresses_outside_every_pod_range(group: int) -> None:
    addresses = _addresses_of(group)
    assert len(addresses) == 3
    host_subnet = podnetwork.subnet(podnetwork.HOST_SUBNET_INDEX)
    for address in addresses:
        assert address in host_subnet
        assert not address.is_loopback  # the apiserver's node proxy refuses loopback
        assert not any(address in network for other in GROUPS for network in _ranges_of(other))


def test_two_groups_share_no_address_and_the_tests_ranges_lie_between_them_and_the_services() -> None:
    for one, other in itertools.combinations(GROUPS, 2):
        assert not _addresses_of(one) & _addresses_of(other)
        assert not any(a.overlaps(b) for a in _ranges_of(one) for b in _ranges_of(other))
    dev_pod_ranges = {node.subnet(group) for group in GROUPS for node in (localnode.HOME, localnode.AWAY)}
    test_ranges = {
        str(podnetwork.subnet(number))
        for number in range(localnode.FIRST_TEST_SUBNET, servicenetwork.FIRST_SUBNET)
    }
    assert not dev_pod_ranges & test_ranges
    assert str(podnetwork.subnet(podnetwork.HOST_SUBNET_INDEX)) not in dev_pod_ranges | test_ranges


@pytest.mark.parametrize(
    ("group", "slot"), [(0, 0), (0, podnetwork.HOST_SLOTS_PER_CLUSTER), (-1, 1), (16, 1)]
)
def test_a_slot_or_group_out_of_range_is_refused(group: int, slot: int) -> None:
    with pytest.raises(ValueError, match="slot" if slot != 1 else "group"):
        podnetwork.host_address(group, slot)


def test_a_service_range_names_its_group_and_other_ranges_are_refused() -> None:
    assert [servicenetwork.group_of(servicenetwork.FIRST_SUBNET + group) for group in GROUPS] == list(GROUPS)
    with pytest.raises(ValueError, match="not a Service range"):
        servicenetwork.group_of(localnode.FIRST_TEST_SUBNET)


def test_a_dev_node_publishes_and_listens_on_its_own_address(tmp_path: Path) -> None:
    path = localnode.write_config(
        tmp_path, localnode.HOME, group=3, kubeconfig=tmp_path / "kubeconfig", kubelet_port=10250
    )
    config = yaml.safe_load(path.read_text())
    address = localnode.HOME.address(3)
    assert config["addresses"] == [address]
    assert config["kubelet_bind_address"] == address
    assert config["provider_config"]["address_range"] == localnode.HOME.subnet(3)
