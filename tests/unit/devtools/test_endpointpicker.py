"""The Gateway API Inference Extension's endpoint picker for the dev cluster: its pinned build, the
InferencePool CRD it installs, and its command line."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from vk_devtools.devcluster import commands, endpointpicker, envoygateway, helm, traffic
from vk_devtools.devcluster.building import read_pins

pytestmark = pytest.mark.unit

CRD_NAME = "inferencepools.inference.networking.k8s.io"


def test_the_build_pins_the_last_full_endpoint_picker_in_a_module_without_code(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    build = endpointpicker.ENDPOINT_PICKER
    assert sorted(path.name for path in build.gomod_dir.iterdir()) == ["go.mod", "go.sum"]
    assert read_pins(build).version(endpointpicker.MODULE) == endpointpicker.VERSION == "v1.5.0"
    [component] = build.components
    assert component.binary == "epp"
    assert component.package == "sigs.k8s.io/gateway-api-inference-extension/cmd/epp"
    assert component.version_stamp is not None
    monkeypatch.setattr(endpointpicker, "_tag_commit", lambda version: f"commit-of-{version}")
    assert component.version_stamp.variables("v1.5.0") == {
        "sigs.k8s.io/gateway-api-inference-extension/version.CommitSHA": "commit-of-v1.5.0",
        "sigs.k8s.io/gateway-api-inference-extension/version.BuildRef": "v1.5.0",
    }
    builds = commands.BUILDS
    assert builds.index(envoygateway.ENVOY_GATEWAY) < builds.index(build) < builds.index(helm.HELM)


def _pinned_module_in_cache() -> Path:
    """The pinned module's folder in the Go module cache; the test is skipped when it is not there
    (a unit test downloads nothing)."""
    go = shutil.which("go")
    if go is None:
        pytest.skip("go is not on PATH")
    cache = subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True, check=True).stdout
    folder = Path(cache.strip()) / f"{endpointpicker.MODULE}@{endpointpicker.VERSION}"
    if not (folder / endpointpicker.CRD_FILE).is_file():
        pytest.skip(f"{endpointpicker.MODULE}@{endpointpicker.VERSION} is not in the Go module cache")
    return folder


def test_the_pinned_module_s_crd_is_the_v1_inference_pool_with_a_required_picker() -> None:
    [crd] = endpointpicker.inference_pool_crds(_pinned_module_in_cache())
    assert crd["metadata"]["name"] == CRD_NAME
    assert crd["spec"]["group"] == "inference.networking.k8s.io"
    assert crd["spec"]["names"]["kind"] == "InferencePool"
    [version] = crd["spec"]["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1", True, True)
    assert "endpointPickerRef" in version["schema"]["openAPIV3Schema"]["properties"]["spec"]["required"]


def test_only_custom_resource_definitions_are_read(tmp_path: Path) -> None:
    path = tmp_path / endpointpicker.CRD_FILE
    path.parent.mkdir(parents=True)
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition"}
    path.write_text(yaml.safe_dump_all([None, {"kind": "ValidatingAdmissionPolicy"}, crd]))
    assert endpointpicker.inference_pool_crds(tmp_path) == [crd]
    path.write_text(yaml.safe_dump({"kind": "ConfigMap"}))
    with pytest.raises(RuntimeError, match="no CustomResourceDefinition"):
        endpointpicker.inference_pool_crds(tmp_path)


def test_the_crd_is_applied_server_side_then_awaited(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    crd: dict[str, Any] = {"kind": "CustomResourceDefinition", "metadata": {"name": CRD_NAME}}
    monkeypatch.setattr(endpointpicker, "inference_pool_crds", lambda: [crd])
    calls: list[tuple[str, ...]] = []

    def kubectl(_bin_dir: Path, _kubeconfig: Path, *arguments: str) -> str:
        calls.append(arguments)
        return ""

    monkeypatch.setattr(traffic, "kubectl_apply", kubectl)
    names = endpointpicker.install_crds(Path("/bin"), Path("/kubeconfig"), tmp_path / "crds")
    assert names == [CRD_NAME]
    [applied] = (tmp_path / "crds").iterdir()
    assert list(yaml.safe_load_all(applied.read_text())) == [crd]
    assert calls == [
        ("apply", "--server-side", "--force-conflicts", "-f", str(applied)),
        ("wait", "--for=condition=Established", "--timeout=60s", f"crd/{CRD_NAME}"),
    ]


def test_the_picker_serves_one_pool_and_finds_the_plane_through_its_environment() -> None:
    argv = endpointpicker.picker_argv(Path("/cache/bin/epp"), pool_name="tokens", pool_namespace="demo")
    assert argv == [
        "/cache/bin/epp",
        "--pool-name=tokens",
        "--pool-namespace=demo",
        "--tracing=false",
        "--metrics-endpoint-auth=false",
        "--enable-pprof=false",
        "--zap-log-level=info",
        "--refresh-metrics-interval=250ms",
        "--grpc-port=9002",
        "--grpc-health-port=9003",
        "--metrics-port=9090",
    ]
    assert not any(argument.startswith("--kubeconfig") for argument in argv)  # the EPP has no such flag
    assert not any("secure-serving" in argument for argument in argv)  # on, its default


def test_each_picker_gets_ports_of_its_own() -> None:
    """Pods of a `local` node share the host's network, and the picker binds every interface."""
    argv = endpointpicker.picker_argv(
        Path("epp"), pool_name="p", pool_namespace="n", grpc_port=1, health_port=2, metrics_port=3
    )
    assert argv[-3:] == ["--grpc-port=1", "--grpc-health-port=2", "--metrics-port=3"]


def test_a_pool_names_its_picker_whose_pod_runs_on_the_node_given_at_ports_of_its_own() -> None:
    ports = endpointpicker.PickerPorts(grpc=41001, health=41002, metrics=41003)
    pool, deployment, service = endpointpicker.pool_objects(
        namespace="ml",
        pool="chat-pool",
        app="chat",
        target_port=8080,
        node="local-gpu",
        binary=Path("/cache/bin/epp"),
        kubeconfig=Path("/plane/kubeconfig"),
        ports=ports,
        fail_open=True,
    )
    assert pool["spec"]["selector"] == {"matchLabels": {"app": "chat"}}
    assert pool["spec"]["endpointPickerRef"] == {
        "name": "chat-pool-epp",
        "port": {"number": 9002},
        "failureMode": "FailOpen",
    }
    spec = deployment["spec"]["template"]["spec"]
    assert spec["nodeName"] == "local-gpu"
    (container,) = spec["containers"]
    assert container["env"] == [{"name": "KUBECONFIG", "value": "/plane/kubeconfig"}]
    assert "--grpc-port=41001" in container["command"]
    assert service["metadata"]["name"] == "chat-pool-epp"
    assert service["spec"]["ports"] == [{"name": "grpc", "port": 9002, "targetPort": "grpc"}]
