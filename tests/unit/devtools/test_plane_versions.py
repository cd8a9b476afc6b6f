"""The development control plane at each pinned minor: which module it builds from, the flags each
version's components get, and what the commands say about a minor they have no plane for."""

from __future__ import annotations

import dataclasses
import io
import re
from pathlib import Path

import pytest
import yaml

from tests.unit.devtools import write_state
from vk_devtools.devcluster import building, cluster, commands, demorun
from vk_devtools.devcluster.building import (
    CONTROL_PLANE,
    CONTROL_PLANE_1_35,
    CONTROL_PLANES,
    UnknownKubernetesVersionError,
    control_plane_build,
    read_pins,
)
from vk_provider.kit.kubeversions import NEWEST_TESTED, OLDEST_SUPPORTED, minor_text

pytestmark = pytest.mark.unit


def test_there_is_a_pinned_plane_for_the_oldest_and_the_newest_supported_minor() -> None:
    assert set(CONTROL_PLANES) == {minor_text(OLDEST_SUPPORTED), minor_text(NEWEST_TESTED)}
    for minor, build in CONTROL_PLANES.items():
        assert read_pins(build).kubernetes_version.startswith(f"v{minor}.")


def test_the_1_35_pins_follow_that_release_s_own_go_mod() -> None:
    pins = read_pins(CONTROL_PLANE_1_35)
    assert (pins.kubernetes_version, pins.etcd_version) == ("v1.35.4", "v3.6.5")
    gomod = (CONTROL_PLANE_1_35.gomod_dir / "go.mod").read_text()
    replaced = re.findall(r"^\s+(k8s\.io/\S+) => (\S+) (\S+)$", gomod, re.MULTILINE)
    assert len(replaced) == 31  # every staging module of k8s.io/kubernetes v1.35.4
    assert {(module, target) for module, target, _ in replaced} == {(m, m) for m, _, _ in replaced}
    assert {version for _, _, version in replaced} == {"v0.35.4"}


def test_each_plane_has_its_own_cache_folder_of_the_same_kind() -> None:
    newest = building.BinaryCache.for_build(CONTROL_PLANE)
    oldest = building.BinaryCache.default("1.35")
    assert newest.root.parent == oldest.root.parent
    assert oldest.root.name.startswith("k8s-v1.35.4-etcd-v3.6.5-")
    assert newest.root != oldest.root
    assert building.BinaryCache.default().root == newest.root


@pytest.mark.parametrize("given", ["1.35", "v1.35", " 1.35 "])
def test_a_minor_names_its_plane(given: str) -> None:
    assert control_plane_build(given) is CONTROL_PLANE_1_35


@pytest.mark.parametrize("given", ["1.34", "1.35.4", "latest", ""])
def test_a_minor_without_a_plane_is_a_clear_error(given: str) -> None:
    with pytest.raises(UnknownKubernetesVersionError, match=r"give a minor, one of 1\.35, 1\.37"):
        control_plane_build(given)


def test_build_builds_every_plane_unless_told_one_minor() -> None:
    everything = commands.builds_for(None)
    assert CONTROL_PLANE in everything
    assert CONTROL_PLANE_1_35 in everything
    chosen = commands.builds_for("1.35")
    assert chosen[0] is CONTROL_PLANE_1_35
    assert CONTROL_PLANE not in chosen
    assert len(chosen) == len(everything) - 1  # the other tools still


def test_build_of_an_unknown_minor_exits_2_and_names_the_choices() -> None:
    err = io.StringIO()
    code = commands.build(background=False, wait=True, kubernetes_version="1.30", out=io.StringIO(), err=err)
    assert code == commands.EXIT_USAGE
    assert "no pinned control plane for Kubernetes '1.30'" in err.getvalue()


def test_up_of_an_unknown_minor_exits_2_before_building_anything(tmp_path: Path) -> None:
    err = io.StringIO()
    settings = cluster.ClusterSettings(directory=tmp_path / "plane", kubernetes_version="2.0")
    assert commands.up(settings, out=io.StringIO(), err=err) == commands.EXIT_USAGE
    assert "no pinned control plane for Kubernetes '2.0'" in err.getvalue()


def test_only_a_plane_with_the_beta_gang_api_is_asked_for_it() -> None:
    # 1.35's apiserver has no scheduling.k8s.io/v1beta1 and refuses to start when asked for it.
    assert cluster.gang_api_flags("v1.35.4") == ()
    assert cluster.runtime_config_flags("v1.35.4") == ()
    assert cluster.gang_api_flags("v1.37.2") == ("--feature-gates=GenericWorkload=true",)
    assert cluster.runtime_config_flags("v1.37.2") == ("--runtime-config=scheduling.k8s.io/v1beta1=true",)


def test_the_policy_demo_on_a_plane_without_native_gangs_says_why_and_what_to_run_instead(
    tmp_path: Path,
) -> None:
    state = write_state(tmp_path / "plane", [])
    message = demorun._lacks_native_gangs(dataclasses.replace(state, kubernetes_version="v1.35.4"))
    assert message is not None
    assert "native PodGroups (scheduling.k8s.io/v1beta1) unavailable (needs 1.37+)" in message
    assert "`dev demo --kueue`" in message
    assert demorun._lacks_native_gangs(state) is None  # v1.37.2


def test_the_scheduler_gets_a_configuration_file_only_when_a_backoff_is_set(tmp_path: Path) -> None:
    ports = {"kube-scheduler": 10259}
    stock = cluster._scheduler_argv(tmp_path, tmp_path, ports, "1.37.2")
    assert not [flag for flag in stock if flag.startswith("--config")]
    assert not (tmp_path / "scheduler-config.yaml").exists()

    tuned = cluster._scheduler_argv(tmp_path, tmp_path, ports, "1.37.2", pod_max_backoff_seconds=1)
    assert f"--config={tmp_path / 'scheduler-config.yaml'}" in tuned
    config = yaml.safe_load((tmp_path / "scheduler-config.yaml").read_text())
    assert config["kind"] == "KubeSchedulerConfiguration"
    assert config["podMaxBackoffSeconds"] == 1
    # With a file the scheduler ignores --kubeconfig: the file must name it.
    assert config["clientConnection"]["kubeconfig"] == str(tmp_path / "kubeconfigs" / "scheduler.kubeconfig")
