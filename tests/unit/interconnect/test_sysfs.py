"""Reading the InfiniBand counters of a tree laid out as the kernel lays it out (the stand-in's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vk_devtools.standins.sysfs import SysfsTree
from vk_provider.interconnect.names import (
    IB_LINK_DOWNED,
    IB_LOCAL_ACK_TIMEOUT_ERRORS,
    IB_RECEIVE_ERRORS,
    IB_SYMBOL_ERRORS,
    IB_TRANSPORT_RETRIES_EXCEEDED,
)
from vk_provider.interconnect.sysfs import SysfsRootError, check_root, read_tree

pytestmark = pytest.mark.unit


@pytest.fixture
def tree(tmp_path: Path) -> SysfsTree:
    tree = SysfsTree(tmp_path / "sys")
    tree.add_port("mlx5_0", 1)
    tree.add_port("mlx5_1", 1)
    return tree


def test_every_port_of_every_device_is_read_through_the_class_links(tree: SysfsTree) -> None:
    assert tree.device_folder("mlx5_0").is_symlink()  # as on a real kernel: class/ links into devices/
    tree.set("mlx5_0", 1, "symbol_error", 17)
    tree.set("mlx5_1", 1, "link_downed", 2)
    tree.set("mlx5_1", 1, "local_ack_timeout_err", 9)
    reading = read_tree(tree.root)
    assert reading.errors == []
    ports = {(port.device, port.port): port for port in reading.ports}
    assert list(ports) == [("mlx5_0", "1"), ("mlx5_1", "1")]
    assert ports["mlx5_0", "1"].totals[IB_SYMBOL_ERRORS] == 17
    assert ports["mlx5_0", "1"].totals[IB_LINK_DOWNED] == 0
    assert ports["mlx5_1", "1"].totals[IB_LINK_DOWNED] == 2
    assert ports["mlx5_1", "1"].totals[IB_LOCAL_ACK_TIMEOUT_ERRORS] == 9
    assert all(port.active for port in reading.ports)


def test_ports_come_in_number_order_and_a_down_port_reads_inactive(tree: SysfsTree) -> None:
    for port in (2, 10, 3):
        tree.add_port("mlx5_0", port)
    tree.set_active("mlx5_0", 10, False)
    ports = [port for port in read_tree(tree.root).ports if port.device == "mlx5_0"]
    assert [port.port for port in ports] == ["1", "2", "3", "10"]
    assert [port.active for port in ports] == [True, True, True, False]


def test_a_missing_required_counter_is_a_read_error_and_the_others_are_read(tree: SysfsTree) -> None:
    tree.remove("mlx5_0", 1, "port_rcv_errors")
    tree.set("mlx5_0", 1, "symbol_error", 5)
    reading = read_tree(tree.root)
    assert reading.errors == [f"{tree.counter_path('mlx5_0', 1, 'port_rcv_errors')}: missing"]
    port = reading.ports[0]
    assert IB_RECEIVE_ERRORS not in port.totals
    assert port.totals[IB_SYMBOL_ERRORS] == 5


def test_a_driver_without_hw_counters_is_no_error(tmp_path: Path) -> None:
    tree = SysfsTree(tmp_path)
    tree.add_port("hfi1_0", 1, hw_counters=False)
    reading = read_tree(tmp_path)
    assert reading.errors == []
    assert IB_TRANSPORT_RETRIES_EXCEEDED not in reading.ports[0].totals
    assert reading.ports[0].totals[IB_SYMBOL_ERRORS] == 0


def test_an_unreadable_or_non_numeric_file_is_a_read_error_not_a_crash(tree: SysfsTree) -> None:
    symbol = tree.counter_path("mlx5_0", 1, "symbol_error")
    symbol.write_text("N/A (no PMA)\n")  # what older kernels write when the port answers no PMA query
    ack = tree.counter_path("mlx5_1", 1, "local_ack_timeout_err")
    ack.unlink()
    ack.mkdir()  # present, but no file to read (root reads any file, whatever its mode)
    reading = read_tree(tree.root)
    assert reading.errors == [
        f"{symbol}: not a counter value: 'N/A (no PMA)'",
        f"{ack}: Is a directory",
    ]
    assert len(reading.ports) == 2


def test_a_device_without_ports_is_a_read_error(tree: SysfsTree) -> None:
    (tree.root / "class" / "infiniband" / "broken0").mkdir()
    reading = read_tree(tree.root)
    assert reading.errors == [
        f"{tree.root / 'class' / 'infiniband' / 'broken0' / 'ports'}: No such file or directory"
    ]
    assert len(reading.ports) == 2


def test_a_root_without_infiniband_reads_as_no_ports(tmp_path: Path) -> None:
    reading = read_tree(tmp_path)
    assert (reading.ports, reading.errors) == ([], [])


def test_a_root_that_is_no_folder_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(SysfsRootError, match=f"--sysfs-root {tmp_path / 'nope'}: no such folder"):
        check_root(tmp_path / "nope")
    (tmp_path / "file").write_text("")
    with pytest.raises(SysfsRootError, match="not a folder"):
        check_root(tmp_path / "file")
    check_root(tmp_path)
