"""`make release` (`vk-provider dev release`), made once per run by the `release` fixture (which the
image tests share): every artifact checksummed, the chart linting strictly and, like install.yaml,
naming the image by the digest of the archive's manifest, and the wheel of the one version."""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from tests.integration.conftest import IMAGE_GROUP
from vk_devtools.devcluster.debian import debian_program
from vk_devtools.devcluster.helm import helm_binary
from vk_devtools.release import Release, container_images
from vk_provider import __version__

ROOT = Path(__file__).parents[2]

pytestmark = [
    IMAGE_GROUP,
    pytest.mark.skipif(os.geteuid() != 0, reason="building the image needs root (mmdebstrap, chroot)"),
]


def test_every_artifact_is_in_sha256sums_and_verifies(release: Release) -> None:
    sums = release.folder / "SHA256SUMS"
    listed = sorted(line.split()[1] for line in sums.read_text().splitlines())
    assert listed == sorted(path.name for path in release.artifacts if path != sums)
    assert sorted(path.name for path in release.folder.iterdir()) == sorted(
        path.name for path in release.artifacts
    )
    done = subprocess.run(
        ["sha256sum", "--check", "--strict", "SHA256SUMS"],
        cwd=release.folder,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_archive_is_an_oci_layout_whose_manifest_has_the_published_digest(release: Release) -> None:
    with tarfile.open(release.artifact(".oci.tar")) as archive:
        names = set(archive.getnames())
        assert {"oci-layout", "index.json"} <= names
        index_file = archive.extractfile("index.json")
        assert index_file is not None
        index = json.load(index_file)
    (manifest,) = index["manifests"]
    assert manifest["annotations"]["org.opencontainers.image.ref.name"] == __version__
    assert manifest["digest"] == release.digest
    assert f"blobs/sha256/{release.digest.removeprefix('sha256:')}" in names
    assert release.artifact(".image-digest").read_text() == f"{release.digest}\n"


def test_skopeo_copies_the_archive_with_its_digest(release: Release, tmp_path: Path) -> None:
    # What the README tells a user to do, to a registry; here to a folder, which keeps digests alike.
    skopeo = debian_program("skopeo", "usr/bin/skopeo")
    gpgme = debian_program(
        "libgpgme11", "usr/lib/x86_64-linux-gnu/libgpgme.so.11"
    )  # skopeo's missing library
    environment = {**os.environ, "LD_LIBRARY_PATH": str(gpgme.parent), "TMPDIR": str(tmp_path)}
    copy = [
        str(skopeo),
        "--insecure-policy",  # no /etc/containers/policy.json on this machine: nothing is verified
        "copy",
        "--preserve-digests",
        f"oci-archive:{release.artifact('.oci.tar')}",
        f"oci:{tmp_path / 'copied'}:{__version__}",
    ]
    done = subprocess.run(copy, capture_output=True, text=True, timeout=300, check=False, env=environment)
    assert done.returncode == 0, done.stderr
    index = json.loads((tmp_path / "copied" / "index.json").read_text())
    assert [item["digest"] for item in index["manifests"]] == [release.digest]


def test_the_packaged_chart_lints_strictly_and_renders_the_image_by_digest(release: Release) -> None:
    chart = release.artifact(".tgz")
    assert chart.name == f"vk-provider-{__version__}.tgz"
    helm = str(helm_binary())
    lint = subprocess.run(
        [helm, "lint", "--strict", str(chart)], check=False, capture_output=True, text=True, timeout=120
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr
    rendered = subprocess.run(
        [helm, "template", "vk-provider", str(chart), "--namespace", "vk-provider-system"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    images = container_images(rendered)
    assert len(images) >= 3  # the node, the router, the controller
    assert set(images) == {release.image_reference}
    assert release.image_reference == f"vk-provider@{release.digest}"


def test_install_yaml_pins_the_same_digest_in_every_container(release: Release) -> None:
    text = release.artifact("install.yaml").read_text()
    images = container_images(text)
    assert len(images) >= 3
    assert set(images) == {release.image_reference}
    assert ":latest" not in text
    assert f"vk-provider:{__version__}" not in text  # no reference by tag left anywhere


def test_the_wheel_and_the_sdist_are_of_the_one_version_and_carry_the_license(release: Release) -> None:
    wheel = release.artifact(".whl")
    assert wheel.name == f"vk_provider-{__version__}-py3-none-any.whl"
    license_text = (ROOT / "LICENSE").read_bytes()
    with zipfile.ZipFile(wheel) as archive:
        info = f"vk_provider-{__version__}.dist-info"
        metadata = Parser().parsestr(archive.read(f"{info}/METADATA").decode(), headersonly=True)
        assert archive.read(f"{info}/licenses/LICENSE") == license_text
    assert metadata["Version"] == __version__
    assert metadata["License-Expression"] == "Apache-2.0"
    assert "uvloop" in " ".join(metadata.get_all("Requires-Dist") or [])
    with tarfile.open(release.artifact(".tar.gz")) as sdist:
        member = sdist.extractfile(f"vk_provider-{__version__}/LICENSE")
        assert member is not None
        assert member.read() == license_text
