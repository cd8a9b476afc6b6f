"""The container image (`vk-provider dev image`): built from Debian's packages without a registry, then
checked as a runtime would see it: its configuration, its one layer, and `vk-provider` running inside,
as uid 65532 on a read-only root, under crun (Debian's) with the runtime configuration umoci writes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import IMAGE_GROUP
from vk_devtools.devcluster.debian import debian_program
from vk_devtools.image import ENTRYPOINT, STATE_DIR, USER_ID, BuiltImage, build_image, image_config, umoci
from vk_provider import __version__

ROOT = Path(__file__).parents[2]
TAG = "test"
LAYER_LIMIT_BYTES = 150 * 2**20
"""A regression guard: the layer is 101.5 MiB compressed (300.7 MiB unpacked) today."""

pytestmark = [
    IMAGE_GROUP,
    pytest.mark.skipif(os.geteuid() != 0, reason="building the image needs root (mmdebstrap, chroot)"),
]


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> BuiltImage:
    built = build_image(
        ROOT, tmp_path_factory.mktemp("image") / "layout", tag=TAG, version=__version__, revision="0" * 40
    )
    print(
        f"image layer {built.layer_bytes / 2**20:.1f} MiB, root {built.root_bytes / 2**20:.1f} MiB",
        file=sys.stderr,
    )
    return built


@pytest.fixture(scope="module")
def bundle(image: BuiltImage, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The image unpacked as a runtime bundle (root file system and runtime configuration)."""
    folder = tmp_path_factory.mktemp("bundle") / "bundle"
    subprocess.run([str(umoci()), "unpack", "--image", image.reference, str(folder)], check=True, timeout=300)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_the_configuration_names_the_user_the_entrypoint_and_the_labels(image: BuiltImage) -> None:
    manifest, config = image_config(image.layout, TAG)
    settings = config["config"]
    assert isinstance(settings, dict)
    assert settings["User"] == f"{USER_ID}:{USER_ID}"
    assert settings["Entrypoint"] == [ENTRYPOINT]
    assert settings["WorkingDir"] == STATE_DIR
    labels = settings["Labels"]
    assert labels["org.opencontainers.image.version"] == __version__
    assert labels["org.opencontainers.image.revision"] == "0" * 40
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    layers = manifest["layers"]
    assert isinstance(layers, list)
    assert len(layers) == 1
    assert image.layer_bytes < LAYER_LIMIT_BYTES


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
    crun = debian_program("crun", "usr/bin/crun")
    yajl = debian_program("libyajl2", "usr/lib/x86_64-linux-gnu/libyajl.so.2")  # crun's one missing library
    config = json.loads((bundle / "config.json").read_text())
    assert config["process"]["user"] == {"uid": USER_ID, "gid": USER_ID}
    config["process"]["args"] = [*config["process"]["args"][:1], "--version"]
    config["process"]["terminal"] = False
    config["root"]["readonly"] = True
    # This machine's cgroups are v1 with an empty v2 hierarchy beside them ("hybrid"), which crun refuses:
    # crun runs without cgroups, in a mount namespace where the v2 mount is gone.
    config["linux"].pop("resources", None)
    config["linux"].pop("cgroupsPath", None)
    (bundle / "config.json").write_text(json.dumps(config))
    unmount = "umount /sys/fs/cgroup/unified 2>/dev/null; " if Path("/sys/fs/cgroup/unified").is_dir() else ""
    run = (
        f"{crun} --cgroup-manager=disabled --root {tmp_path / 'state'} "
        f"run --bundle {bundle} vk-provider-image-test"
    )
    done = subprocess.run(
        ["unshare", "--mount", "sh", "-c", unmount + run],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "LD_LIBRARY_PATH": str(yajl.parent)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"vk-provider {__version__}"
