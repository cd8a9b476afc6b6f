"""NVLink error counters from a dcgm-exporter's `/metrics` text, per GPU.

dcgm-exporter serves one series per GPU and field, labelled `gpu` (the index on the node) and `UUID`
(older builds: `uuid`), among others. Only the NVLink error fields (`names.NVLINK_FIELDS`) are parsed,
each line through prometheus_client's parser, so a series of another field that this parser would
refuse (one served without a value) cannot cost the NVLink ones. A text with no `DCGM_` series at
all is not a dcgm-exporter's (an HTML error page, the wrong port) and is refused.
"""

from __future__ import annotations

import dataclasses

import aiohttp

from vk_provider.interconnect.names import NVLINK_COUNTERS, NVLINK_FIELDS, NvlinkCounter
from vk_provider.kit.exposition import parse_series_line

MAX_BODY_BYTES = 4 * 1024 * 1024
"""A dcgm-exporter with 8 GPUs and every field serves well under 1 MiB; more is not an exporter."""


class NvlinkReadError(Exception):
    """The exporter could not be read, or its text could not be; the message says which and why."""


@dataclasses.dataclass(frozen=True, slots=True)
class GpuNvlink:
    """One GPU's NVLink error totals; a counter none of whose fields the exporter served is absent."""

    gpu: str
    uuid: str
    totals: dict[NvlinkCounter, int]


def parse_nvlink_counters(text: str) -> list[GpuNvlink]:
    """The GPUs of `text` that have an NVLink error field, in the order first seen. A counter made of
    several fields (CRC: flit + data) sums those served. Raises NvlinkReadError for a text that is
    not a dcgm-exporter's or a malformed NVLink line."""
    fields: dict[tuple[str, str], dict[str, int]] = {}
    saw_dcgm = False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        name = stripped.split("{", 1)[0].split(None, 1)[0]
        saw_dcgm = saw_dcgm or name.startswith("DCGM_")
        if name not in NVLINK_FIELDS:
            continue
        labels, value = _parse_line(stripped, number)
        gpu, uuid = labels.get("gpu", ""), labels.get("UUID") or labels.get("uuid") or ""
        if not gpu and not uuid:
            raise NvlinkReadError(f"line {number}: {name} has neither a gpu nor a UUID label")
        values = fields.setdefault((gpu, uuid), {})
        if value is not None:  # the same field twice for one GPU (MIG instances): the largest
            values[name] = max(value, values.get(name, 0))
    if text.strip() and not saw_dcgm:
        first = next(line for line in text.splitlines() if line.strip())
        raise NvlinkReadError(f"not a dcgm-exporter's text (no DCGM_ series): {first[:120]!r}")
    return [_gpu(gpu, uuid, values) for (gpu, uuid), values in fields.items()]


async def fetch_nvlink_counters(
    session: aiohttp.ClientSession, url: str, timeout_seconds: float
) -> list[GpuNvlink]:
    """GET `url` and parse it; NvlinkReadError (one line, naming the URL) for any failure."""
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=timeout_seconds)) as response:
            if response.status != 200:
                raise NvlinkReadError(f"{url} answered HTTP {response.status}")
            body = await response.content.read(MAX_BODY_BYTES + 1)
    except (aiohttp.ClientError, TimeoutError, OSError) as error:
        raise NvlinkReadError(f"{url} is unreachable: {error or type(error).__name__}") from None
    if len(body) > MAX_BODY_BYTES:
        raise NvlinkReadError(f"{url} sent more than {MAX_BODY_BYTES} bytes")
    try:
        return parse_nvlink_counters(body.decode("utf-8", errors="replace"))
    except NvlinkReadError as error:
        raise NvlinkReadError(f"{url}: {error}") from None


def _parse_line(line: str, number: int) -> tuple[dict[str, str], int | None]:
    """(labels, value) of one series line; a NaN, negative or missing value reads as None."""
    try:
        _, labels, value = parse_series_line(line)
    except ValueError as error:
        raise NvlinkReadError(f"line {number} is not Prometheus text ({error}): {line[:160]!r}") from None
    return labels, None if value is None or value < 0 else int(value)


def _gpu(gpu: str, uuid: str, values: dict[str, int]) -> GpuNvlink:
    totals = {
        counter: sum(values[field] for field in counter.fields if field in values)
        for counter in NVLINK_COUNTERS
        if any(field in values for field in counter.fields)
    }
    return GpuNvlink(gpu=gpu, uuid=uuid, totals=totals)
