"""The interconnect signal: InfiniBand and NVLink error rates from the interconnect exporter, against
the thresholds of spec.health.interconnect.

The exporter (`vk-provider interconnect-exporter`, a DaemonSet) serves each counter twice: as the
source's running total (`..._total`, for Prometheus' rate()) and as the rate over its last interval
(`..._per_second`, gauges, for readers without PromQL). The policy reads the gauges, each InfiniBand
one labelled {device, port}, each NVLink one {gpu, uuid}. A rate strictly above its threshold on any
port or GPU of a node is the node's `Interconnect` finding; its severity (Degrading by default) and
persistence are the health rules' (`health`, `severity`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

import aiohttp

from vk_provider.interconnect import names
from vk_provider.kit.kube import KubeApi
from vk_provider.policy.scrape import (
    ExporterSettings,
    MalformedExporterText,
    Scrape,
    exposition_samples,
    scrape_pods,
)

IB_LINK_DOWNED = names.IB_LINK_DOWNED.rate_name
IB_SYMBOL_ERRORS = names.IB_SYMBOL_ERRORS.rate_name
IB_RECEIVE_ERRORS = names.IB_RECEIVE_ERRORS.rate_name
NVLINK_CRC_ERRORS = names.NVLINK_CRC_ERRORS.rate_name
NVLINK_REPLAY_ERRORS = names.NVLINK_REPLAY_ERRORS.rate_name
THRESHOLD_FIELDS: Mapping[str, str] = {
    "ibLinkDownedPerSecond": IB_LINK_DOWNED,
    "ibSymbolErrorsPerSecond": IB_SYMBOL_ERRORS,
    "ibReceiveErrorsPerSecond": IB_RECEIVE_ERRORS,
    "nvlinkCrcErrorsPerSecond": NVLINK_CRC_ERRORS,
    "nvlinkReplayErrorsPerSecond": NVLINK_REPLAY_ERRORS,
}
"""spec.health.interconnect.thresholds' fields and the gauge each one is compared with (the exporter's
names, `vk_provider.interconnect.names`)."""
DESCRIPTIONS: Mapping[str, str] = {
    IB_LINK_DOWNED: "link-down events",
    IB_SYMBOL_ERRORS: "symbol errors",
    IB_RECEIVE_ERRORS: "receive errors",
    NVLINK_CRC_ERRORS: "NVLink CRC errors",
    NVLINK_REPLAY_ERRORS: "NVLink replays",
}
DEFAULT_PORT = names.DEFAULT_PORT
DEFAULT_THRESHOLD = 0.0
"""Every threshold's default: any error on a link, for the whole of degradingForSeconds (a link that
errs now and then has quiet intervals, and a quiet interval restarts the clock)."""
WHERE = "spec.health.interconnect"


class InterconnectSettingsError(ValueError):
    """A field of spec.health.interconnect that cannot be used; the message names it."""


@dataclasses.dataclass(frozen=True, slots=True)
class InterconnectSettings:
    exporter: ExporterSettings
    thresholds: Mapping[str, float]
    """Gauge name -> the rate (per second) above which a link is faulty."""

    @classmethod
    def from_spec(cls, spec: Any) -> InterconnectSettings:
        """spec.health.interconnect; InterconnectSettingsError naming the field."""
        if not isinstance(spec, Mapping):
            raise InterconnectSettingsError(f"{WHERE} must be a mapping, not {spec!r}")
        unknown = sorted(set(spec) - {"exporter", "thresholds"})
        if unknown:
            raise InterconnectSettingsError(
                f"{WHERE} has unknown fields {unknown} (known: exporter, thresholds)"
            )
        if spec.get("exporter") is None:
            raise InterconnectSettingsError(
                f"{WHERE}.exporter is required: where the interconnect exporter's pods are "
                "({namespace, selector, port})"
            )
        try:
            exporter = ExporterSettings.from_spec(
                spec["exporter"],
                where=f"{WHERE}.exporter",
                default_port=DEFAULT_PORT,
                name="interconnect exporter",
                example=next(iter(names.POD_LABELS.values())),
            )
        except ValueError as error:
            raise InterconnectSettingsError(str(error)) from None
        raw = spec.get("thresholds")
        raw = {} if raw is None else raw
        if not isinstance(raw, Mapping):
            raise InterconnectSettingsError(f"{WHERE}.thresholds must be a mapping, not {raw!r}")
        unknown = sorted(set(raw) - set(THRESHOLD_FIELDS))
        if unknown:
            raise InterconnectSettingsError(
                f"{WHERE}.thresholds has unknown fields {unknown} (known: {sorted(THRESHOLD_FIELDS)})"
            )
        thresholds = {}
        for field, gauge in THRESHOLD_FIELDS.items():
            value = raw.get(field, DEFAULT_THRESHOLD)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise InterconnectSettingsError(
                    f"{WHERE}.thresholds.{field} must be a rate per second >= 0, not {value!r}"
                )
            thresholds[gauge] = float(value)
        return cls(exporter=exporter, thresholds=thresholds)


@dataclasses.dataclass(frozen=True, slots=True)
class LinkRate:
    """One gauge of one port or GPU of a node."""

    gauge: str
    link: str
    """`mlx5_0 port 1`, or `GPU 3` for NVLink."""
    per_second: float


READ_GAUGES = frozenset(THRESHOLD_FIELDS.values())
IB_GAUGES = frozenset({IB_LINK_DOWNED, IB_SYMBOL_ERRORS, IB_RECEIVE_ERRORS})


def parse_interconnect_metrics(text: str) -> list[LinkRate]:
    """The *_per_second gauges of the exporter's text (other series ignored, NaN read as absent);
    MalformedExporterText naming the first line that is not exposition text or a gauge without the
    labels that say which link it is."""
    rates = []
    for number, name, labels, value in exposition_samples(text, READ_GAUGES):
        if name in IB_GAUGES:
            device, port = labels.get("device"), labels.get("port")
            if not device or not port:
                raise MalformedExporterText(f"line {number}: {name} needs device and port labels")
            link = f"{device} port {port}"
        else:
            gpu = labels.get("gpu") or labels.get("uuid") or labels.get("UUID")
            if not gpu:
                raise MalformedExporterText(f"line {number}: {name} needs a gpu or uuid label")
            link = f"GPU {gpu}"
        if value is not None:
            rates.append(LinkRate(name, link, value))
    return rates


def faulty_links(rates: Iterable[LinkRate], settings: InterconnectSettings) -> list[str]:
    """Each rate above its threshold, for a person: `mlx5_0 port 1: 12.5 symbol errors/s > 0/s`."""
    limits = settings.thresholds
    return [
        f"{rate.link}: {rate.per_second:g} {DESCRIPTIONS[rate.gauge]}/s > {limits[rate.gauge]:g}/s"
        for rate in rates
        if rate.per_second > limits[rate.gauge]
    ]


InterconnectScrape = Scrape[list[LinkRate]]


async def scrape_interconnect(
    api: KubeApi, settings: InterconnectSettings, session: aiohttp.ClientSession
) -> InterconnectScrape:
    """Every interconnect exporter pod's rates, by node; never raises for a bad exporter."""
    return await scrape_pods(api, settings.exporter, session, parse_interconnect_metrics)
