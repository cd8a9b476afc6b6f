"""One line of Prometheus exposition text, read with prometheus_client's own parser.

Shared by the readers of exporters' text (the policy's scrape of dcgm-exporter and the interconnect
exporter, the interconnect exporter's read of dcgm-exporter's NVLink fields), which each go line by
line so that one line the parser refuses costs only that line's series, not the whole text.
"""

from __future__ import annotations

import math

from prometheus_client.parser import text_string_to_metric_families


def parse_series_line(line: str) -> tuple[str, dict[str, str], float | None]:
    """(name, labels, value) of one series line; a NaN value, or none at all after a well-formed
    name and labels, is None. ValueError (the parser's words) for a line that is not one series."""
    try:
        return _one_series(line)
    except ValueError:
        # A series served without a value: absent, if the rest of the line is well formed.
        try:
            name, labels, _ = _one_series(f"{line} NaN")
        except ValueError:
            pass
        else:
            return name, labels, None
        raise


def _one_series(line: str) -> tuple[str, dict[str, str], float | None]:
    samples = [sample for family in text_string_to_metric_families(line + "\n") for sample in family.samples]
    if len(samples) != 1:
        raise ValueError(f"{len(samples)} samples in one line")
    sample = samples[0]
    value = float(sample.value)
    return sample.name, dict(sample.labels), None if math.isnan(value) else value
