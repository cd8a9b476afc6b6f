"""`vk-provider dev release` (`make release`): everything a platform team installs vk-provider from.

Into one folder (`dist/`), all of one version (`vk_provider.__version__`, which the chart, the
manifests and the image agree with: tests/unit/test_versions.py):

- the wheel and the sdist (PyPA's `build`, from a copy of the checkout, so the checkout stays clean);
- the image as an OCI archive, `vk-provider-<version>.oci.tar` (`skopeo copy oci-archive:...` reads
  it), built from Debian's packages with that very wheel (`vk_devtools.image`), and the digest of its
  manifest in `vk-provider-<version>.image-digest`;
- the Helm chart, `vk-provider-<version>.tgz`, whose default image is that digest;
- `install.yaml`: `manifests/base` and `manifests/traffic` rendered by kustomize, the image pinned by
  the same digest;
- `SHA256SUMS` of all of them (`sha256sum -c SHA256SUMS`).

A digest, not a tag, because a tag can be pushed again: what was tested is what runs. The repository
the image will be pushed to (`--image-repository`) names it in the chart and in install.yaml; a
digest survives the push (`skopeo copy --preserve-digests`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shutil
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

import yaml

from vk_devtools import image as building_image
from vk_devtools.devcluster.building import BinaryCache
from vk_devtools.devcluster.helm import helm_binary

CHART = Path("charts") / "vk-provider"
KUSTOMIZATIONS = (Path("manifests") / "base", Path("manifests") / "traffic")
IMAGE_NAME = "vk-provider"
"""The image's name in the manifests (`vk-provider:<version>`), which the digest replaces."""
SUMS = "SHA256SUMS"
STEP_TIMEOUT_SECONDS = 900
_VERSION_LINE = re.compile(r'^__version__ = "([^"]+)"$', re.MULTILINE)
# A registry host (with an optional port) and path, lowercase, with no tag and no digest:
# `vk-provider`, `ghcr.io/acme/vk-provider`, `registry.local:5000/team/vk-provider`.
_REPOSITORY = re.compile(
    r"^(?:[a-zA-Z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:[._-]+[a-z0-9]+)*(?:/[a-z0-9]+(?:[._-]+[a-z0-9]+)*)*$"
)
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


class ReleaseError(RuntimeError):
    """The release cannot be made; the message says which step and why."""


@dataclasses.dataclass(frozen=True)
class Release:
    folder: Path
    version: str
    digest: str
    """The image manifest's digest, `sha256:...`."""
    image_reference: str
    """`<repository>@<digest>`, as the chart and install.yaml name the image."""
    artifacts: tuple[Path, ...]
    """Everything written, SHA256SUMS last."""

    def artifact(self, suffix: str) -> Path:
        (found,) = [path for path in self.artifacts if path.name.endswith(suffix)]
        return found


def source_version(source: Path) -> str:
    """The version `source`'s vk_provider/__init__.py declares: the one source of truth."""
    match = _VERSION_LINE.search((source / "vk_provider" / "__init__.py").read_text())
    if match is None:
        raise ReleaseError(f"{source}/vk_provider/__init__.py declares no __version__")
    return match[1]


def check_repository(repository: str) -> str:
    if not _REPOSITORY.match(repository):
        raise ReleaseError(
            f"--image-repository {repository!r} is not an image repository: a lowercase name with an "
            "optional registry and path and no tag or digest, e.g. ghcr.io/acme/vk-provider"
        )
    return repository


def make_release(
    source: Path,
    output: Path,
    *,
    image_repository: str,
    revision: str,
    image_base_cache: Path | None = None,
    log: TextIO = sys.stderr,
) -> Release:
    """Write the release of `source` into `output`. `image_base_cache`: reuse the image's Debian root
    and locked dependencies kept there (`vk_devtools.image.build_image`; the tests do, a release does not)."""
    repository = check_repository(image_repository)
    version = source_version(source)
    _clear_previous(output)
    with tempfile.TemporaryDirectory(prefix="vk-release-") as scratch_name:
        scratch = Path(scratch_name)
        wheel, sdist = _python_distributions(source, output, scratch / "tree", log)
        archive, digest = _image(
            source,
            output,
            scratch / "layout",
            version=version,
            revision=revision,
            wheel=wheel,
            base_cache=image_base_cache,
            log=log,
        )
        digest_file = output / f"vk-provider-{version}.image-digest"
        digest_file.write_text(f"{digest}\n")
        reference = f"{repository}@{digest}"
        chart = _chart(
            source, output, scratch / "chart", version=version, repository=repository, digest=digest, log=log
        )
        install = _install_yaml(
            source,
            output / "install.yaml",
            scratch / "overlays",
            repository=repository,
            digest=digest,
            log=log,
        )
    artifacts = (wheel, sdist, archive, digest_file, chart, install)
    sums = output / SUMS
    sums.write_text("".join(f"{_sha256(path)}  {path.name}\n" for path in artifacts))
    return Release(output, version, digest, reference, (*artifacts, sums))


def _clear_previous(output: Path) -> None:
    """Empty `output` of an earlier release's files; refuse a folder holding anything else, so a
    mistyped --output never deletes what is not ours."""
    if not output.exists():
        output.mkdir(parents=True)
        return
    entries = sorted(output.iterdir())
    if not entries:
        return
    listed = set()
    if (output / SUMS).is_file():
        listed = {
            line.split(maxsplit=1)[1].strip() for line in (output / SUMS).read_text().splitlines() if line
        }
    strangers = [entry.name for entry in entries if entry.name != SUMS and entry.name not in listed]
    if strangers:
        raise ReleaseError(
            f"{output} holds files no earlier release wrote ({', '.join(strangers[:5])}): give an empty or "
            "new --output folder"
        )
    for entry in entries:
        entry.unlink()


def _run(step: str, command: Sequence[object], log: TextIO, cwd: Path | None = None) -> str:
    return building_image.run_step("release", step, command, log, error=ReleaseError, cwd=cwd)


def _python_distributions(source: Path, output: Path, tree: Path, log: TextIO) -> tuple[Path, Path]:
    tree.mkdir(parents=True)
    for name in building_image.PROJECT_FILES:
        if (source / name).is_dir():
            shutil.copytree(source / name, tree / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source / name, tree / name)
    # The sdist first, then the wheel built from it (build's default): an sdist that lacks a file the
    # wheel needs fails here, not on a user's machine.
    _run(
        "the sdist and the wheel (python -m build)",
        [sys.executable, "-m", "build", "--outdir", output, tree],
        log,
    )
    (wheel,) = output.glob("vk_provider-*.whl")
    (sdist,) = output.glob("vk_provider-*.tar.gz")
    return wheel, sdist


def _image(
    source: Path,
    output: Path,
    layout: Path,
    *,
    version: str,
    revision: str,
    wheel: Path,
    base_cache: Path | None,
    log: TextIO,
) -> tuple[Path, str]:
    try:
        built = building_image.build_image(
            source,
            layout,
            tag=version,
            version=version,
            revision=revision,
            project_wheel=wheel,
            base_cache=base_cache,
            log=log,
        )
    except building_image.ImageBuildError as error:
        raise ReleaseError(str(error)) from None
    print(
        f"release: image layer {built.layer_bytes / 2**20:.1f} MiB compressed, "
        f"{built.root_bytes / 2**20:.1f} MiB unpacked",
        file=log,
    )
    archive = output / f"vk-provider-{version}.oci.tar"
    write_oci_archive(layout, archive)
    return archive, manifest_digest(layout, version)


def manifest_digest(layout: Path, tag: str) -> str:
    """The digest of the manifest `tag` names in the OCI layout: what a registry serves it as."""
    index = json.loads((layout / "index.json").read_text())
    digests = [
        item["digest"]
        for item in index["manifests"]
        if item.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag
    ]
    if len(digests) != 1 or not _DIGEST.match(digests[0]):
        raise ReleaseError(f"the OCI layout {layout} has no single sha256 manifest tagged {tag!r}")
    return str(digests[0])


def write_oci_archive(layout: Path, archive: Path) -> None:
    """The layout folder as a tar with `oci-layout` and `index.json` at its root (what skopeo's
    `oci-archive:` transport reads); entries sorted, owned by root and dated 0, so the same layout
    always makes the same archive."""

    def normalized(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = 0
        return info

    with tarfile.open(archive, "w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(layout.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(layout)), recursive=False, filter=normalized)


def pin_chart_values(values: str, repository: str, digest: str) -> str:
    """values.yaml with the image's repository and digest set, its comments kept (a packaged chart's
    values.yaml is what `helm show values` prints to users): only those two lines of `image:` change."""
    lines = values.splitlines(keepends=True)
    try:
        start = lines.index("image:\n")
    except ValueError:
        raise ReleaseError("the chart's values.yaml has no top-level `image:` block") from None
    wanted = {"repository": json.dumps(repository), "digest": json.dumps(digest)}
    for number in range(start + 1, len(lines)):
        line = lines[number]
        if line.strip() and not line.startswith(" "):
            break  # the next top-level key: the image block ended
        key = line.strip().split(":", 1)[0]
        if key in wanted and line.startswith(f"  {key}:"):
            lines[number] = f"  {key}: {wanted.pop(key)}\n"
    if wanted:
        raise ReleaseError(f"the chart's `image:` block has no {' or '.join(sorted(wanted))} to set")
    pinned = "".join(lines)
    image = yaml.safe_load(pinned)["image"]
    if (image["repository"], image["digest"]) != (repository, digest):
        raise ReleaseError("setting the image in the chart's values.yaml did not take")
    return pinned


def _chart(
    source: Path, output: Path, scratch: Path, *, version: str, repository: str, digest: str, log: TextIO
) -> Path:
    chart = scratch / CHART.name
    shutil.copytree(source / CHART, chart)
    metadata = yaml.safe_load((chart / "Chart.yaml").read_text())
    if (str(metadata["version"]), str(metadata["appVersion"])) != (version, version):
        raise ReleaseError(
            f"{CHART}/Chart.yaml says version {metadata['version']}, appVersion {metadata['appVersion']}; "
            f"the project is {version}: make them agree"
        )
    values = chart / "values.yaml"
    values.write_text(pin_chart_values(values.read_text(), repository, digest))
    helm = helm_binary()
    _run("helm lint --strict, with the image pinned", [helm, "lint", "--strict", chart], log)
    _run("the chart (helm package)", [helm, "package", chart, "--destination", output], log)
    return output / f"vk-provider-{version}.tgz"


def _install_yaml(
    source: Path, install: Path, overlays: Path, *, repository: str, digest: str, log: TextIO
) -> Path:
    kubectl = BinaryCache.default().ensure(wait=True, out=log) / "kubectl"
    # A copy of manifests/ with an overlay of our own beside each folder (kustomize takes resources
    # by relative path only): it swaps the image for its digest wherever it appears, and no line of
    # manifests/ changes.
    manifests = overlays / "manifests"
    shutil.copytree(source / "manifests", manifests)
    documents = []
    for folder in KUSTOMIZATIONS:
        overlay = manifests / f"release-{folder.name}"
        overlay.mkdir()
        kustomization = {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": [f"../{folder.name}"],
            "images": [{"name": IMAGE_NAME, "newName": repository, "digest": digest}],
        }
        (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization, sort_keys=False))
        rendered = _run(f"{folder} (kubectl kustomize)", [kubectl, "kustomize", overlay], log)
        documents.append(f"# {folder}\n{rendered.strip()}\n")
    text = "---\n".join(documents)
    reference = f"{repository}@{digest}"
    unpinned = sorted(set(container_images(text)) - {reference})
    ours = [image for image in unpinned if image.split("@")[0].split(":")[0] in (IMAGE_NAME, repository)]
    if ours:
        raise ReleaseError(f"install.yaml still names the image without its digest: {', '.join(ours)}")
    install.write_text(text)
    return install


def container_images(text: str) -> list[str]:
    """Every container's (and init container's) image in a multi-document YAML."""
    images: list[str] = []
    for document in yaml.safe_load_all(text):
        template = ((document or {}).get("spec") or {}).get("template") or {}
        pod = template.get("spec") or {}
        for key in ("initContainers", "containers"):
            images.extend(str(container["image"]) for container in pod.get(key) or ())
    return images


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def report(release: Release, seconds: float, out: TextIO) -> None:
    for path in release.artifacts:
        print(f"{path.stat().st_size / 2**20:10.2f} MiB  {path}", file=out)
    print(f"image {release.image_reference}", file=out)
    print(f"release {release.version} written to {release.folder} in {seconds:.0f}s", file=out)


def run(source: Path, output: Path, *, image_repository: str, revision: str, out: TextIO, err: TextIO) -> int:
    started = time.monotonic()
    try:
        check_repository(image_repository)
    except ReleaseError as error:
        print(error, file=err)
        return 2  # bad input: before anything is built
    try:
        release = make_release(source, output, image_repository=image_repository, revision=revision, log=err)
    except ReleaseError as error:
        print(error, file=err)
        return 1
    report(release, time.monotonic() - started, out)
    return 0
