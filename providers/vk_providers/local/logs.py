"""Serve a container's CRI log file the way the kubelet serves `kubectl logs`.

Records are turned back into the container's output: F records end with a newline, P records do not,
and the content bytes are passed through untouched. Options behave as the kubelet's: `tail_lines` counts
lines of output (a P... F group is one line), `since_time` drops records before it, `timestamps` puts the
record's time and a space before each line, `limit_bytes` cuts the output at exactly that many bytes,
and `follow` keeps reading until the run that writes the file has ended.

Files can be large, so nothing reads a whole file: the tail is found by reading blocks backwards from
the end, and output is produced a block at a time.
"""

from __future__ import annotations

import asyncio
import calendar
import os
import re
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from vk_provider.provider import LogOptions
from vk_providers.local.crilog import FULL_TAG, PARTIAL_TAG

BLOCK_BYTES = 64 * 1024
FOLLOW_POLL_SECONDS = 0.1
"""How often a follower looks for new output (there is no portable file-change notification)."""

_TIMESTAMP = re.compile(rb"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)")


def timestamp_nanoseconds(timestamp: bytes) -> int | None:
    """Nanoseconds since the epoch of an RFC 3339 timestamp (datetime would drop the last three digits)."""
    match = _TIMESTAMP.fullmatch(timestamp)
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(group) for group in match.groups()[:6])
    fraction, zone = match.group(7) or b"", match.group(8)
    seconds = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
    if zone != b"Z":
        sign = 1 if zone[:1] == b"+" else -1
        seconds -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    return seconds * 1_000_000_000 + int(fraction.ljust(9, b"0"))


def datetime_nanoseconds(moment: datetime) -> int:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)  # the contract's times are UTC
    return calendar.timegm(moment.utctimetuple()) * 1_000_000_000 + moment.microsecond * 1000


def _split_record(record: bytes) -> tuple[bytes, bytes, bytes] | None:
    """(timestamp, tag, content) of one record without its newline, or None if it is not one."""
    parts = record.split(b" ", 3)
    if len(parts) < 3 or parts[2] not in (FULL_TAG, PARTIAL_TAG):
        return None
    return parts[0], parts[2], parts[3] if len(parts) == 4 else b""


async def read_log(
    path: Path, options: LogOptions, run_has_ended: Callable[[], bool] | None = None
) -> AsyncIterator[bytes]:
    """The log's output; with `run_has_ended` (follow), keep waiting for more until it returns True."""
    renderer = _Renderer(options)
    if renderer.done:
        return
    # Opened here, inside the generator, so that closing the generator (or never starting it) cannot
    # leave the file open.
    with path.open("rb") as log:
        if options.tail_lines is not None:
            log.seek(tail_start_offset(log, options.tail_lines))
        unfinished = b""
        while True:
            # Decided before reading: output written before the run ended is then certain to be read.
            ended = run_has_ended is None or run_has_ended()
            while block := log.read(BLOCK_BYTES):
                unfinished += block
                cut = unfinished.rfind(b"\n") + 1
                if cut == 0:
                    continue
                output = renderer.render(unfinished[:cut])
                unfinished = unfinished[cut:]
                if output:
                    yield output
                if renderer.done:
                    return
            if ended:
                return
            await asyncio.sleep(FOLLOW_POLL_SECONDS)


class _Renderer:
    """Records in, output bytes out, with the options applied and the state they need between blocks."""

    def __init__(self, options: LogOptions) -> None:
        self._timestamps = options.timestamps
        self._since = None if options.since_time is None else datetime_nanoseconds(options.since_time)
        self._remaining = options.limit_bytes
        self._at_line_start = True
        self.done = self._remaining is not None and self._remaining <= 0

    def render(self, records: bytes) -> bytes:
        pieces: list[bytes] = []
        for record in records.split(b"\n")[:-1]:
            fields = _split_record(record)
            if fields is None:
                continue
            timestamp, tag, content = fields
            if self._since is not None:
                nanoseconds = timestamp_nanoseconds(timestamp)
                if nanoseconds is not None and nanoseconds < self._since:
                    continue
            if self._timestamps and self._at_line_start:
                pieces.append(timestamp + b" ")
            pieces.append(content)
            complete = tag == FULL_TAG
            if complete:
                pieces.append(b"\n")
            self._at_line_start = complete
        output = b"".join(pieces)
        if self._remaining is not None:
            output = output[: self._remaining]
            self._remaining -= len(output)
            self.done = self._remaining <= 0
        return output


def tail_start_offset(log: BinaryIO, lines: int) -> int:
    """Where the last `lines` lines of output begin.

    A line of output starts at the beginning of the file or right after an F record. A trailing group
    of P records (output whose newline has not come yet) is a line too, as `kubectl logs` shows it.
    """
    size = log.seek(0, os.SEEK_END)
    records = _records_backwards(log, size)
    complete_end: int | None = None
    found = 0
    for end, record in records:
        if complete_end is None:
            complete_end = end
            if lines <= 0:
                return end
        fields = _split_record(record)
        if fields is not None and fields[1] == FULL_TAG and end < complete_end:
            found += 1
            if found == lines:
                return end
    return 0


def _records_backwards(log: BinaryIO, size: int) -> Iterator[tuple[int, bytes]]:
    """Each newline-terminated record, last first, with the offset just past its newline.

    An unterminated record at the very end (being written right now) is left out.
    """
    offset = size
    segment = b""  # the start of the file's next-earlier record seen so far (its beginning is further back)
    segment_terminated = False  # whether a newline follows `segment` in the file
    while offset > 0:
        step = min(BLOCK_BYTES, offset)
        offset -= step
        log.seek(offset)
        buffer = log.read(step) + segment
        pieces = buffer.split(b"\n")
        end = offset + len(buffer)  # where the last piece ends
        last = len(pieces) - 1
        for index in range(last, 0, -1):
            piece = pieces[index]
            if index < last or segment_terminated:
                yield end + 1, piece
            end -= len(piece) + 1
        segment = pieces[0]
        segment_terminated = segment_terminated or last > 0
    if segment_terminated:
        yield len(segment) + 1, segment
