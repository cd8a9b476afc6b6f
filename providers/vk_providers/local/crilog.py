"""The kubelet's CRI container log format, written by the monitor and read back by the log server.

One record per line: `<RFC3339Nano timestamp> <stdout|stderr> <F|P> <content>\n`. A line of output
becomes one F (full) record; output that is not (yet) a whole line, or a line longer than
`MAX_RECORD_CONTENT_BYTES`, becomes P (partial) records, and the reader joins P records to what follows
without a newline. Content is passed through as raw bytes, so any output survives a round trip.

This module holds only what the monitor needs (it imports nothing heavy, because the monitor must start
fast); parsing lives with the reader in `logs.py`.
"""

from __future__ import annotations

import time

MAX_RECORD_CONTENT_BYTES = 16 * 1024
"""The kubelet's limit for one record; longer lines are split into P records."""

FULL_TAG = b"F"
PARTIAL_TAG = b"P"
STDOUT = b"stdout"
STDERR = b"stderr"


def format_timestamp(nanoseconds_since_epoch: int) -> bytes:
    """UTC with exactly nine fractional digits, so every timestamp has the same width and sorts as text."""
    seconds, nanoseconds = divmod(nanoseconds_since_epoch, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)).encode() + b".%09dZ" % nanoseconds


def encode_records(stream: bytes, data: bytes, timestamp: bytes) -> bytes:
    """Turn one read of a container's output into records, as conmon does.

    Every complete line becomes F records; what follows the last newline is written at once as P
    records rather than held back, so a progress bar or a prompt shows up in the log immediately.
    """
    records: list[bytes] = []
    prefix = timestamp + b" " + stream + b" "
    *lines, rest = data.split(b"\n")
    for line in lines:
        _append_records(records, prefix, line, complete=True)
    if rest:
        _append_records(records, prefix, rest, complete=False)
    return b"".join(records)


def _append_records(records: list[bytes], prefix: bytes, content: bytes, *, complete: bool) -> None:
    start = 0
    while len(content) - start > MAX_RECORD_CONTENT_BYTES:
        end = start + MAX_RECORD_CONTENT_BYTES
        records.append(prefix + PARTIAL_TAG + b" " + content[start:end] + b"\n")
        start = end
    tag = FULL_TAG if complete else PARTIAL_TAG
    records.append(prefix + tag + b" " + content[start:] + b"\n")
