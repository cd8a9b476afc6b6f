"""`dev up --in-cluster --release DIST`: vk-provider installed from a release's artifacts, as a user would.

`make release` writes `dist/` (`vk_devtools.release`): the chart packaged with the image pinned by
digest, and `install.yaml`, the manifests rendered with the same pin. With `--release`, the in-cluster
stack comes from those instead of the source tree: `helm install` of the packaged chart, with the
example values of the burst node's provider that the package carries (`examples/runpod.yaml` for the
RunPod stand-in), plus what this one-host cluster needs and no real cluster would:

- every Pod shares the host's network, so the router, the controller and the node daemon listen on
  their own Pod address (`$(POD_IP)`) instead of 0.0.0.0;
- nothing approves kubelet serving certificates here, so the node approves its own (the
  `self-approve` component's ClusterRole, bound to the node's ServiceAccount);
- the provider's endpoint is the stand-in on loopback (its key in the Secret the example names), or,
  for a `local` burst node, a folder of the cluster keeps its workloads, as a cloud would.

`local` nodes run no images: the home node maps vk-provider's repository, whatever its tag or digest,
to this Python (`localnode.IMAGE_ENTRYPOINTS`); the release's tests check that the image archive holds
the same Python packages as the Python that runs here.
"""

from __future__ import annotations

import dataclasses
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import yaml

from vk_devtools.devcluster import incluster, localnode, runpodstandin
from vk_devtools.devcluster.helm import helm_binary
from vk_devtools.devcluster.traffic import MANIFESTS, kubectl_apply

RELEASE_NAME = "vk"
NAMESPACE = incluster.NAMESPACE
NODE_DEPLOYMENT = f"{localnode.AWAY.name}-node"
"""The chart names each node's objects `<name>-node`."""
DEPLOYMENTS = (NODE_DEPLOYMENT, incluster.ROUTER_DEPLOYMENT, incluster.CONTROLLER_DEPLOYMENT)
RUNPOD_EXAMPLE = "runpod.yaml"
SELF_APPROVE = MANIFESTS / "components" / "self-approve" / "rbac-self-approve.yaml"
HELM_TIMEOUT_SECONDS = 600


class ReleaseFolderError(RuntimeError):
    """The folder is not a release `make release` wrote; the message says what is missing."""


@dataclasses.dataclass(frozen=True)
class ReleaseArtifacts:
    """What the install uses from a release folder."""

    folder: Path
    chart: Path
    install_manifest: Path
    digest: str

    @classmethod
    def load(cls, folder: Path) -> ReleaseArtifacts:
        charts = sorted(folder.glob("vk-provider-*.tgz"))
        digests = sorted(folder.glob("vk-provider-*.image-digest"))
        manifest = folder / "install.yaml"
        missing = [
            what
            for what, found in (
                ("the packaged chart (vk-provider-<version>.tgz)", len(charts) == 1),
                ("the image digest (vk-provider-<version>.image-digest)", len(digests) == 1),
                ("install.yaml", manifest.is_file()),
            )
            if not found
        ]
        if missing:
            raise ReleaseFolderError(f"{folder} lacks {', '.join(missing)}: run `make release` first")
        return cls(folder, charts[0], manifest, digests[0].read_text().strip())

    def example_values(self, name: str) -> dict[str, Any]:
        """One of the chart's example values files, read from the package itself."""
        with tarfile.open(self.chart) as package:
            member = package.extractfile(f"vk-provider/examples/{name}")
            if member is None:
                raise ReleaseFolderError(f"{self.chart} has no examples/{name}")
            loaded: dict[str, Any] = yaml.safe_load(member.read())
        return loaded


def _pod_address(name: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}


def host_network_values() -> dict[str, Any]:
    """Router and controller on their Pod's address: the Pods of this cluster share one network."""
    component = {"listenAddress": "$(POD_IP)", "extraEnv": [_pod_address("POD_IP")]}
    return {"router": dict(component), "controller": dict(component)}


def _node_on_this_host(node: dict[str, Any]) -> dict[str, Any]:
    """The burst node's entry made to run here: its name, labels and capacity the demo's, its
    kubelet API on its Pod's address, its serving certificate approved by itself."""
    settings = dict(node.get("settings") or {})
    settings["labels"] = {**(settings.get("labels") or {}), **localnode.AWAY.labels}
    settings["kubelet_csr_self_approve"] = True
    return {
        **node,
        "name": localnode.AWAY.name,
        "capacity": localnode.CAPACITY,
        "settings": settings,
        "extraEnv": [*(node.get("extraEnv") or []), _pod_address("VK_PROVIDER_KUBELET_BIND_ADDRESS")],
    }


def runpod_standin_values(release: ReleaseArtifacts, directory: Path) -> dict[str, Any]:
    """The package's RunPod example, its one node pointed at the running stand-in."""
    example = release.example_values(RUNPOD_EXAMPLE)
    (node,) = example["nodes"]
    addresses = runpodstandin.read_addresses(directory)
    if addresses is None:
        raise RuntimeError(f"the RunPod stand-in has not written {runpodstandin.addresses_file(directory)}")
    node = _node_on_this_host(node)
    node["providerConfig"] = {
        **node["providerConfig"],
        "api_url": addresses.api_url,
        "proxy_url_template": addresses.proxy_url_template,
        "gpu_type": runpodstandin.GPU_TYPE,
        "capacity": localnode.GPU_CAPACITY,
        **runpodstandin.RUNPOD_SETTINGS,
    }
    node["settings"]["status_poll_interval_seconds"] = runpodstandin.STATUS_POLL_INTERVAL_SECONDS
    return {"nodes": [node], **host_network_values()}


def local_node_values(directory: Path, group: int) -> dict[str, Any]:
    """A `local` burst node, as `dev up --in-cluster` runs from the manifests: its workloads kept in
    a folder of the cluster, so a replacement daemon Pod adopts them."""
    settings = incluster.node_settings(group)
    volume = {
        "name": "provider-state",
        "hostPath": {"path": str(incluster.provider_folder(directory)), "type": "DirectoryOrCreate"},
    }
    node = _node_on_this_host(
        {
            "provider": "local",
            "providerConfig": settings["provider_config"],
            "extraVolumes": [volume],
            "extraVolumeMounts": [{"name": "provider-state", "mountPath": incluster.PROVIDER_STATE_PATH}],
        }
    )
    return {"nodes": [node], **host_network_values()}


def runpod_credentials(directory: Path, release: ReleaseArtifacts) -> tuple[str, dict[str, str]]:
    """The Secret the RunPod example names, holding the stand-in's key: (name, {key: value})."""
    (node,) = release.example_values(RUNPOD_EXAMPLE)["nodes"]
    secret = node["existingSecret"]
    (key,) = secret["keys"]
    return str(secret["name"]), {str(key): runpodstandin.api_key_file(directory).read_text().strip()}


def helm(kubeconfig: Path, *arguments: str, timeout_seconds: float = HELM_TIMEOUT_SECONDS) -> str:
    """Run the built Helm against the plane; its output, or RuntimeError with what it said."""
    command = [str(helm_binary()), f"--kubeconfig={kubeconfig}", *arguments]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_seconds, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"`helm {' '.join(arguments)}` failed: {(done.stderr or done.stdout).strip()}")
    return done.stdout


def write_values(directory: Path, values: dict[str, Any]) -> Path:
    path = directory / "release" / "values.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(values, sort_keys=False))
    return path


def install_chart(
    bin_dir: Path,
    kubeconfig: Path,
    directory: Path,
    release: ReleaseArtifacts,
    *,
    group: int,
    on_runpod_standin: bool,
    timeout_seconds: float,
) -> str:
    """`helm install` of the release's chart with the burst node as described above; waits for every
    Deployment and the burst node to be Ready. Returns what Helm printed (its NOTES)."""
    kubectl_apply(bin_dir, kubeconfig, "create", "namespace", NAMESPACE)
    if on_runpod_standin:
        name, data = runpod_credentials(directory, release)
        literals = [f"--from-literal={key}={value}" for key, value in data.items()]
        kubectl_apply(bin_dir, kubeconfig, "create", "secret", "generic", name, "-n", NAMESPACE, *literals)
        values = runpod_standin_values(release, directory)
    else:
        incluster.provider_folder(directory).mkdir(parents=True, exist_ok=True)
        values = local_node_values(directory, group)
    kubectl_apply(bin_dir, kubeconfig, "apply", "-f", str(SELF_APPROVE))
    # The component binds the kustomize ServiceAccount's name, which the chart's default keeps.
    notes = helm(
        kubeconfig,
        "install",
        RELEASE_NAME,
        str(release.chart),
        "--namespace",
        NAMESPACE,
        "--values",
        str(write_values(directory, values)),
        "--wait",
        f"--timeout={int(timeout_seconds)}s",
    )
    incluster.wait_for_burst_node(bin_dir, kubeconfig, timeout_seconds=timeout_seconds)
    return notes
