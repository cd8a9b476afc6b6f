"""The alert rules shipped with the chart pass `promtool check rules` and their own unit tests
(`tests/monitoring/*.yaml`), with Debian's promtool (the `prometheus` package); each alert's tests
fail when it is broken."""

from __future__ import annotations

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
