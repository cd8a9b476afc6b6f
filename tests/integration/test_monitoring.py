"""The alert rules shipped with the chart pass `promtool check rules` and their own unit tests
(`tests/monitoring/*.yaml`), with Debian's promtool (the `prometheus` package); each alert's tests
fail when it is broken."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from vk_devtools.devcluster.debian import debian_program

ROOT = Path(__file__).parents[2]
RULES = ROOT / "charts" / "vk-provider" / "files" / "prometheus-rules.yaml"
RULE_TESTS = sorted((ROOT / "tests" / "monitoring").glob("*.yaml"))


@pytest.fixture(scope="module")
def promtool() -> Path:
    return debian_program("prometheus", "usr/bin/promtool")


def run(*command: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(part) for part in command], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def alert_names() -> list[str]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule["alert"] for group in groups for rule in group["rules"] if "alert" in rule]


def test_the_rules_are_valid(promtool: Path) -> None:
    done = run(promtool, "check", "rules", RULES)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(alert_names())} rules found" in done.stdout


def test_each_alert_fires_on_what_it_watches_and_not_on_its_near_misses(promtool: Path) -> None:
    done = run(promtool, "test", "rules", *(tests.name for tests in RULE_TESTS), cwd=RULE_TESTS[0].parent)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def run_tests_against(promtool: Path, tmp_path: Path, rules: str) -> subprocess.CompletedProcess[str]:
    """`promtool test rules` of the shipped tests against `rules` in place of the shipped rules."""
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / RULES.name).write_text(rules)
    for tests in RULE_TESTS:
        (tmp_path / tests.name).write_text(
            tests.read_text().replace("../../charts/vk-provider/files/", "rules/")
        )
    return run(promtool, "test", "rules", *(tests.name for tests in RULE_TESTS), cwd=tmp_path)


def test_a_broken_rule_fails_its_unit_test(promtool: Path, tmp_path: Path) -> None:
    """The unit tests can fail: with the spend alert's threshold doubled, its test does."""
    done = run_tests_against(promtool, tmp_path, RULES.read_text().replace("* 3600 > 50", "* 3600 > 100"))
    assert done.returncode != 0
    assert "VkProviderSpendAboveBudget" in done.stdout + done.stderr


def test_the_first_rollback_of_a_controller_s_life_needs_the_rule_s_second_half(
    promtool: Path, tmp_path: Path
) -> None:
    """With `increase()` alone, the rollback whose series appears at 1 (the Offload's first, in the
    pass that first saw it) fires no alert, and the tests say so."""
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == "VkProviderMigrationRolledBack":
                rule["expr"] = rule["expr"].split("\nor (")[0]
                assert "offset" not in rule["expr"]
    done = run_tests_against(promtool, tmp_path, yaml.safe_dump(rules))
    assert done.returncode != 0
    assert "alertname: VkProviderMigrationRolledBack, time: 2m" in done.stdout + done.stderr


@pytest.mark.parametrize("alert", alert_names())
def test_each_alert_has_a_test_that_fails_when_it_never_fires(
    promtool: Path, tmp_path: Path, alert: str
) -> None:
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == alert:
                rule["expr"] = "vector(1) > 2"  # never
    done = run_tests_against(promtool, tmp_path, yaml.safe_dump(rules))
    assert done.returncode != 0
    assert f"alertname: {alert}," in done.stdout + done.stderr


DASHBOARD = ROOT / "charts" / "vk-provider" / "files" / "grafana-dashboard.json"
ALL = {"$namespace": ".*", "$offload": ".*", "$node": ".*"}
"""The dashboard's variables as Grafana fills them with All selected."""


def dashboard_queries() -> dict[str, list[str]]:
    """Each panel's queries by title, with the variables filled in."""
    queries: dict[str, list[str]] = {}
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for target in panel.get("targets") or ():
            expr = target["expr"]
            for variable, value in ALL.items():
                expr = expr.replace(variable, value)
            queries.setdefault(panel["title"], []).append(expr)
    return queries


def test_every_dashboard_query_is_valid_promql(promtool: Path, tmp_path: Path) -> None:
    records = [
        {"record": f"dashboard:query{number}", "expr": expr}
        for number, expr in enumerate(expr for exprs in dashboard_queries().values() for expr in exprs)
    ]
    rules = tmp_path / "dashboard-rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": records}]}))
    done = run(promtool, "check", "rules", rules)
    assert done.returncode == 0, done.stdout + done.stderr


def rolled_back(name: str, reason: str) -> str:
    labels = f'namespace="team", name="{name}", outcome="RolledBack", reason="{reason}"'
    return f"vk_provider_controller_migrations_ended_total{{{labels}}}"


def test_the_migrations_panel_counts_an_offload_s_first_rollback(promtool: Path, tmp_path: Path) -> None:
    """The panel's hour of endings counts a series that appeared at 1 (the first rollback, in the pass
    that first saw the Offload) and one created at 0, and forgets both once they are older than the hour."""
    [query] = dashboard_queries()["Migrations ended (1 h)"]
    tests = {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": rolled_back("embed", "Aborted"), "values": "_ _ 1x100"},
                    {"series": rolled_back("chat", "GatesFailed"), "values": "_ 0 0 1x16 2x100"},
                ],
                "promql_expr_test": [
                    {
                        "expr": query,
                        "eval_time": "30m",
                        "exp_samples": [
                            {"labels": '{outcome="RolledBack", reason="Aborted"}', "value": 1},
                            {"labels": '{outcome="RolledBack", reason="GatesFailed"}', "value": 2},
                        ],
                    },
                    {
                        "expr": query,
                        "eval_time": "100m",
                        "exp_samples": [
                            {"labels": '{outcome="RolledBack", reason="Aborted"}', "value": 0},
                            {"labels": '{outcome="RolledBack", reason="GatesFailed"}', "value": 0},
                        ],
                    },
                ],
            }
        ],
    }
    (tmp_path / "panel-test.yaml").write_text(yaml.safe_dump(tests))
    done = run(promtool, "test", "rules", "panel-test.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
