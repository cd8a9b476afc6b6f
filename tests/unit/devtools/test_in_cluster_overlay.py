"""`dev up --in-cluster`: the overlay over the real manifests, the node's settings, the router addresses."""

from __future__ import annotations

import dataclasses
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.devtools import COMPONENTS, stopped_record, write_state
from vk_devtools.commandline import in_cluster_refusal
from vk_devtools.devcluster import cluster, commands, hints, incluster, localnode
from vk_devtools.devcluster.traffic import MANIFESTS
from vk_provider.cli import build_parser, main
from vk_provider.node.settings import load_settings


def _documents(path: Path) -> list[dict[str, Any]]:
    return [document for document in yaml.safe_load_all(path.read_text()) if document]


def _deployment(name: str) -> dict[str, Any]:
    for path in [*(MANIFESTS / "base").glob("*.yaml"), *(MANIFESTS / "traffic").glob("*.yaml")]:
        for document in _documents(path):
            if document.get("kind") == "Deployment" and document["metadata"]["name"] == name:
                return document
    raise AssertionError(f"no Deployment {name} in manifests/")


def _at(document: dict[str, Any], pointer: str) -> Any:
    value: Any = document
    for part in pointer.strip("/").split("/"):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def test_the_argument_patches_test_what_the_manifests_really_say(tmp_path: Path) -> None:
    """Each listen-address patch tests the argument it replaces: the manifests must still have it."""
    patches = incluster.kustomization(tmp_path)["patches"]
    tested = 0
    for patch in patches:
        deployment = _deployment(patch["target"]["name"])
        for operation in json.loads(patch["patch"]):
            if operation["op"] == "test":
                assert _at(deployment, operation["path"]) == operation["value"]
                tested += 1
    assert tested == 3  # the router's --listen and --admin-listen, the controller's --admin-listen


def _patched(document: dict[str, Any], operations: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON patch operations the overlay uses (test, replace, add; `-` appends), applied."""
    patched = json.loads(json.dumps(document))
    for operation in operations:
        if operation["op"] == "test":
            continue
        *parents, last = operation["path"].strip("/").split("/")
        parent = _at(patched, "/".join(parents))
        if isinstance(parent, list) and last == "-":
            parent.append(operation["value"])
        elif isinstance(parent, list):
            parent[int(last)] = operation["value"]
        else:
            parent[last] = operation["value"]
    return patched


def test_every_variable_the_patched_arguments_name_is_still_in_the_env(tmp_path: Path) -> None:
    """An `add` at `env` replaces what the manifest has (the controller's POD_NAME, its Lease identity):
    `$(POD_NAME)` would then stay unexpanded, and every replica would claim the same identity."""
    for patch in incluster.kustomization(tmp_path)["patches"]:
        deployment = _patched(_deployment(patch["target"]["name"]), json.loads(patch["patch"]))
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        defined = {variable["name"] for variable in container.get("env") or []}
        named = {
            name for argument in container.get("args") or [] for name in re.findall(r"\$\((\w+)\)", argument)
        }
        assert named <= defined, (patch["target"]["name"], named - defined)


def test_the_node_pod_settings_load_as_the_daemon_loads_them(tmp_path: Path) -> None:
    folder = incluster.write_overlay(tmp_path, 9)
    environ = {"VK_PROVIDER_ADDRESSES": "198.18.3.7", "VK_PROVIDER_KUBELET_BIND_ADDRESS": "198.18.3.7"}
    settings = load_settings(config_file=folder / "node.yaml", environ=environ, flags={})
    assert settings.node_name == localnode.AWAY.name
    assert settings.provider == "local"
    assert settings.kubelet_bind_address == "198.18.3.7"
    assert settings.addresses == ("198.18.3.7",)
    assert settings.kubeconfig is None  # the in-cluster ServiceAccount
    assert settings.provider_config["address_range"] == localnode.AWAY.subnet(9) == "198.19.21.0/24"
    # The provider's workloads outlive the daemon's Pod: kept in the cluster folder.
    assert incluster.provider_folder(tmp_path).is_dir()
    kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text())
    assert [(folder / base).resolve() for base in kustomization["resources"]] == [
        MANIFESTS / "base",
        MANIFESTS / "traffic",
    ]
    assert str(incluster.provider_folder(tmp_path)) in json.dumps(kustomization)


def _pod(address: str | None, *, ready: bool, deleting: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": f"router-{address}"}
    if deleting:
        metadata["deletionTimestamp"] = "2026-12-06T00:00:00Z"
    status: dict[str, Any] = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    if address:
        status["podIP"] = address
    return {"metadata": metadata, "status": status}


def test_router_urls_are_the_ready_pods_addresses_only() -> None:
    pods = [
        _pod("198.18.2.9", ready=True),
        _pod("198.18.2.4", ready=True),
        _pod("198.18.2.5", ready=False),
        _pod("198.18.2.6", ready=True, deleting=True),
        _pod(None, ready=True),
    ]
    assert incluster.router_urls(pods) == ["http://198.18.2.4:8080", "http://198.18.2.9:8080"]


@pytest.mark.parametrize(
    "options",
    [["--no-demo"], ["--no-local-node"], ["--data-plane", "envoy"], ["--burst-provider", "runpod-standin"]],
)
def test_in_cluster_refuses_options_it_cannot_honour(
    options: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "plane"
    assert main(["dev", "up", "--in-cluster", "--dir", str(folder), *options]) == 2
    assert "--in-cluster" in capsys.readouterr().err
    assert not folder.exists()  # refused before anything was started or written


def test_release_needs_in_cluster_and_then_takes_the_runpod_stand_in(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "plane"
    assert main(["dev", "up", "--release", str(tmp_path), "--dir", str(folder)]) == 2
    assert "--release installs the stack as Pods: add --in-cluster" in capsys.readouterr().err
    assert not folder.exists()
    parser_arguments = ["dev", "up", "--in-cluster", "--release", str(tmp_path), "--data-plane", "envoy"]
    assert main([*parser_arguments, "--dir", str(folder)]) == 2
    assert not folder.exists()
    arguments = build_parser().parse_args(
        ["dev", "up", "--in-cluster", "--release", str(tmp_path), "--burst-provider", "runpod-standin"]
    )
    assert in_cluster_refusal(arguments) is None


def test_the_state_remembers_in_cluster_and_status_points_at_the_pods(tmp_path: Path) -> None:
    folder = tmp_path / "plane"
    state = write_state(folder, [stopped_record(folder, name) for name in COMPONENTS], stopped=True)
    dataclasses.replace(state, in_cluster=True).save()
    loaded = cluster.ClusterState.load(folder)
    assert loaded is not None
    assert loaded.in_cluster
    assert loaded.has_demo  # no router process: the router runs as Pods
    out = io.StringIO()
    commands.status(folder, out=out)
    pods = hints.dev(folder, "kubectl", "--", "get", "pods", "-n", incluster.NAMESPACE)
    assert f"the node daemon, router and controller run as Pods: {pods}" in out.getvalue()
    other = cluster.ClusterState.load(write_state(tmp_path / "other", []).directory)
    assert other is not None
    assert not other.in_cluster
