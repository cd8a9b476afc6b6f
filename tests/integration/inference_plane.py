"""The home side of an `inferencepool` migration rig: an InferencePool over the rig's token servers, and
its endpoint picker (GIE's EPP, built from the pinned module) as a pod on the rig's home node
(`endpointpicker.pool_objects`, as `dev up --data-plane inferencepool` makes them).

The `local` node runs the picker's command as a process of this host, like the token servers; its ports
bind every address of the host, so each picker gets free ports of its own. It reads the plane through
`KUBECONFIG`, the plane's admin kubeconfig: the tests run it like any pod, not as a ServiceAccount of ours.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
from pathlib import Path

from vk_devtools.devcluster.building import BinaryCache
from vk_devtools.devcluster.endpointpicker import ENDPOINT_PICKER, PickerPorts, pool_objects
from vk_devtools.devcluster.ports import PortPicker
from vk_provider.kit.kube import KubeApi, resource_path

POOL = "chat-pool"
PICKER = f"{POOL}-epp"


@dataclasses.dataclass
class PickerPlane:
    namespace: str
    ports: PickerPorts

    def _pids(self) -> list[int]:
        found = subprocess.run(
            ["pgrep", "-f", "--", f"--pool-namespace={self.namespace}( |$)"],
            capture_output=True,
            text=True,
            check=False,
        )
        return [int(pid) for pid in found.stdout.split()]

    def signal(self, number: signal.Signals) -> int:
        """Send `number` to the picker's process(es); how many there were."""
        pids = self._pids()
        for pid in pids:
            os.kill(pid, number)
        return len(pids)


def picker_binary() -> Path:
    return BinaryCache.for_build(ENDPOINT_PICKER).ensure(wait=True, out=sys.stderr) / "epp"


async def start_picker(
    api: KubeApi, namespace: str, *, app: str, node_name: str, kubeconfig: Path, fail_open: bool = False
) -> PickerPlane:
    """The InferencePool `POOL` over the pods labelled app=`app` (port 8080), its picker's Deployment
    on `node_name` and Service `PICKER`. Returns at once: the rig waits for what it needs."""
    free = PortPicker()
    plane = PickerPlane(namespace, PickerPorts(grpc=free.pick(), health=free.pick(), metrics=free.pick()))
    objects = pool_objects(
        namespace=namespace,
        pool=POOL,
        app=app,
        target_port=8080,
        node=node_name,
        binary=picker_binary(),
        kubeconfig=kubeconfig,
        ports=plane.ports,
        fail_open=fail_open,
    )
    for manifest in objects:
        group, _, version = manifest["apiVersion"].rpartition("/")
        plural = {"InferencePool": "inferencepools", "Deployment": "deployments", "Service": "services"}
        path = resource_path(
            f"{group}/{version}" if group else version, plural[manifest["kind"]], namespace=namespace
        )
        await api.create(path, manifest)
    return plane
