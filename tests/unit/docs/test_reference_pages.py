"""`python -m vk_devtools.reference.<page> --write|--check`: one shared command line for every page."""

from __future__ import annotations

from pathlib import Path

import pytest

from vk_devtools.reference import labels, pages


def test_check_names_the_write_command_then_write_makes_the_page_current(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(pages, "DOCS", tmp_path)
    assert labels.main(["--check"]) == 1
    assert capsys.readouterr().err == (
        "docs/reference/labels.md is out of date: run `python -m vk_devtools.reference.labels --write` "
        "and commit it\n"
    )
    assert labels.main(["--write"]) == 0
    assert (tmp_path / "reference" / "labels.md").read_text() == labels.render()
    assert labels.main(["--check"]) == 0
    (tmp_path / "reference" / "labels.md").write_text("edited by hand\n")
    assert labels.main(["--check"]) == 1


def test_a_mode_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        labels.main([])
    assert exit_.value.code == 2
    assert "one of the arguments --write --check is required" in capsys.readouterr().err


def test_every_page_of_the_reference_is_listed_once_under_docs_reference() -> None:
    paths = [page.path for page in pages.PAGES]
    assert len(paths) == len(set(paths))
    assert {"reference/crds.md", "reference/cli.md", "reference/metrics.md"} <= set(paths)
    assert {"reference/events.md", "reference/labels.md"} <= set(paths)
    assert all(page.module.startswith("vk_devtools.reference.") for page in pages.PAGES)
