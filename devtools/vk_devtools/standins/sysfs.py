"""A stand-in sysfs tree: InfiniBand devices, ports and counters in a folder, as the kernel lays them out.

The development cluster has no InfiniBand, so nothing could otherwise make a link go bad. A test makes
a tree, gives its root to the interconnect exporter (`--sysfs-root`) and bumps counters:

    tree = SysfsTree(tmp_path)
    tree.add_port("mlx5_0", 1)
    tree.bump("mlx5_0", 1, "symbol_error", 40)

The layout is the kernel's: the device's folder under `devices/pci0000:00/<pci address>/infiniband/`,
and `class/infiniband/<device>` a symbolic link to it; each port a `ports/<n>/` folder with `state`,
`phys_state`, `rate`, `link_layer`, every PortCounters file under `counters/` and mlx5's queue counters
(with `lifespan`) under `hw_counters/`, each file one integer and a newline. Files are replaced whole
(written beside, then renamed), so a reader never sees half a number.

From a shell: `python -m vk_devtools.standins.sysfs ROOT --device mlx5_0 --ports 1` lays one out;
`... ROOT --set mlx5_0/1/symbol_error=40` sets a counter (`hw_counters/` ones by their names too).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

PORT_COUNTERS = (
    "symbol_error",
    "link_error_recovery",
    "link_downed",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors",
    "port_xmit_discards",
    "port_xmit_constraint_errors",
    "port_rcv_constraint_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "VL15_dropped",
    "port_xmit_data",
    "port_rcv_data",
    "port_xmit_packets",
    "port_rcv_packets",
    "port_xmit_wait",
    "unicast_xmit_packets",
    "unicast_rcv_packets",
    "multicast_xmit_packets",
    "multicast_rcv_packets",
)
"""The kernel's `counters/` files (drivers/infiniband/core/sysfs.c)."""
MLX5_HW_COUNTERS = (
    "rx_write_requests",
    "rx_read_requests",
    "rx_atomic_requests",
    "rx_dct_connect",
    "out_of_buffer",
    "out_of_sequence",
    "duplicate_request",
    "rnr_nak_retry_err",
    "packet_seq_err",
    "implied_nak_seq_err",
    "local_ack_timeout_err",
    "resp_local_length_error",
    "resp_cqe_error",
    "req_cqe_error",
    "req_remote_invalid_request",
    "req_remote_access_errors",
    "resp_remote_access_errors",
    "resp_cqe_flush_error",
    "req_cqe_flush_error",
    "req_transport_retries_exceeded",
    "req_rnr_retries_exceeded",
    "roce_adp_retrans",
    "roce_slow_restart",
    "np_cnp_sent",
    "rp_cnp_handled",
)
"""mlx5's per-port `hw_counters/` files (drivers/infiniband/hw/mlx5/counters.c), besides `lifespan`."""
HW_LIFESPAN_MILLISECONDS = 10


class SysfsTree:
    """A tree under `root` (the `--sysfs-root` to give the exporter); make ports, then set counters."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def device_folder(self, device: str) -> Path:
        return self.root / "class" / "infiniband" / device

    def port_folder(self, device: str, port: int | str) -> Path:
        return self.device_folder(device) / "ports" / str(port)

    def add_port(
        self,
        device: str,
        port: int = 1,
        *,
        hw_counters: bool = True,
        link_layer: str = "InfiniBand",
        active: bool = True,
    ) -> Path:
        """A port with every counter at 0 (its device made if new); its folder."""
        link = self.device_folder(device)
        if not link.exists():
            address = f"0000:{0x17 + len(list(self._devices_root().glob('*'))):02x}:00.0"
            target = self._devices_root() / address / "infiniband" / device
            target.mkdir(parents=True)
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(os.path.relpath(target, link.parent))
            _write(target / "node_type", "1: CA")
            _write(target / "fw_ver", "28.39.1002")
        folder = self.port_folder(device, port)
        (folder / "counters").mkdir(parents=True, exist_ok=True)
        _write(folder / "link_layer", link_layer)
        _write(folder / "rate", "400 Gb/sec (4X NDR)")
        self.set_active(device, port, active)
        for name in PORT_COUNTERS:
            _write(folder / "counters" / name, "0")
        if hw_counters:
            (folder / "hw_counters").mkdir(exist_ok=True)
            _write(folder / "hw_counters" / "lifespan", str(HW_LIFESPAN_MILLISECONDS))
            for name in MLX5_HW_COUNTERS:
                _write(folder / "hw_counters" / name, "0")
        return folder

    def set_active(self, device: str, port: int | str, active: bool) -> None:
        """The port's `state` and `phys_state`, as a link that is up (or down) reads."""
        folder = self.port_folder(device, port)
        _write(folder / "state", "4: ACTIVE" if active else "1: DOWN")
        _write(folder / "phys_state", "5: LinkUp" if active else "3: Disabled")

    def counter_path(self, device: str, port: int | str, name: str) -> Path:
        """`counters/<name>` for a PortCounters name, else `hw_counters/<name>`."""
        directory = "counters" if name in PORT_COUNTERS else "hw_counters"
        return self.port_folder(device, port) / directory / name

    def read(self, device: str, port: int | str, name: str) -> int:
        return int(self.counter_path(device, port, name).read_text())

    def set(self, device: str, port: int | str, name: str, value: int) -> None:
        """Set a counter to `value` (lower than before: a reset, as `perfquery -R` does)."""
        if value < 0:
            raise ValueError(f"a counter is 0 or more, not {value}")
        path = self.counter_path(device, port, name)
        if not path.parent.is_dir():
            raise FileNotFoundError(f"no {path.parent}: add the port first (add_port)")
        _write(path, str(value))

    def bump(self, device: str, port: int | str, name: str, by: int = 1) -> int:
        """Raise a counter by `by`; its new value."""
        value = self.read(device, port, name) + by
        self.set(device, port, name, value)
        return value

    def remove(self, device: str, port: int | str, name: str) -> None:
        """Take a counter's file away (a driver that lacks it)."""
        self.counter_path(device, port, name).unlink()

    def _devices_root(self) -> Path:
        return self.root / "devices" / "pci0000:00"


def _write(path: Path, text: str) -> None:
    beside = path.with_name(f".{path.name}.new")
    beside.write_text(text + "\n")
    beside.replace(path)


def _assignment(text: str) -> tuple[str, str, str, int]:
    where, _, value = text.partition("=")
    parts = where.split("/")
    if len(parts) != 3 or not value.strip().isdigit():
        raise argparse.ArgumentTypeError(
            f"expected DEVICE/PORT/COUNTER=VALUE, like mlx5_0/1/symbol_error=40, not {text!r}"
        )
    return parts[0], parts[1], parts[2], int(value)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m vk_devtools.standins.sysfs",
        description="Lay out a stand-in sysfs tree of InfiniBand devices, or set its counters.",
    )
    parser.add_argument("root", type=Path, help="the tree's root (the exporter's --sysfs-root)")
    parser.add_argument("--device", action="append", default=[], help="a device to lay out, e.g. mlx5_0")
    parser.add_argument("--ports", type=int, default=1, help="ports of each --device")
    parser.add_argument(
        "--set", action="append", type=_assignment, default=[], metavar="DEVICE/PORT/COUNTER=VALUE"
    )
    arguments = parser.parse_args(argv)
    tree = SysfsTree(arguments.root)
    for device in arguments.device:
        for port in range(1, arguments.ports + 1):
            tree.add_port(device, port)
    for device, port, name, value in arguments.set:
        try:
            tree.set(device, port, name, value)
        except FileNotFoundError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
