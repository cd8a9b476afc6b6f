"""The parts of `make release` that need no image: its input checks, the chart's pinned values, the
archive's format, and what it refuses to delete."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
import yaml

from vk_devtools.imagecontents import ImageContentsError, debian_packages, pinned_requirements
from vk_devtools.release import (
    ReleaseError,
    _clear_previous,
    check_repository,
    pin_chart_values,
    source_version,
    write_oci_archive,
)
from vk_provider import __version__

pytestmark = pytest.mark.unit

ROOT = Path(__file__).parents[3]
DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize(
    "repository", ["vk-provider", "ghcr.io/acme/vk-provider", "registry.local:5000/team/vk_provider"]
)
def test_a_repository_names_where_the_image_goes(repository: str) -> None:
    assert check_repository(repository) == repository


@pytest.mark.parametrize(
    "repository", ["vk-provider:0.1.0", f"vk-provider@{DIGEST}", "Acme/VK", "", "a//b", "-x"]
)
def test_a_tag_a_digest_or_a_malformed_name_is_refused_with_an_example(repository: str) -> None:
    refused = r"is not an image repository: .* e\.g\. ghcr\.io/acme/vk-provider"
    with pytest.raises(ReleaseError, match=refused):
        check_repository(repository)


def test_the_chart_s_values_get_the_repository_and_the_digest_and_keep_their_comments() -> None:
    values = (ROOT / "charts" / "vk-provider" / "values.yaml").read_text()
    pinned = pin_chart_values(values, "ghcr.io/acme/vk-provider", DIGEST)
    image = yaml.safe_load(pinned)["image"]
    assert (image["repository"], image["digest"], image["tag"]) == ("ghcr.io/acme/vk-provider", DIGEST, "")
    changed = [(a, b) for a, b in zip(values.splitlines(), pinned.splitlines(), strict=True) if a != b]
    assert len(changed) == 2  # those two lines, and nothing else
    with pytest.raises(ReleaseError, match="no top-level `image:` block"):
        pin_chart_values("nodes: []\n", "vk-provider", DIGEST)
    with pytest.raises(ReleaseError, match="has no digest to set"):
        pin_chart_values("image:\n  repository: x\nnodes: []\n  digest: ''\n", "vk-provider", DIGEST)


def test_the_version_comes_from_the_package_alone() -> None:
    assert source_version(ROOT) == __version__


def test_the_archive_has_the_layout_at_its_root_and_is_the_same_every_time(tmp_path: Path) -> None:
    layout = tmp_path / "layout"
    (layout / "blobs" / "sha256").mkdir(parents=True)
    (layout / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (layout / "index.json").write_text("{}")
    (layout / "blobs" / "sha256" / "00").write_text("blob")
    write_oci_archive(layout, tmp_path / "one.tar")
    (layout / "index.json").touch()  # a later mtime must not change the archive
    write_oci_archive(layout, tmp_path / "two.tar")
    assert (tmp_path / "one.tar").read_bytes() == (tmp_path / "two.tar").read_bytes()
    with tarfile.open(tmp_path / "one.tar") as archive:
        assert archive.getnames() == ["blobs", "blobs/sha256", "blobs/sha256/00", "index.json", "oci-layout"]


def test_only_an_earlier_release_s_files_are_cleared(tmp_path: Path) -> None:
    output = tmp_path / "dist"
    output.mkdir()
    (output / "install.yaml").write_text("old")
    (output / "SHA256SUMS").write_text("0" * 64 + "  install.yaml\n")
    _clear_previous(output)
    assert list(output.iterdir()) == []
    (output / "notes.txt").write_text("mine")
    with pytest.raises(ReleaseError, match=r"holds files no earlier release wrote \(notes.txt\)"):
        _clear_previous(output)
    assert (output / "notes.txt").read_text() == "mine"


def test_the_image_lists_are_read_and_bad_lines_named(tmp_path: Path) -> None:
    packages = debian_packages(ROOT)
    assert "python3" in packages.installed
    assert set(packages.build_only) < set(packages.installed)
    assert "python3" not in packages.build_only
    pins = pinned_requirements(ROOT)
    assert "uvloop" in pins  # the router extra
    assert "vk-provider" not in pins  # the project's own wheel goes in without the lock
    (tmp_path / "image").mkdir()
    (tmp_path / "image" / "debian-packages.txt").write_text("python3\npython3-venv build only\n")
    with pytest.raises(ImageContentsError, match=r"debian-packages.txt:2: expected `PACKAGE` or"):
        debian_packages(tmp_path)
    (tmp_path / "image" / "requirements.txt").write_text("# nothing\n")
    with pytest.raises(ImageContentsError, match="pins nothing: regenerate it with `make lock`"):
        pinned_requirements(tmp_path)
