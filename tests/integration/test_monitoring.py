"""The alert rules shipped with the chart pass `promtool check rules` and their own unit tests
(`tests/monitoring/alerts-test.yaml`), with Debian's promtool (the `prometheus` package)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from vk_devtools.devcluster.debian import debian_program

ROOT = Path(__file__).parents[2]
RULES = ROOT / "charts" / "vk-provider" / "files" / "prometheus-rules.yaml"
RULE_TESTS = ROOT / "tests" / "monitoring" / "alerts-test.yaml"


@pytest.fixture(scope="module")
def promtool() -> Path:
    return debian_program("prometheus", "usr/bin/promtool")


def run(*command: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(part) for part in command], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_rules_are_valid(promtool: Path) -> None:
    done = run(promtool, "check", "rules", RULES)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 7 rules found" in done.stdout


def test_each_alert_fires_on_what_it_watches_and_not_on_its_near_misses(promtool: Path) -> None:
    done = run(promtool, "test", "rules", RULE_TESTS.name, cwd=RULE_TESTS.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_a_broken_rule_fails_its_unit_test(promtool: Path, tmp_path: Path) -> None:
    """The unit tests can fail: with the spend alert's threshold doubled, its test does."""
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / RULES.name).write_text(RULES.read_text().replace("* 3600 > 50", "* 3600 > 100"))
    tests = RULE_TESTS.read_text().replace("../../charts/vk-provider/files/", "rules/")
    (tmp_path / RULE_TESTS.name).write_text(tests)
    done = run(promtool, "test", "rules", RULE_TESTS.name, cwd=tmp_path)
    assert done.returncode != 0
    assert "VkProviderSpendAboveBudget" in done.stdout + done.stderr
