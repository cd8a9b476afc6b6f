"""docs/reference/labels.md is the key catalogue, and the catalogue names every key the code spells."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vk_devtools.reference import labels, pages
from vk_devtools.reference.sourcescan import UNKNOWN, Code
from vk_provider.catalogue.keys import KEYS, NOT_KEYS

PAGE = pages.page_of(labels.MODULE)
QUALIFIED_KEY = re.compile(
    r"^(?:[a-z0-9](?:[-a-z0-9]*[a-z0-9])?\.)+[a-z]{2,}/(?:[A-Za-z0-9{}][-A-Za-z0-9_.{}]*)?$"
)
API_VERSION = re.compile(r"/v[0-9]+(?:(?:alpha|beta)[0-9]+)?$")


def test_the_committed_page_is_what_the_catalogue_says() -> None:
    assert pages.is_current(PAGE), PAGE.stale_line()


@pytest.fixture(scope="module")
def code() -> Code:
    return Code()


def spelled_keys(code: Code) -> dict[str, str]:
    """Each key-shaped string of the code (selectors split into their keys) -> where it is."""
    found: dict[str, str] = {}
    for spelled in code.strings():
        for term in spelled.text.split(","):
            key = term.partition("=")[0].strip()
            if QUALIFIED_KEY.match(key) and not API_VERSION.search(key):
                found.setdefault(key, spelled.where)
    return found


def _pattern(key: str) -> str:
    return re.sub(r"<[^>]*>", UNKNOWN, key)


def test_every_key_the_code_spells_is_catalogued(code: Code) -> None:
    catalogued = {_pattern(key.key) for key in KEYS}
    missing = {
        key: where
        for key, where in spelled_keys(code).items()
        if key not in catalogued
        and key not in NOT_KEYS
        and not any(key.startswith(other) for other in NOT_KEYS if other.endswith("/"))
        # A prefix the code completes elsewhere (`PREFIX + "gpu-types"`): some key must start with it.
        and not (key.endswith("/") and any(entry.startswith(key) for entry in catalogued))
    }
    assert not missing, (
        "keys the code uses that vk_provider/catalogue/keys.py does not list (add them, with what they "
        f"mean, or to NOT_KEYS): {missing}"
    )


def test_every_catalogued_key_is_still_in_the_code(code: Code) -> None:
    spelled = set(spelled_keys(code)) | {s.text for s in code.strings()}
    stale = sorted({key.key for key in KEYS if _pattern(key.key) not in spelled})
    assert not stale, f"vk_provider/catalogue/keys.py lists keys the code no longer names: {stale}"
    gone = sorted(key for key in NOT_KEYS if key not in spelled)
    assert not gone, f"NOT_KEYS names strings the code no longer has: {gone}"


def test_the_scan_sees_keys_built_from_constants_of_other_modules(code: Code) -> None:
    keys = spelled_keys(code)
    assert "offload.vk-provider.dev/promote" in keys  # f"{GROUP}/promote"
    assert "placement.vk-provider.dev/gpu-types" in keys  # PREFIX + "gpu-types"
    assert "offload.vk-provider.dev/replicas-before-replacement" in keys  # GROUP imported from names
    assert "batch.kubernetes.io/job-name" in keys  # also inside f"batch.kubernetes.io/job-name={...}"


def test_every_entry_is_complete_and_listed_once() -> None:
    seen = set()
    for key in KEYS:
        assert all((key.key, key.kind, key.on, key.written_by, key.read_by, key.meaning)), key
        assert (key.key, key.kind) not in seen, key
        seen.add((key.key, key.kind))


def test_a_new_key_is_found_whatever_way_it_is_built(tmp_path: Path) -> None:
    package = tmp_path / "toy"
    package.mkdir()
    (package / "names.py").write_text('GROUP = "offload.vk-provider.dev"\nPREFIX = "toy.vk-provider.dev/"\n')
    (package / "use.py").write_text(
        "from toy.names import GROUP, PREFIX\n\n"
        'NEW = f"{GROUP}/brand-new"\n'
        'OTHER = PREFIX + "other"\n'
        'SELECTOR = f"app.example.com/tier={NEW}"\n'
    )
    keys = spelled_keys(Code((package,)))
    assert {"offload.vk-provider.dev/brand-new", "toy.vk-provider.dev/other", "app.example.com/tier"} <= set(
        keys
    )
