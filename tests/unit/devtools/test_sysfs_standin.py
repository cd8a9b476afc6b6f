"""The stand-in sysfs tree: laid out as the kernel lays out InfiniBand, counters a test can move."""

from __future__ import annotations

from pathlib import Path

import pytest

from vk_devtools.standins import sysfs

pytestmark = pytest.mark.unit


def test_a_port_has_the_kernel_s_files_each_one_integer(tmp_path: Path) -> None:
    tree = sysfs.SysfsTree(tmp_path)
    folder = tree.add_port("mlx5_0", 1)
    assert folder == tmp_path / "class" / "infiniband" / "mlx5_0" / "ports" / "1"
    device = (tmp_path / "class" / "infiniband" / "mlx5_0").resolve()
    assert device.parent.name == "infiniband"
    assert device.is_relative_to(tmp_path / "devices")
    assert (folder / "state").read_text() == "4: ACTIVE\n"
    assert sorted(path.name for path in (folder / "counters").iterdir()) == sorted(sysfs.PORT_COUNTERS)
    hw = {path.name for path in (folder / "hw_counters").iterdir()}
    assert hw == {*sysfs.MLX5_HW_COUNTERS, "lifespan"}
    assert (folder / "counters" / "symbol_error").read_text() == "0\n"


def test_counters_bump_set_lower_and_disappear(tmp_path: Path) -> None:
    tree = sysfs.SysfsTree(tmp_path)
    tree.add_port("mlx5_0", 1)
    assert tree.bump("mlx5_0", 1, "symbol_error", 40) == 40
    assert tree.bump("mlx5_0", 1, "local_ack_timeout_err") == 1
    assert tree.counter_path("mlx5_0", 1, "local_ack_timeout_err").parent.name == "hw_counters"
    tree.set("mlx5_0", 1, "symbol_error", 2)  # a reset
    assert tree.read("mlx5_0", 1, "symbol_error") == 2
    tree.remove("mlx5_0", 1, "link_downed")
    assert not tree.counter_path("mlx5_0", 1, "link_downed").exists()
    assert not list(tree.port_folder("mlx5_0", 1).rglob(".*.new"))  # nothing half-written left


def test_two_devices_get_two_pci_addresses_and_a_second_port_shares_its_device(tmp_path: Path) -> None:
    tree = sysfs.SysfsTree(tmp_path)
    tree.add_port("mlx5_0", 1)
    tree.add_port("mlx5_0", 2)
    tree.add_port("mlx5_1", 1)
    devices = sorted((tmp_path / "devices" / "pci0000:00").iterdir())
    assert len(devices) == 2
    assert sorted(
        path.name for path in (tmp_path / "class" / "infiniband" / "mlx5_0" / "ports").iterdir()
    ) == [
        "1",
        "2",
    ]


def test_a_counter_of_a_port_never_added_or_below_zero_is_refused(tmp_path: Path) -> None:
    tree = sysfs.SysfsTree(tmp_path)
    with pytest.raises(FileNotFoundError, match="add the port first"):
        tree.set("mlx5_0", 1, "symbol_error", 1)
    tree.add_port("mlx5_0", 1)
    with pytest.raises(ValueError, match="0 or more"):
        tree.set("mlx5_0", 1, "symbol_error", -1)


def test_the_command_line_lays_out_and_sets(tmp_path: Path) -> None:
    assert (
        sysfs.main([str(tmp_path), "--device", "mlx5_0", "--ports", "2", "--set", "mlx5_0/2/symbol_error=9"])
        == 0
    )
    assert sysfs.SysfsTree(tmp_path).read("mlx5_0", 2, "symbol_error") == 9
    assert sysfs.main([str(tmp_path), "--set", "mlx5_9/1/symbol_error=1"]) == 1
    with pytest.raises(SystemExit):
        sysfs.main([str(tmp_path), "--set", "mlx5_0/symbol_error=1"])
