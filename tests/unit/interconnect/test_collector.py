"""The exporter's state and families: totals mirrored, rates, resets, saturation, lost reads."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from vk_devtools.standins.sysfs import SysfsTree
from vk_provider.interconnect.collector import InterconnectState, build_registry
from vk_provider.interconnect.names import NVLINK_REPLAY_ERRORS
from vk_provider.interconnect.nvlink import GpuNvlink
from vk_provider.interconnect.sysfs import read_tree

pytestmark = pytest.mark.unit


def samples(state: InterconnectState) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(build_registry(state)).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if not sample.name.endswith("_created")
    }


PORT = (("device", "mlx5_0"), ("port", "1"))
GPU = (("gpu", "0"), ("uuid", "GPU-a"))


@pytest.fixture
def tree(tmp_path: Path) -> SysfsTree:
    tree = SysfsTree(tmp_path)
    tree.add_port("mlx5_0", 1)
    return tree


def test_totals_are_mirrored_and_rates_appear_from_the_second_read(tree: SysfsTree) -> None:
    state = InterconnectState()
    tree.set("mlx5_0", 1, "symbol_error", 100)
    state.record_infiniband(read_tree(tree.root), at=0.0)
    first = samples(state)
    assert first["vk_provider_interconnect_ib_symbol_errors_total", PORT] == 100
    assert ("vk_provider_interconnect_ib_symbol_errors_per_second", PORT) not in first
    tree.bump("mlx5_0", 1, "symbol_error", 50)
    tree.bump("mlx5_0", 1, "link_downed", 1)
    state.record_infiniband(read_tree(tree.root), at=10.0)
    second = samples(state)
    assert second["vk_provider_interconnect_ib_symbol_errors_total", PORT] == 150
    assert second["vk_provider_interconnect_ib_symbol_errors_per_second", PORT] == pytest.approx(5.0)
    assert second["vk_provider_interconnect_ib_link_downed_per_second", PORT] == pytest.approx(0.1)
    assert second["vk_provider_interconnect_ib_receive_errors_per_second", PORT] == 0.0
    assert second["vk_provider_interconnect_ib_port_active", PORT] == 1


def test_a_reset_counter_reads_as_counted_from_zero_not_a_negative_rate(tree: SysfsTree) -> None:
    state = InterconnectState()
    tree.set("mlx5_0", 1, "port_rcv_errors", 900)
    state.record_infiniband(read_tree(tree.root), at=0.0)
    tree.set("mlx5_0", 1, "port_rcv_errors", 20)  # perfquery -R, then 20 more
    state.record_infiniband(read_tree(tree.root), at=10.0)
    after = samples(state)
    assert after["vk_provider_interconnect_ib_receive_errors_total", PORT] == 20
    assert after["vk_provider_interconnect_ib_receive_errors_per_second", PORT] == pytest.approx(2.0)


def test_a_counter_at_its_width_s_maximum_is_flagged_saturated(tree: SysfsTree) -> None:
    state = InterconnectState()
    tree.set("mlx5_0", 1, "symbol_error", 65535)  # 16 bits
    tree.set("mlx5_0", 1, "link_downed", 254)  # 8 bits, one short
    state.record_infiniband(read_tree(tree.root), at=0.0)
    found = samples(state)
    saturated = {labels for name, labels in found if name == "vk_provider_interconnect_ib_counter_saturated"}
    assert saturated == {(("counter", "symbol_error"), *PORT)}


def test_read_errors_are_counted_by_source(tree: SysfsTree) -> None:
    state = InterconnectState()
    tree.remove("mlx5_0", 1, "symbol_error")
    state.record_infiniband(read_tree(tree.root), at=0.0)
    state.record_infiniband(read_tree(tree.root), at=10.0)
    state.nvlink_failed()
    found = samples(state)
    assert found["vk_provider_interconnect_read_errors_total", (("source", "sysfs"),)] == 2
    assert found["vk_provider_interconnect_read_errors_total", (("source", "dcgm-exporter"),)] == 1
    assert ("vk_provider_interconnect_ib_symbol_errors_total", PORT) not in found


def test_a_failed_nvlink_read_drops_its_series_and_the_next_rate_spans_the_gap() -> None:
    state = InterconnectState()
    state.record_nvlink([GpuNvlink("0", "GPU-a", {NVLINK_REPLAY_ERRORS: 10})], at=0.0)
    state.nvlink_failed()
    assert not any(name.startswith("vk_provider_interconnect_nvlink_") for name, _ in samples(state))
    state.record_nvlink([GpuNvlink("0", "GPU-a", {NVLINK_REPLAY_ERRORS: 70})], at=20.0)
    found = samples(state)
    assert found["vk_provider_interconnect_nvlink_replay_errors_total", GPU] == 70
    assert found["vk_provider_interconnect_nvlink_replay_errors_per_second", GPU] == pytest.approx(3.0)
