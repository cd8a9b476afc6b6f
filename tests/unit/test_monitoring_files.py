"""The dashboard and the alert rules shipped with the chart name only series the components export."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from vk_provider.controller.metrics import ControllerMetrics
from vk_provider.node.metrics import DaemonMetrics
from vk_provider.policy.metrics import PolicyMetrics
from vk_provider.router.metrics import RouterMetrics

pytestmark = pytest.mark.unit

FILES = Path(__file__).parents[2] / "charts" / "vk-provider" / "files"
SERIES = re.compile(r"\bvk_provider_[a-z_]+")
SUFFIXES = ("_total", "_bucket", "_count", "_sum", "_created")


def exported_families() -> set[str]:
    """The metric families every component declares (`# TYPE` lines), even before a first sample."""
    controller = ControllerMetrics()
    PolicyMetrics(controller.registry)
    router = RouterMetrics()
    router.response("team", "chat", "away", 200, 0.01)  # the response families appear with a route
    texts = [DaemonMetrics().exposition(), controller.exposition(), router.exposition()]
    return {
        family(line.split()[2])
        for text in texts
        for line in text.decode().splitlines()
        if line.startswith("# TYPE")
    }


def family(series: str) -> str:
    for suffix in SUFFIXES:
        if series.endswith(suffix):
            return series.removesuffix(suffix)
    return series


def expressions() -> list[str]:
    dashboard = json.loads((FILES / "grafana-dashboard.json").read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets") or ()]
    rules = yaml.safe_load((FILES / "prometheus-rules.yaml").read_text())
    exprs += [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    return exprs


def test_every_series_the_dashboard_and_the_alerts_read_is_exported() -> None:
    families = exported_families()
    named = {series for expr in expressions() for series in SERIES.findall(expr)}
    assert named, "no vk-provider series found in the dashboard or the rules"
    unknown = sorted(series for series in named if family(series) not in families)
    assert unknown == [], f"not exported by any component: {unknown}"


def test_the_dashboard_s_panels_do_not_overlap() -> None:
    dashboard = json.loads((FILES / "grafana-dashboard.json").read_text())
    cells: set[tuple[int, int]] = set()
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        mine = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not cells & mine, panel["title"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        cells |= mine
