"""The chart's uninstall hook (`templates/uninstall-hook.yaml`): a pre-delete Job running the image's
`kubectl-offload uninstall`, made after its ServiceAccount and rights (hook weights), deleted once it
succeeded, and the rights it runs with are what the command needs and nothing more.

In the `manifests` group: its RBAC check applies cluster-wide objects next to the chart's others."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.integration.conftest import MANIFESTS_GROUP, Kubectl
from tests.integration.test_chart import CHART, MANIFESTS, NAMESPACE, Object, key, render
from tests.integration.test_manifests import can_i_as

pytestmark = MANIFESTS_GROUP

Helm = Callable[..., subprocess.CompletedProcess[str]]
HOOK_ACCOUNT = f"system:serviceaccount:{NAMESPACE}:vk-provider-uninstall"
HOOK_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Job"}


def hooks(rendered: list[Object]) -> dict[tuple[str, str, str], Object]:
    return {
        key(item): item
        for item in rendered
        if (item["metadata"].get("annotations") or {}).get("helm.sh/hook") == "pre-delete"
    }


def test_the_hook_job_runs_uninstall_after_its_rights_exist_and_goes_once_it_succeeded(helm: Helm) -> None:
    found = hooks(render(helm))
    assert {kind for kind, _, _ in found} == HOOK_KINDS
    job = found["Job", NAMESPACE, "vk-uninstall"]
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert "command" not in container  # the image's entrypoint, vk-provider
    assert container["args"] == [
        "migrate",
        "uninstall",
        "--timeout=270s",
        f"--controller-lease={NAMESPACE}/vk-provider-controller",
        # No node in the default values: none of another install's virtual nodes is waited for.
        "--virtual-nodes=node-restriction.kubernetes.io/vk-provider=true,kubernetes.io/hostname in "
        "(no_node_in_this_release)",
    ]
    assert job["spec"]["backoffLimit"] == 0
    assert job["spec"]["activeDeadlineSeconds"] == 330
    assert job["spec"]["template"]["spec"]["serviceAccountName"] == "vk-provider-uninstall"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    weights = {
        item_key: int(item["metadata"]["annotations"]["helm.sh/hook-weight"])
        for item_key, item in found.items()
    }
    job_weight = weights.pop(("Job", NAMESPACE, "vk-uninstall"))
    assert all(weight < job_weight for weight in weights.values()), weights
    for item in found.values():
        policy = item["metadata"]["annotations"]["helm.sh/hook-delete-policy"]
        assert policy == "before-hook-creation,hook-succeeded"


def test_the_command_the_hook_runs_is_kubectl_offload_uninstall() -> None:
    migrate = subprocess.run(
        [sys.executable, "-m", "vk_provider", "migrate", "uninstall", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    offload = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from vk_provider.cli import offload_main; "
            "sys.argv = ['kubectl-offload', 'uninstall', '--help']; offload_main()",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "--controller-lease" in migrate.stdout
    # The same options, said the same way (only the usage line's program name differs).
    assert migrate.stdout.split("\noptions:", 1)[1] == offload.stdout.split("\noptions:", 1)[1]


def test_the_hook_follows_its_values_and_can_be_turned_off(helm: Helm, tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    nodes = [{"name": "runpod-burst", "provider": "runpod"}, {"name": "remote", "provider": "kubernetes"}]
    values.write_text(yaml.safe_dump({"uninstall": {"timeoutSeconds": 900}, "nodes": nodes}))
    job = hooks(render(helm, "--values", str(values)))["Job", NAMESPACE, "vk-uninstall"]
    arguments = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--timeout=900s" in arguments
    # It waits for the pods of this release's nodes only.
    assert (
        "--virtual-nodes=node-restriction.kubernetes.io/vk-provider=true,kubernetes.io/hostname in "
        "(runpod-burst,remote)"
    ) in arguments
    values.write_text(yaml.safe_dump({"uninstall": {"enabled": False}}))
    assert hooks(render(helm, "--values", str(values))) == {}
    values.write_text(yaml.safe_dump({"uninstall": {"timeoutSeconds": 0}}))
    refused = helm("template", "vk", str(CHART), "--values", str(values), check=False)
    assert refused.returncode != 0
    assert "uninstall/timeoutSeconds" in refused.stderr, refused.stderr


@pytest.fixture(scope="module")
def hook_rbac_applied(
    helm: Helm, kubectl: Kubectl, offload_crd: None, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The hook's ServiceAccount and rights, applied as Helm would before the Job (left in place: the
    names are the hook's own)."""
    rbac = [item for item in hooks(render(helm)).values() if item["kind"] != "Job"]
    file = tmp_path_factory.mktemp("hook") / "rbac.yaml"
    file.write_text(yaml.safe_dump_all(rbac))
    kubectl("apply", "-f", str(MANIFESTS / "base" / "namespace.yaml"))
    kubectl("apply", "-f", str(file))


@pytest.mark.usefixtures("hook_rbac_applied")
def test_the_hook_may_do_what_uninstall_needs_and_nothing_more(kubectl: Kubectl) -> None:
    needed = [
        ("list", "offloads.offload.vk-provider.dev", None),
        ("get", "offloads.offload.vk-provider.dev", "ml"),
        ("patch", "offloads.offload.vk-provider.dev", "ml"),
        ("delete", "offloads.offload.vk-provider.dev", "ml"),
        ("list", "pods", None),
        ("list", "nodes", None),
    ]
    forbidden = [
        ("patch", "offloads.offload.vk-provider.dev/status", "ml"),
        ("delete", "deployments.apps", "ml"),
        ("create", "pods", "ml"),
        ("delete", "pods", "ml"),
        ("get", "secrets", NAMESPACE),
        ("patch", "nodes", None),
        ("list", "leases.coordination.k8s.io", NAMESPACE),
        ("delete", "keptroutes.offload.vk-provider.dev", "ml"),
    ]
    missing = [
        (verb, res) for verb, res, ns in needed if can_i_as(kubectl, HOOK_ACCOUNT, verb, res, ns) != "yes"
    ]
    excess = [
        (verb, res) for verb, res, ns in forbidden if can_i_as(kubectl, HOOK_ACCOUNT, verb, res, ns) != "no"
    ]
    assert missing == []
    assert excess == []

    def lease(name: str) -> str:
        done = kubectl(
            "auth",
            "can-i",
            "get",
            f"leases.coordination.k8s.io/{name}",
            f"--as={HOOK_ACCOUNT}",
            "-n",
            NAMESPACE,
            check=False,
        )
        return done.stdout.strip()

    assert lease("vk-provider-controller") == "yes"
    assert lease("some-other-lease") == "no"
