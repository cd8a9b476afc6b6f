"""The kustomize component's DaemonSet runs the command the code has, where the code expects it.

The chart renders the same DaemonSet (tests/integration/test_chart.py compares them with Helm)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from vk_provider.cli import parse_command_line
from vk_provider.interconnect.names import POD_LABELS

pytestmark = pytest.mark.unit

COMPONENT = Path(__file__).parents[3] / "manifests" / "components" / "interconnect-exporter"


def daemonset() -> dict[str, Any]:
    [item] = [
        item for item in yaml.safe_load_all((COMPONENT / "interconnect-exporter.yaml").read_text()) if item
    ]
    assert item["kind"] == "DaemonSet"
    return dict(item)


def test_the_component_lists_its_daemonset() -> None:
    kustomization = yaml.safe_load((COMPONENT / "kustomization.yaml").read_text())
    assert kustomization["kind"] == "Component"
    assert kustomization["resources"] == ["interconnect-exporter.yaml"]


def test_the_pods_parse_as_the_command_reads_the_mounted_sys_and_serve_what_is_probed() -> None:
    item = daemonset()
    assert item["spec"]["selector"]["matchLabels"] == POD_LABELS
    pod = item["spec"]["template"]
    assert pod["metadata"]["labels"] == POD_LABELS
    spec = pod["spec"]
    [container] = spec["containers"]
    _, arguments = parse_command_line(container["args"], environ={})
    assert arguments.command == "interconnect-exporter"
    [mount] = container["volumeMounts"]
    assert (mount["mountPath"], mount["readOnly"]) == (str(arguments.sysfs_root), True)
    [volume] = spec["volumes"]
    assert volume == {"name": mount["name"], "hostPath": {"path": "/sys", "type": "Directory"}}
    assert container["ports"] == [{"name": "metrics", "containerPort": arguments.port}]
    probed = {
        container[probe]["httpGet"]["path"] for probe in ("startupProbe", "livenessProbe", "readinessProbe")
    }
    assert probed == {"/healthz", "/readyz"}


def test_the_pods_need_no_api_and_run_anywhere_they_are_asked() -> None:
    spec = daemonset()["spec"]["template"]["spec"]
    assert spec["automountServiceAccountToken"] is False
    assert "serviceAccountName" not in spec
    assert spec["tolerations"] == [{"operator": "Exists"}]
    assert spec["securityContext"]["runAsNonRoot"] is True
    [container] = spec["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
