"""The dashboard and the alert rules shipped with the chart name only series the components export,
and each alert has a runbook and tests."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import generate_latest

from vk_provider.controller.metrics import ControllerMetrics
from vk_provider.node.metrics import CertificateTimes, DaemonMetrics
from vk_provider.policy.metrics import PolicyMetrics
from vk_provider.router.metrics import RouterMetrics
from vk_provider.router.proxy import ProxySettings
from vk_provider.router.workerprotocol import WorkerConfig
from vk_provider.router.workers import Supervisor
from vk_provider.xds.status import metrics_registry

pytestmark = pytest.mark.unit

ROOT = Path(__file__).parents[2]
FILES = ROOT / "charts" / "vk-provider" / "files"
RUNBOOKS = ROOT / "docs" / "runbooks.md"
RULE_TESTS = sorted((ROOT / "tests" / "monitoring").glob("*.yaml"))
SERIES = re.compile(r"\bvk_provider_[a-z_]+")
SUFFIXES = ("_total", "_bucket", "_count", "_sum", "_created")


class IdleXdsServer:
    """What the xDS server's collector reads, with no Envoy connected."""

    version = 0

    def acked(self) -> dict[str, int]:
        return {}

    def nacks(self) -> dict[str, list[Any]]:
        return {}


def exported_families() -> set[str]:
    """The metric families every component declares (`# TYPE` lines), even before a first sample."""
    controller = ControllerMetrics()
    PolicyMetrics(controller.registry)
    router = RouterMetrics()
    router.response("team", "chat", "away", 200, 0.01)  # the response families appear with a route
    supervisor = Supervisor(WorkerConfig("127.0.0.1", 0, ProxySettings(), shutdown_grace=1.0), 1)
    node = DaemonMetrics("gpu-burst")
    now = datetime.now(UTC)  # the certificate's series appear once there is something to say
    node.set_serving_certificate_source(
        lambda: ("Issued", True), lambda: 0, lambda: CertificateTimes(now, now, now)
    )
    texts = [
        node.exposition(),
        controller.exposition(),
        router.exposition(),
        generate_latest(supervisor.registry),
        generate_latest(metrics_registry(IdleXdsServer())),  # type: ignore[arg-type]
    ]
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


def alerts() -> list[dict[str, Any]]:
    rules = yaml.safe_load((FILES / "prometheus-rules.yaml").read_text())
    return [rule for group in rules["groups"] for rule in group["rules"] if "alert" in rule]


def github_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives the headings: lower case, spaces to dashes, punctuation dropped."""
    headings = re.findall(r"^#+ (.+)$", markdown, flags=re.MULTILINE)
    return {re.sub(r"[^a-z0-9 _-]", "", heading.lower()).replace(" ", "-") for heading in headings}


def test_each_alert_s_runbook_url_points_at_its_own_section_of_the_runbooks() -> None:
    anchors = github_anchors(RUNBOOKS.read_text())
    shipped_base = yaml.safe_load((FILES.parent / "values.yaml").read_text())["monitoring"]["runbookBaseUrl"]
    for alert in alerts():
        url = alert["annotations"]["runbook_url"]
        assert url == f"{shipped_base}#{alert['alert'].lower()}", alert["alert"]
        assert alert["alert"].lower() in anchors, f"docs/runbooks.md has no section {alert['alert']}"
    assert shipped_base.endswith("/docs/runbooks.md")


def test_each_alert_is_expected_to_fire_somewhere_in_the_promtool_tests() -> None:
    expected = {
        check["alertname"]
        for tests in RULE_TESTS
        for case in yaml.safe_load(tests.read_text())["tests"]
        for check in case.get("alert_rule_test") or ()
        if check.get("exp_alerts")
    }
    assert {alert["alert"] for alert in alerts()} - expected == set()


def test_the_dashboard_has_variables_for_namespace_offload_and_node() -> None:
    dashboard = json.loads((FILES / "grafana-dashboard.json").read_text())
    names = {variable["name"] for variable in dashboard["templating"]["list"]}
    assert {"namespace", "offload", "node"} <= names
