"""Settings: defaults < file < environment < flags, and clear errors naming the setting and source."""

from __future__ import annotations

from pathlib import Path

import pytest

from vk_provider.node.settings import NodeSettings, SettingsError, Taint, load_settings


def test_each_layer_overrides_the_one_below(tmp_path: Path) -> None:
    config = tmp_path / "node.yaml"
    config.write_text("node_name: from-file\nprovider: local\nkubelet_port: 10260\ncapacity: {cpu: '8'}\n")
    environ = {"VK_PROVIDER_NODE_NAME": "from-env", "VK_PROVIDER_CONCURRENT_POD_RECONCILES": "7"}
    settings = load_settings(
        config_file=config, environ=environ, flags={"node_name": "from-flag", "labels": None}
    )
    assert settings.node_name == "from-flag"
    assert settings.concurrent_pod_reconciles == 7
    assert settings.provider == "local"
    assert settings.kubelet_port == 10260
    assert settings.capacity == {"cpu": "8"}


def test_flag_lists_become_mappings_and_taints_parse() -> None:
    settings = load_settings(
        config_file=None,
        environ={},
        flags={
            "labels": ["pool=burst", "tier=gpu"],
            "capacity": ["nvidia.com/gpu=8", "cpu=64"],
            "taint": "gpu=yes:NoSchedule",
            "addresses": ["10.0.0.7"],
        },
    )
    assert settings.labels == {"pool": "burst", "tier": "gpu"}
    assert settings.capacity == {"nvidia.com/gpu": "8", "cpu": "64"}
    assert settings.effective_taint == Taint("gpu", "yes", "NoSchedule")
    assert settings.host_ip == "10.0.0.7"


def test_the_default_taint_is_ours_alone_and_follows_the_provider() -> None:
    assert NodeSettings(provider="sagemaker").effective_taint == Taint(
        "vk-provider.dev/virtual-node", "sagemaker", "NoSchedule"
    )


def test_a_label_setting_cannot_claim_or_unset_the_virtual_node_label() -> None:
    with pytest.raises(SettingsError, match=r"command line.*node-restriction.kubernetes.io/vk-provider"):
        load_settings(
            config_file=None,
            environ={},
            flags={"labels": ["pool=burst", "node-restriction.kubernetes.io/vk-provider=false"]},
        )


def test_the_api_ceiling_is_off_unless_set_and_zero_means_none() -> None:
    assert (NodeSettings().api_qps, NodeSettings().api_burst) == (0, 0)
    settings = load_settings(config_file=None, environ={}, flags={"api_qps": "100", "api_burst": "0"})
    assert (settings.api_qps, settings.api_burst) == (100, 0)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"taint": "gpu:NoSchedule"}, "taint 'gpu:NoSchedule' must look like KEY=VALUE:EFFECT"),
        ({"taint": "gpu=yes:Sometimes"}, "EFFECT one of NoSchedule"),
        ({"capacity": ["nvidia.com/gpu=lots"]}, "is not a Kubernetes quantity"),
        ({"labels": ["novalue"]}, "label 'novalue' must look like KEY=VALUE"),
        ({"kubelet_port": 70000}, "kubelet_port 70000 is out of range"),
        ({"addresses": ["not-an-ip"]}, "addresses"),
        ({"lease_renew_interval_seconds": "0"}, "must be greater than zero"),
        ({"api_qps": "-1"}, "api_qps must be 0 (none) or more"),
        ({"api_burst": "-5"}, "api_burst must be 0 (none) or more"),
    ],
)
def test_bad_values_are_rejected_with_the_setting_and_its_source(
    flags: dict[str, object], message: str
) -> None:
    with pytest.raises(SettingsError, match="command line") as error:
        load_settings(config_file=None, environ={}, flags=flags)
    assert message in str(error.value)


def test_an_unknown_key_in_the_file_is_named(tmp_path: Path) -> None:
    config = tmp_path / "node.yaml"
    config.write_text("node_nmae: typo\n")
    with pytest.raises(SettingsError, match=r"unknown setting 'node_nmae'"):
        load_settings(config_file=config, environ={}, flags={})


def test_a_file_that_is_not_yaml_or_missing_is_a_clear_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("node_name: [unclosed\n")
    with pytest.raises(SettingsError, match="is not valid YAML"):
        load_settings(config_file=broken, environ={}, flags={})
    with pytest.raises(SettingsError, match="cannot read"):
        load_settings(config_file=tmp_path / "absent.yaml", environ={}, flags={})


def test_namespaces_come_from_a_repeated_flag_a_comma_list_or_a_file_list(tmp_path: Path) -> None:
    flags = load_settings(config_file=None, environ={}, flags={"namespaces": ["team-a,team-b", "team-a"]})
    assert flags.namespaces == ("team-a", "team-b")
    environment = load_settings(config_file=None, environ={"VK_PROVIDER_NAMESPACES": "x, y"}, flags={})
    assert environment.namespaces == ("x", "y")
    config = tmp_path / "node.yaml"
    config.write_text("namespaces: [inference]\n")
    assert load_settings(config_file=config, environ={}, flags={}).namespaces == ("inference",)
    assert load_settings(config_file=None, environ={}, flags={}).namespaces == ()


def test_a_namespace_that_cannot_exist_is_refused() -> None:
    with pytest.raises(SettingsError, match=r"namespaces: 'Team_A' is not a valid namespace name"):
        load_settings(config_file=None, environ={}, flags={"namespaces": ["Team_A"]})
