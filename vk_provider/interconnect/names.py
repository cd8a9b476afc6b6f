"""What the interconnect exporter reads and the names it publishes it under.

Every counter is published twice: `<name>_total`, the source's own running total (a Prometheus
counter, for `rate()`), and `<name>_per_second`, its rate over the exporter's last interval (a gauge,
for readers that cannot run PromQL: the OffloadPolicy reads these). The names below are the stems.

InfiniBand (labels `device`, `port`), from `<root>/class/infiniband/<device>/ports/<port>/`:

- `counters/*` hold the port's PortCounters of the InfiniBand Architecture Specification, as the
  kernel documents them (Documentation/ABI/stable/sysfs-class-infiniband). Each is as wide as the
  specification's field (drivers/infiniband/core/sysfs.c, `PORT_PMA_ATTR`): link_downed and
  link_error_recovery 8 bits, symbol_error and port_rcv_errors 16 bits. The specification has them
  stop at their maximum; a driver that fills them from wider hardware counters may wrap them instead,
  and a reset (`perfquery -R`, a driver reload) brings them back to 0. Hence the `saturated` gauge,
  and why a counter that goes backwards is read as a reset, never as a negative rate.
- `hw_counters/*` are the driver's own, 64 bits wide. mlx5 (ConnectX) keeps, per port, the queue
  counters of its transport (drivers/infiniband/hw/mlx5/counters.c). Published are the few that say
  the fabric loses packets, not that an application misbehaves: `local_ack_timeout_err` (a sender's
  ACK timer expired: the packet or its ACK was lost, or the peer is gone), `out_of_sequence` (a
  receiver saw a gap in the packet sequence: a packet was lost on the way) and
  `req_transport_retries_exceeded` (Linux 6.11 and later: a connection gave up retrying and failed,
  the error an NCCL job dies of). Left out on purpose: `rnr_nak_retry_err` and `out_of_buffer`
  (the receiving application posted too few buffers), the CQE and access errors (application bugs),
  and the congestion counters (`np_cnp_sent`, `rp_cnp_handled`: congestion control at work).

NVLink (labels `gpu`, `uuid`), from a dcgm-exporter's text (its fields must be enabled in its
counters file: dcgm-exporter's default file lists them commented out):

- CRC errors: `DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL` + `..._CRC_DATA_ERROR_COUNT_TOTAL`
  (flow-control and data CRC failures: a noisy link);
- replay errors: `DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL` (transfers sent again after a CRC
  failure);
- recovery errors: `DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL` (the link retrained: traffic
  stalled meanwhile).
"""

from __future__ import annotations

import dataclasses

PREFIX = "vk_provider_interconnect"
DEFAULT_PORT = 9402
METRICS_PATH = "/metrics"
POD_LABELS = {"app.kubernetes.io/name": "vk-provider-interconnect-exporter"}
"""The exporter pods' labels in the manifests' and the chart's DaemonSet: what a policy selects them by."""
IB_LABELS = ("device", "port")
NVLINK_LABELS = ("gpu", "uuid")

SYSFS_SOURCE = "sysfs"
DCGM_SOURCE = "dcgm-exporter"
READ_ERROR_SOURCES = (SYSFS_SOURCE, DCGM_SOURCE)
"""The `source` label of `read_errors_total`: the InfiniBand tree, or the dcgm-exporter's text."""

READ_ERRORS = f"{PREFIX}_read_errors"
IB_COUNTER_SATURATED = f"{PREFIX}_ib_counter_saturated"
IB_PORT_ACTIVE = f"{PREFIX}_ib_port_active"


@dataclasses.dataclass(frozen=True)
class Published:
    """One counter as published: `<stem>_total` and `<stem>_per_second`."""

    stem: str
    """After the prefix, e.g. `ib_symbol_errors`."""
    help: str

    @property
    def total_name(self) -> str:
        return f"{PREFIX}_{self.stem}_total"

    @property
    def rate_name(self) -> str:
        return f"{PREFIX}_{self.stem}_per_second"


@dataclasses.dataclass(frozen=True)
class IbCounter(Published):
    directory: str
    """`counters` (PortCounters) or `hw_counters` (the driver's)."""
    file: str
    required: bool
    """Every InfiniBand port has it: missing, it is a read error. Optional ones are read where present."""
    width_bits: int | None
    """The field's width where it saturates (PortCounters); None for 64-bit counters."""

    @property
    def relative_path(self) -> str:
        return f"{self.directory}/{self.file}"

    @property
    def saturates_at(self) -> int | None:
        return None if self.width_bits is None else (1 << self.width_bits) - 1


@dataclasses.dataclass(frozen=True)
class NvlinkCounter(Published):
    fields: tuple[str, ...]
    """The dcgm-exporter fields summed into it, per GPU."""


IB_LINK_DOWNED = IbCounter(
    "ib_link_downed",
    "Times the port's link training gave up on recovering the link and took it down (counters/link_downed).",
    "counters",
    "link_downed",
    required=True,
    width_bits=8,
)
IB_SYMBOL_ERRORS = IbCounter(
    "ib_symbol_errors",
    "Minor link errors detected on the port's physical lanes (counters/symbol_error).",
    "counters",
    "symbol_error",
    required=True,
    width_bits=16,
)
IB_RECEIVE_ERRORS = IbCounter(
    "ib_receive_errors",
    "Packets with an error received on the port (counters/port_rcv_errors).",
    "counters",
    "port_rcv_errors",
    required=True,
    width_bits=16,
)
IB_LINK_ERROR_RECOVERIES = IbCounter(
    "ib_link_error_recoveries",
    "Times the port's link training recovered the link from an error, traffic stalled meanwhile "
    "(counters/link_error_recovery).",
    "counters",
    "link_error_recovery",
    required=False,
    width_bits=8,
)
IB_LOCAL_ACK_TIMEOUT_ERRORS = IbCounter(
    "ib_local_ack_timeout_errors",
    "Times a sender's ACK timer expired and it sent again: a packet or its ACK was lost "
    "(hw_counters/local_ack_timeout_err).",
    "hw_counters",
    "local_ack_timeout_err",
    required=False,
    width_bits=None,
)
IB_OUT_OF_SEQUENCE_PACKETS = IbCounter(
    "ib_out_of_sequence_packets",
    "Packets received out of sequence: one before them was lost (hw_counters/out_of_sequence).",
    "hw_counters",
    "out_of_sequence",
    required=False,
    width_bits=None,
)
IB_TRANSPORT_RETRIES_EXCEEDED = IbCounter(
    "ib_transport_retries_exceeded",
    "Connections that failed after exhausting their transport retries "
    "(hw_counters/req_transport_retries_exceeded).",
    "hw_counters",
    "req_transport_retries_exceeded",
    required=False,
    width_bits=None,
)
IB_COUNTERS = (
    IB_LINK_DOWNED,
    IB_SYMBOL_ERRORS,
    IB_RECEIVE_ERRORS,
    IB_LINK_ERROR_RECOVERIES,
    IB_LOCAL_ACK_TIMEOUT_ERRORS,
    IB_OUT_OF_SEQUENCE_PACKETS,
    IB_TRANSPORT_RETRIES_EXCEEDED,
)

NVLINK_CRC_ERRORS = NvlinkCounter(
    "nvlink_crc_errors",
    "NVLink flow-control and data CRC errors of the GPU's links (DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_"
    "COUNT_TOTAL + DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL).",
    ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL"),
)
NVLINK_REPLAY_ERRORS = NvlinkCounter(
    "nvlink_replay_errors",
    "NVLink transfers sent again after an error (DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL).",
    ("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",),
)
NVLINK_RECOVERY_ERRORS = NvlinkCounter(
    "nvlink_recovery_errors",
    "NVLink link recoveries: the link retrained, traffic stalled meanwhile "
    "(DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL).",
    ("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",),
)
NVLINK_COUNTERS = (NVLINK_CRC_ERRORS, NVLINK_REPLAY_ERRORS, NVLINK_RECOVERY_ERRORS)
NVLINK_FIELDS = frozenset(field for counter in NVLINK_COUNTERS for field in counter.fields)
