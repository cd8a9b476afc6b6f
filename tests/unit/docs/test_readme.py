"""The README is the first screen: short, and it opens with the two commands that do everything
(`make demo`, `make test`), the second being exactly what CI runs and what checks the docs site."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).parents[3]
README = ROOT / "README.md"
MAX_README_LINES = 150
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)


def first_fenced_block(text: str) -> list[str]:
    found = FENCE.search(text)
    assert found is not None, "the README has no fenced block"
    return [line for line in found.group(1).splitlines() if line.strip()]


def make_target(makefile: str, target: str) -> tuple[list[str], list[str]]:
    """A target's prerequisites and recipe lines."""
    found = re.search(rf"^{re.escape(target)}:([^\n]*)\n((?:\t[^\n]*\n)*)", makefile, re.MULTILINE)
    assert found is not None, f"the Makefile has no target {target!r}"
    return found.group(1).split(), [line.strip() for line in found.group(2).splitlines()]


def test_the_readme_is_at_most_150_lines() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; move detail into docs/"


def test_the_readme_s_first_block_is_the_two_commands_each_with_a_comment() -> None:
    lines = first_fenced_block(README.read_text())
    commands = [line.split("#", 1)[0].strip() for line in lines]
    assert commands == ["make demo", "make test"]
    comments = [line.split("#", 1)[1].strip() if "#" in line else "" for line in lines]
    assert all(comments), f"each command says what it does: {lines}"


def test_ci_runs_the_readme_s_test_command() -> None:
    script = (ROOT / ".ci" / "run").read_text().splitlines()
    assert "make test" in [line.strip() for line in script]


def test_the_test_command_builds_the_docs_site_strictly() -> None:
    makefile = (ROOT / "Makefile").read_text()
    prerequisites, _ = make_target(makefile, "test")
    assert "docs" in prerequisites
    _, recipe = make_target(makefile, "docs")
    builds = [line for line in recipe if re.search(r"\bmkdocs build\b", line)]
    assert builds, recipe
    assert all("--strict" in line for line in builds), builds
    # MkDocs 1.6's --quiet drops warnings before --strict counts them: the build would pass broken links.
    assert not any(re.search(r"\s(--quiet|-q)\b", line) for line in builds), builds
