"""Every generated page of the documentation's reference, and the one way to write or check them.

Each page is a module of this package with a `render() -> str`; the text it returns is what the
page under docs/ must hold, byte for byte. `python -m vk_devtools.reference.pages --write` writes them
all and `--check` says which are stale (exit 1), as CI runs it; each page's own module does the same
for that page alone (`python -m vk_devtools.reference.cli --check`).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

DOCS = Path(__file__).resolve().parents[3] / "docs"


@dataclasses.dataclass(frozen=True)
class Page:
    path: str
    """Where the page lives, relative to docs/."""
    module: str
    """The module whose `render()` writes it, imported only when the page is rendered."""

    @property
    def file(self) -> Path:
        return DOCS / self.path

    @property
    def write_command(self) -> str:
        return f"python -m {self.module} --write"

    def render(self) -> str:
        render: Callable[[], str] = importlib.import_module(self.module).render
        return render()

    def stale_line(self) -> str:
        """The one line that says this page is out of date and how to bring it up to date."""
        return f"docs/{self.path} is out of date: run `{self.write_command}` and commit it"


PAGES = (
    Page("reference/crds.md", "vk_devtools.reference.crds"),
    Page("reference/cli.md", "vk_devtools.reference.cli"),
    Page("reference/metrics.md", "vk_devtools.reference.metrics"),
    Page("reference/events.md", "vk_devtools.reference.events"),
    Page("reference/labels.md", "vk_devtools.reference.labels"),
)


def page_of(module: str) -> Page:
    return next(page for page in PAGES if page.module == module)


def is_current(page: Page, text: str | None = None) -> bool:
    """Whether the committed page holds what `render()` writes (`text`, when already rendered)."""
    expected = page.render() if text is None else text
    return page.file.is_file() and page.file.read_text() == expected


def write_or_check(pages: Sequence[Page], argv: Sequence[str] | None, program: str) -> int:
    """The command line of `pages`: --write rewrites them, --check prints one line per stale page and
    exits 1."""
    parser = argparse.ArgumentParser(prog=program, description="Write or check generated reference pages.")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="write the page(s) under docs/")
    mode.add_argument("--check", action="store_true", help="exit 1 when a committed page is out of date")
    arguments = parser.parse_args(argv)
    stale = 0
    for page in pages:
        try:
            text = page.render()
        except ModuleNotFoundError as missing:
            if missing.name != page.module:
                raise
            print(f"docs/{page.path}: its generator {page.module} is not there", file=sys.stderr)
            stale += 1
            continue
        if arguments.write:
            page.file.parent.mkdir(parents=True, exist_ok=True)
            page.file.write_text(text)
            print(f"wrote docs/{page.path}")
        elif not is_current(page, text):
            print(page.stale_line(), file=sys.stderr)
            stale += 1
    return 1 if stale else 0


def main_of(module: str, argv: Sequence[str] | None = None) -> int:
    """`python -m <module> --write|--check` for the page that `module` renders."""
    return write_or_check([page_of(module)], argv, f"python -m {module}")


def main(argv: Sequence[str] | None = None) -> int:
    return write_or_check(PAGES, argv, "python -m vk_devtools.reference.pages")


if __name__ == "__main__":
    raise SystemExit(main())
