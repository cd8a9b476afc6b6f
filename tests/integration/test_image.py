"""The container image, as `make release` builds it (`vk-provider dev image` builds the same): from
Debian's packages without a registry, then checked as a runtime would see it: its configuration, its
one layer, `vk-provider` running inside, as uid 65532 on a read-only root, under crun (Debian's) with
the runtime configuration umoci writes, its router on uvloop, and its Python distributions the very
ones the development venv runs."""

from __future__ import annotations

import copy
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from email.parser import Parser
from pathlib import Path

import pytest

from tests.integration.conftest import IMAGE_GROUP, RELEASE_REVISION
from vk_devtools.devcluster.debian import debian_program
from vk_devtools.image import ENTRYPOINT, LICENSE_INSIDE, STATE_DIR, USER_ID, VENV, image_config, umoci
from vk_devtools.imagecontents import normalized
from vk_devtools.release import Release
from vk_provider import __version__

ROOT = Path(__file__).parents[2]
TAG = __version__
"""The release tags its image with the version."""
LAYER_LIMIT_BYTES = 150 * 2**20
"""A regression guard: the layer is 105.8 MiB compressed (314.8 MiB unpacked) with uvloop, since 0.1.0."""

pytestmark = [
    IMAGE_GROUP,
    pytest.mark.skipif(os.geteuid() != 0, reason="building the image needs root (mmdebstrap, chroot)"),
]


@pytest.fixture(scope="module")
def layout(release: Release, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The release's OCI archive unpacked: the layout a registry push or a runtime would read."""
    folder = tmp_path_factory.mktemp("layout")
    with tarfile.open(release.artifact(".oci.tar")) as archive:
        archive.extractall(folder, filter="data")
    return folder


@pytest.fixture(scope="module")
def bundle(layout: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The image unpacked as a runtime bundle (root file system and runtime configuration)."""
    folder = tmp_path_factory.mktemp("bundle") / "bundle"
    reference = f"{layout}:{TAG}"
    subprocess.run([str(umoci()), "unpack", "--image", reference, str(folder)], check=True, timeout=300)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def run_in_crun(
    bundle: Path, state: Path, arguments: list[str], name: str
) -> subprocess.CompletedProcess[str]:
    """The image's entrypoint with `arguments`, under crun, on a read-only root, with the runtime
    configuration umoci wrote for the image (its user and environment) changed only as noted."""
    crun = debian_program("crun", "usr/bin/crun")
    yajl = debian_program("libyajl2", "usr/lib/x86_64-linux-gnu/libyajl.so.2")  # crun's one missing library
    written = bundle / "config.json"
    original = bundle / "config.image.json"
    if not original.exists():
        shutil.copy2(written, original)
    config = json.loads(original.read_text())
    assert config["process"]["user"] == {"uid": USER_ID, "gid": USER_ID}
    config = copy.deepcopy(config)
    config["process"]["args"] = [*config["process"]["args"][:1], *arguments]
    config["process"]["terminal"] = False
    config["root"]["readonly"] = True
    # This machine's cgroups are v1 with an empty v2 hierarchy beside them ("hybrid"), which crun refuses:
    # crun runs without cgroups, in a mount namespace where the v2 mount is gone.
    config["linux"].pop("resources", None)
    config["linux"].pop("cgroupsPath", None)
    written.write_text(json.dumps(config))
    unmount = "umount /sys/fs/cgroup/unified 2>/dev/null; " if Path("/sys/fs/cgroup/unified").is_dir() else ""
    run = f"{crun} --cgroup-manager=disabled --root {state} run --bundle {bundle} {name}"
    return subprocess.run(
        ["unshare", "--mount", "sh", "-c", unmount + run],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "LD_LIBRARY_PATH": str(yajl.parent)},
    )


def test_the_configuration_names_the_user_the_entrypoint_and_the_labels(layout: Path) -> None:
    manifest, config = image_config(layout, TAG)
    settings = config["config"]
    assert isinstance(settings, dict)
    assert settings["User"] == f"{USER_ID}:{USER_ID}"
    assert settings["Entrypoint"] == [ENTRYPOINT]
    assert settings["WorkingDir"] == STATE_DIR
    labels = settings["Labels"]
    assert labels["org.opencontainers.image.version"] == __version__
    assert labels["org.opencontainers.image.revision"] == RELEASE_REVISION
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    layers = manifest["layers"]
    assert isinstance(layers, list)
    assert len(layers) == 1
    layer_bytes = int(layers[0]["size"])
    print(f"image layer {layer_bytes / 2**20:.1f} MiB compressed", file=sys.stderr)
    assert layer_bytes < LAYER_LIMIT_BYTES


def test_the_state_folder_is_the_only_place_the_user_owns(bundle: Path) -> None:
    root = bundle / "rootfs"
    assert (root / STATE_DIR.lstrip("/")).stat().st_uid == USER_ID
    assert f"nonroot:x:{USER_ID}:{USER_ID}:" in (root / "etc" / "passwd").read_text()
    owned = [
        str(path.relative_to(root))
        for path in root.rglob("*")
        if not path.is_symlink() and path.lstat().st_uid == USER_ID
    ]
    assert sorted(owned) == ["home/nonroot", STATE_DIR.lstrip("/")]
    assert not (root / "opt" / "vk-provider" / "bin" / "pip").exists()  # the installer went


def test_every_provider_imports_inside_on_a_read_only_root_as_the_user(bundle: Path) -> None:
    root = bundle / "rootfs"
    script = (
        "import vk_provider.cli, vk_providers.runpod, vk_providers.sagemaker, vk_providers.kubernetes, "
        "vk_providers.grpc, vk_providers.local, vk_providers.chain; import os; print(os.getuid())"
    )
    # A mount namespace of its own, where the root is bound read-only, as readOnlyRootFilesystem does.
    command = (
        f"mount --bind {root} {root} && mount -o remount,bind,ro {root} && "
        f"chroot --userspec={USER_ID}:{USER_ID} {root} /opt/vk-provider/bin/python -c '{script}' && "
        f"! chroot --userspec={USER_ID}:{USER_ID} {root} touch /written 2>/dev/null"
    )
    done = subprocess.run(
        ["unshare", "--mount", "sh", "-c", command], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(USER_ID)


def test_crun_runs_the_entrypoint_with_the_image_s_own_runtime_configuration(
    bundle: Path, tmp_path: Path
) -> None:
    done = run_in_crun(bundle, tmp_path / "state", ["--version"], "vk-provider-image-version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"vk-provider {__version__}"


def test_the_image_s_router_runs_on_uvloop(bundle: Path, tmp_path: Path) -> None:
    # The real entrypoint: the router says which loop it runs on before it looks for a cluster, and
    # then, having none here, stops; the line is what this test wants.
    arguments = ["router", "--worker-processes", "1", "--kubeconfig", "/nonexistent"]
    done = run_in_crun(bundle, tmp_path / "state", arguments, "vk-provider-image-router")
    uvloop = importlib.metadata.version("uvloop")
    assert f"event loop: uvloop {uvloop}" in done.stderr, done.stderr


def image_distributions(root: Path) -> dict[str, str]:
    """Each Python distribution installed in the image's venv (normalized name -> version), from its
    dist-info METADATA, as importlib.metadata would read it there."""
    found: dict[str, str] = {}
    for metadata in (root / VENV.lstrip("/")).glob("lib/python3*/site-packages/*.dist-info/METADATA"):
        headers = Parser().parsestr(metadata.read_text(), headersonly=True)
        found[normalized(headers["Name"])] = headers["Version"]
    return found


def test_the_image_s_python_distributions_are_the_ones_this_python_runs(bundle: Path) -> None:
    in_image = image_distributions(bundle / "rootfs")
    assert {"vk-provider", "uvloop", "aiohttp", "grpcio"} <= set(in_image)
    here = {normalized(dist.metadata["Name"]): dist.version for dist in importlib.metadata.distributions()}
    differ = {
        name: (version, here.get(name)) for name, version in in_image.items() if here.get(name) != version
    }
    assert differ == {}, "(image, this venv): `make .venv/.installed` installs image/requirements.txt's pins"


def test_the_license_is_in_the_image(bundle: Path) -> None:
    assert (bundle / "rootfs" / LICENSE_INSIDE.lstrip("/")).read_bytes() == (ROOT / "LICENSE").read_bytes()
