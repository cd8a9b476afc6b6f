"""How grave each GPU health signal is: fatal (taint now), degrading (taint once it has lasted), or
informational (reported, never tainted), with the defaults and where they come from.

Defaults and their sources:
- Xids: NVIDIA's Xid catalogue (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, its
  "Resolution Bucket (Immediate Action)" column). An Xid whose immediate action is to reset the GPU,
  restart the machine or follow a hardware workflow (double-bit ECC, NVLink) is `FATAL_XIDS`. The
  application errors the NVIDIA device plugin and the NVIDIA DRA driver skip (13, 31, 43, 45, 68, 109:
  the program's fault, not the GPU's; the catalogue's action for them is to restart the application,
  for 109 although it names a reset) and Xid 63 (a row-remap *event*: the catalogue says ignore, the
  remap itself is judged by `RowRemapPending`, as leptonai/gpud #987 does) are `INFORMATIONAL_XIDS`.
  Any other Xid (92 high single-bit ECC rate, 94 contained memory error, the NVLink5 Xids 144-150 whose
  gravity depends on their decode, one the catalogue does not list yet) is degrading.
- `RowRemapPending`: informational. A pending remap is activated by the next GPU reset and can clear
  there (leptonai/gpud #987); only a remap *failure* means the memory can no longer repair itself.
- `RowRemapFailure`: fatal (NVIDIA's memory error management guide: an RMA criterion).
- `DevicePluginUnhealthy`: fatal. The device plugin already took the GPU out of allocatable for a
  critical Xid or a lost GPU: it has judged, and its judgement is what the scheduler sees anyway.
- `Temperature` above `maxTemperatureCelsius` (78 °C, Krea's line): degrading, as heat comes and goes.
- `ExternalTaint` and `ExternalCondition`: fatal. Another tool (NVSentinel, an operator) has judged the
  node already, and the policy was told by name to follow it.
- `Interconnect` (an InfiniBand or NVLink error rate above its threshold): degrading (a link errs
  before it fails; Krea: most failures at scale were cross-node communication).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from datetime import datetime


class Severity(enum.StrEnum):
    FATAL = "Fatal"
    DEGRADING = "Degrading"
    INFORMATIONAL = "Informational"


XID = "Xid"
ROW_REMAP_PENDING = "RowRemapPending"
ROW_REMAP_FAILURE = "RowRemapFailure"
DEVICE_PLUGIN_UNHEALTHY = "DevicePluginUnhealthy"
TEMPERATURE = "Temperature"
EXTERNAL_TAINT = "ExternalTaint"
EXTERNAL_CONDITION = "ExternalCondition"
INTERCONNECT = "Interconnect"
SIGNALS = (
    XID,
    ROW_REMAP_FAILURE,
    DEVICE_PLUGIN_UNHEALTHY,
    TEMPERATURE,
    EXTERNAL_TAINT,
    EXTERNAL_CONDITION,
    INTERCONNECT,
    ROW_REMAP_PENDING,
)
"""Every signal, in the order the one that judges a node is picked among findings of one severity."""

DEFAULT_SEVERITIES: Mapping[str, Severity] = {
    XID: Severity.DEGRADING,  # an Xid in neither list below
    ROW_REMAP_PENDING: Severity.INFORMATIONAL,
    ROW_REMAP_FAILURE: Severity.FATAL,
    DEVICE_PLUGIN_UNHEALTHY: Severity.FATAL,
    TEMPERATURE: Severity.DEGRADING,
    EXTERNAL_TAINT: Severity.FATAL,
    EXTERNAL_CONDITION: Severity.FATAL,
    INTERCONNECT: Severity.DEGRADING,
}

XID_NAMES: Mapping[int, str] = {
    13: "graphics engine exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    45: "preemptive cleanup after earlier errors",
    46: "GPU stopped processing",
    48: "double-bit ECC error",
    54: "auxiliary power not connected",
    62: "internal micro-controller halt",
    63: "row-remap event",
    64: "row-remap failure",
    68: "video decoder exception",
    74: "NVLink error",
    79: "GPU fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained memory error",
    95: "uncontained memory error",
    109: "context switch timeout",
    110: "security fault",
    119: "GSP RPC timeout",
    120: "GSP error",
    136: "link training failed",
    140: "unrecovered ECC error",
    143: "GPU initialisation error",
    155: "NVLink software-defined error",
    158: "GPU fatal timeout",
}
"""Short names of the Xids the defaults classify (NVIDIA's catalogue, in our words)."""
FATAL_XIDS = frozenset({46, 48, 54, 62, 64, 74, 79, 95, 110, 119, 120, 136, 140, 143, 155, 158})
INFORMATIONAL_XIDS = frozenset({13, 31, 43, 45, 63, 68, 109})


@dataclasses.dataclass(frozen=True, slots=True)
class Finding:
    """One health signal of one node, as judged."""

    signal: str
    """One of SIGNALS."""
    severity: Severity
    detail: str
    """For a person: "GPU 1 raised Xid 79 (fatal: GPU fallen off the bus)"."""
    since: datetime | None = None
    """Since when the node has shown this signal without a break (set by `health.HealthMemory`)."""


def describe_xid(xid: int, severity: Severity) -> str:
    """`Xid 79 (fatal: GPU fallen off the bus)`, or `Xid 200 (degrading)` for one without a name."""
    name = XID_NAMES.get(xid)
    return (
        f"Xid {xid} ({severity.value.lower()}: {name})" if name else f"Xid {xid} ({severity.value.lower()})"
    )


def strongest(findings: list[Finding], severity: Severity) -> Finding | None:
    """The finding of `severity` that judges the node: the first signal in SIGNALS order."""
    chosen = [finding for finding in findings if finding.severity is severity]
    return min(chosen, key=lambda finding: SIGNALS.index(finding.signal), default=None)
