"""Read the InfiniBand counters of every port under a sysfs root, as the kernel lays them out.

`<root>/class/infiniband/<device>` (a symbolic link into `<root>/devices/...` on a real kernel) has a
`ports/<n>/` folder per port, with `state` (`4: ACTIVE`), `counters/<name>` and, for drivers that
keep their own, `hw_counters/<name>`; each counter file holds one decimal integer. Nothing here ever
raises for what it finds: a file that is missing (a required counter), unreadable or not an integer
(older kernels write `N/A (no PMA)` when the port answers no PortCounters query) is one entry of
`errors`, and the port's other counters are read still.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from vk_provider.interconnect.names import IB_COUNTERS, IbCounter

CLASS_PATH = ("class", "infiniband")


class SysfsRootError(ValueError):
    """The root given is no folder to read: the message names it."""


@dataclasses.dataclass(frozen=True, slots=True)
class PortReading:
    """One port's counters as read this time; a counter that could not be read is absent."""

    device: str
    port: str
    totals: dict[IbCounter, int]
    active: bool | None
    """The port's logical state is ACTIVE; None when its `state` file could not be read."""


@dataclasses.dataclass(frozen=True, slots=True)
class TreeReading:
    ports: list[PortReading] = dataclasses.field(default_factory=list)
    errors: list[str] = dataclasses.field(default_factory=list)
    """One line per file that should have been read and was not: `<path>: <why>`."""


def infiniband_class(root: Path) -> Path:
    return root.joinpath(*CLASS_PATH)


def check_root(root: Path) -> None:
    """Raise SysfsRootError unless `root` is a folder (a node's /sys, or a test's tree)."""
    if not root.exists():
        raise SysfsRootError(f"--sysfs-root {root}: no such folder")
    if not root.is_dir():
        raise SysfsRootError(f"--sysfs-root {root}: not a folder")


def read_tree(root: Path) -> TreeReading:
    """Every port of every device under `root`, in name order (ports by number). A root without the
    InfiniBand class (a node without InfiniBand) reads as no ports and no errors."""
    devices_folder = infiniband_class(root)
    reading = TreeReading()
    try:
        devices = sorted(devices_folder.iterdir(), key=lambda path: path.name)
    except FileNotFoundError:
        return reading
    except OSError as error:
        reading.errors.append(f"{devices_folder}: {_reason(error)}")
        return reading
    for device in devices:
        ports_folder = device / "ports"
        try:
            ports = sorted(ports_folder.iterdir(), key=_port_order)
        except OSError as error:
            reading.errors.append(f"{ports_folder}: {_reason(error)}")
            continue
        for port in ports:
            reading.ports.append(_read_port(device.name, port, reading.errors))
    return reading


def read_counter(path: Path) -> int:
    """The integer in a counter file; OSError or ValueError (with the reason) when there is none."""
    text = path.read_text(encoding="ascii", errors="replace").strip()
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"not a counter value: {text[:40]!r}") from None
    if value < 0:
        raise ValueError(f"a negative counter value: {value}")
    return value


def _read_port(device: str, port: Path, errors: list[str]) -> PortReading:
    totals: dict[IbCounter, int] = {}
    for counter in IB_COUNTERS:
        path = port / counter.relative_path
        try:
            totals[counter] = read_counter(path)
        except FileNotFoundError:
            if counter.required:
                errors.append(f"{path}: missing")
        except (OSError, ValueError) as error:
            errors.append(f"{path}: {_reason(error)}")
    return PortReading(device=device, port=port.name, totals=totals, active=_active(port / "state"))


def _active(path: Path) -> bool | None:
    """`4: ACTIVE` and the like: whether the port's logical state is ACTIVE."""
    try:
        text = path.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    return text.strip().rpartition(":")[2].strip().upper() == "ACTIVE"


def _port_order(path: Path) -> tuple[int, str]:
    return (int(path.name), "") if path.name.isdigit() else (1 << 30, path.name)


def _reason(error: BaseException) -> str:
    if isinstance(error, OSError):
        return error.strerror or type(error).__name__
    return str(error)
