"""The interconnect exporter's pod for a `local` node: the real command, a path or a hostPath to a tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from vk_devtools.standins import interconnect
from vk_provider.cli import parse_command_line

pytestmark = pytest.mark.unit


def test_the_pod_runs_the_exporter_command_on_the_tree_given(tmp_path: Path) -> None:
    pod = interconnect.exporter_pod(
        "ic-gpu-a", "gpu-a", sysfs_root=tmp_path, dcgm_exporter_url="http://127.1.0.5:9400/metrics"
    )
    assert pod["spec"]["nodeName"] == "gpu-a"
    assert pod["metadata"]["labels"] == interconnect.EXPORTER_LABELS
    [container] = pod["spec"]["containers"]
    assert container["image"] == interconnect.INTERCONNECT_EXPORTER_IMAGE
    assert "command" not in container
    assert "volumes" not in pod["spec"]
    entrypoint = interconnect.INTERCONNECT_EXPORTER_ENTRYPOINT
    assert entrypoint[1:] == ("-m", "vk_provider", "interconnect-exporter")
    args = [arg.replace("$(POD_IP)", "127.1.0.9") for arg in container["args"]]
    _, arguments = parse_command_line([*entrypoint[3:], *args], environ={})
    assert arguments.sysfs_root == tmp_path
    assert (arguments.listen_address, arguments.port) == ("127.1.0.9", interconnect.EXPORTER_PORT)
    assert arguments.dcgm_exporter_url == "http://127.1.0.5:9400/metrics"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"


def test_mounted_the_tree_is_a_read_only_host_path_read_where_the_daemonset_reads_sys(tmp_path: Path) -> None:
    pod = interconnect.exporter_pod("ic", "gpu-a", sysfs_root=tmp_path, mount=True, labels={"t": "1"})
    [container] = pod["spec"]["containers"]
    assert f"--sysfs-root={interconnect.HOST_SYS_MOUNT}" in container["args"]
    assert container["volumeMounts"] == [{"name": "sys", "mountPath": "/host/sys", "readOnly": True}]
    assert pod["spec"]["volumes"] == [
        {"name": "sys", "hostPath": {"path": str(tmp_path), "type": "Directory"}}
    ]
    assert pod["metadata"]["labels"]["t"] == "1"
