"""The interconnect exporter as a pod on a `local` node, reading a stand-in sysfs tree.

A `local` node runs no images: it maps `INTERCONNECT_EXPORTER_IMAGE` to
`INTERCONNECT_EXPORTER_ENTRYPOINT` (its `image_entrypoints` setting), which runs the real exporter,
`python -m vk_provider interconnect-exporter`, with the pod's `args`. `exporter_pod` builds the pod a
DaemonSet would make on that node, labelled as the chart's and the manifests' DaemonSet labels its pods,
so the policy finds it the same way. The tree (`vk_devtools.standins.sysfs.SysfsTree`) reaches it
either as a path argument (a `local` pod sees the host's files) or, on a node that binds volumes
(`mount_volumes`), as a hostPath mounted where a DaemonSet mounts the host's /sys.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vk_provider.interconnect.names import DEFAULT_PORT, POD_LABELS

INTERCONNECT_EXPORTER_IMAGE = "vk-provider/interconnect-exporter:0.1.0"
"""The image name an exporter pod uses; `local` nodes map it to `INTERCONNECT_EXPORTER_ENTRYPOINT`."""
INTERCONNECT_EXPORTER_ENTRYPOINT = (sys.executable, "-m", "vk_provider", "interconnect-exporter")
"""What that image's ENTRYPOINT would run: this Python's vk-provider, the command chosen."""
EXPORTER_PORT = DEFAULT_PORT
EXPORTER_LABELS = POD_LABELS
"""The DaemonSet's pod labels (manifests/components/interconnect-exporter, the chart)."""
HOST_SYS_MOUNT = "/host/sys"
"""Where the DaemonSet mounts the host's /sys."""


def exporter_pod(
    name: str,
    node: str,
    *,
    sysfs_root: Path | str,
    mount: bool = False,
    dcgm_exporter_url: str | None = None,
    interval_seconds: float = 1.0,
    port: int = EXPORTER_PORT,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """An exporter pod for `node` (bound by spec.nodeName, as a DaemonSet's pods are), listening on its
    pod IP. `sysfs_root`: the stand-in tree's root, given as `--sysfs-root` as is, or with `mount`
    mounted as a hostPath at `HOST_SYS_MOUNT` (read-only, as the DaemonSet mounts /sys) and read
    there. Its node must map `INTERCONNECT_EXPORTER_IMAGE`."""
    root = HOST_SYS_MOUNT if mount else str(sysfs_root)
    args = [
        f"--sysfs-root={root}",
        "--listen-address=$(POD_IP)",
        f"--port={port}",
        f"--interval-seconds={interval_seconds:g}",
    ]
    if dcgm_exporter_url is not None:
        args.append(f"--dcgm-exporter-url={dcgm_exporter_url}")
    container: dict[str, Any] = {
        "name": "exporter",
        "image": INTERCONNECT_EXPORTER_IMAGE,
        "args": args,
        "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        "ports": [{"name": "metrics", "containerPort": port}],
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": port}, "periodSeconds": 1},
    }
    spec: dict[str, Any] = {
        "nodeName": node,
        "tolerations": [{"operator": "Exists"}],  # as the DaemonSet: on tainted GPU nodes too
        "terminationGracePeriodSeconds": 5,
        "containers": [container],
    }
    if mount:
        container["volumeMounts"] = [{"name": "sys", "mountPath": HOST_SYS_MOUNT, "readOnly": True}]
        spec["volumes"] = [{"name": "sys", "hostPath": {"path": str(sysfs_root), "type": "Directory"}}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {**EXPORTER_LABELS, **(labels or {})}},
        "spec": spec,
    }
