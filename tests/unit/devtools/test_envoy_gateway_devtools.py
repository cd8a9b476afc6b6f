"""Envoy Gateway for the tests: its pinned build, its configuration and command line, and Debian's
programs unpacked from the cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from vk_devtools.devcluster import commands, debian, envoygateway
from vk_devtools.devcluster.building import read_pins

pytestmark = pytest.mark.unit


def test_the_build_pins_envoy_gateway_v1_9_1_in_a_module_without_code() -> None:
    build = envoygateway.ENVOY_GATEWAY
    assert sorted(path.name for path in build.gomod_dir.iterdir()) == ["go.mod", "go.sum"]
    assert read_pins(build).version(envoygateway.MODULE) == "v1.9.1"
    [component] = build.components
    assert component.package == "github.com/envoyproxy/gateway/cmd/envoy-gateway"
    assert component.version_stamp is not None
    stamped = component.version_stamp.variables("v1.9.1")
    assert stamped == {"github.com/envoyproxy/gateway/internal/cmd/version.envoyGatewayVersion": "v1.9.1"}
    assert build in commands.BUILDS  # `dev build`, hence the README's test command, builds it


def test_it_reads_the_plane_and_runs_envoys_on_this_host_with_our_folders(tmp_path: Path) -> None:
    home = envoygateway.EnvoyGatewayHome(tmp_path, "eg-system")
    provider = home.config()["provider"]
    assert isinstance(provider, dict)
    custom = provider["custom"]
    assert provider["type"] == "Custom"
    assert custom["resource"]["type"] == "Kubernetes"
    assert custom["resource"]["kubernetes"]["leaderElection"] == {"disable": True}
    assert custom["resource"]["kubernetes"]["proxyTopologyInjector"] == {"disable": True}
    assert custom["infrastructure"] == {
        "type": "Host",
        "host": {
            "configHome": str(tmp_path / "config"),
            "dataHome": str(tmp_path / "data"),
            "stateHome": str(tmp_path / "state"),
            "runtimeDir": str(tmp_path / "run"),
        },
    }


def test_the_server_runs_with_its_certificates_bound_on_the_fixed_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mount_point = tmp_path / "certs"
    monkeypatch.setattr(envoygateway, "CERTS_MOUNT_POINT", mount_point)  # not the host's /certs
    home = envoygateway.EnvoyGatewayHome(tmp_path, "eg-system")
    command = home.server_command(Path("/bin/envoy-gateway"), tmp_path / "kubeconfig")
    assert mount_point.is_dir()  # the empty mount point, made when missing
    assert command[:3] == [
        "env",
        f"KUBECONFIG={tmp_path / 'kubeconfig'}",
        "ENVOY_GATEWAY_NAMESPACE=eg-system",
    ]
    script, *script_arguments = command[5:]
    assert "mount --bind" in script
    assert script_arguments[1:3] == [str(home.certs), str(mount_point)]
    assert script_arguments[3:] == ["/bin/envoy-gateway", "server", "--config-path", str(home.config_path)]


def test_the_envoy_version_is_read_from_the_binary(tmp_path: Path) -> None:
    fake = tmp_path / "envoy"
    fake.write_text("#!/bin/sh\necho 'envoy  version: 9e55/1.40.0/Clean/RELEASE/BoringSSL'\n")
    fake.chmod(0o755)
    assert envoygateway.envoy_version(fake) == "1.40.0"
    fake.write_text("#!/bin/sh\necho 'something else'\n")
    with pytest.raises(envoygateway.EnvoyGatewaySetupError, match="cannot read a version"):
        envoygateway.envoy_version(fake)


def test_a_debian_program_already_unpacked_is_used_without_apt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VK_PROVIDER_CACHE_DIR", str(tmp_path))
    program = tmp_path / "debian" / "prometheus_2.42.0+ds-5+deb12u1_amd64" / "usr" / "bin" / "prometheus"
    program.parent.mkdir(parents=True)
    program.write_text("")

    def no_apt(package: str, into: Path) -> Path:
        raise AssertionError("apt was called")

    monkeypatch.setattr(debian, "_download", no_apt)
    assert debian.debian_program("prometheus", "usr/bin/prometheus") == program
