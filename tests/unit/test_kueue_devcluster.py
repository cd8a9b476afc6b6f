"""How the development cluster installs Kueue: which webhooks, scoped how, called where."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from vk_devtools.devcluster import commands, kueue
from vk_devtools.devcluster.building import read_pins
from vk_provider.cli import main

pytestmark = pytest.mark.unit

URL = "https://127.0.0.1:9443"


def webhook(name: str, group: str, resource: str) -> dict[str, Any]:
    return {
        "name": name,
        "clientConfig": {
            "service": {"name": "webhook-service", "namespace": "system", "path": f"/x-{resource}"}
        },
        "rules": [{"apiGroups": [group], "resources": [resource], "operations": ["CREATE"]}],
        "failurePolicy": "Fail",
    }


@pytest.fixture
def source(tmp_path: Path) -> Path:
    components = tmp_path / "config" / "components"
    (components / "webhook").mkdir(parents=True)
    (components / "crd" / "bases").mkdir(parents=True)
    (components / "rbac").mkdir(parents=True)
    documents = [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind,
            "metadata": {"name": "upstream"},
            "webhooks": [
                webhook("job", "batch", "jobs"),
                webhook("pod", "", "pods"),
                webhook("deployment", "apps", "deployments"),
                webhook("clusterqueue", "kueue.x-k8s.io", "clusterqueues"),
                webhook("workload", "kueue.x-k8s.io", "workloads"),
            ],
        }
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
    ]
    (components / "webhook" / "manifests.yaml").write_text(yaml.safe_dump_all(documents))
    for name, versions in (
        ("workloads", ["v1beta1", "v1beta2"]),
        ("admissionchecks", ["v1beta1", "v1beta2"]),
    ):
        crd = {
            "metadata": {"name": f"{name}.kueue.x-k8s.io"},
            "spec": {"names": {"plural": name}, "versions": [{"name": v} for v in versions]},
        }
        (components / "crd" / "bases" / f"{name}.yaml").write_text(yaml.safe_dump(crd))
    (components / "rbac" / "role.yaml").write_text(
        yaml.safe_dump({"kind": "ClusterRole", "metadata": {"name": "manager-role"}, "rules": []})
    )
    (components / "rbac" / "manager_secrets_role.yaml").write_text(
        yaml.safe_dump({"kind": "Role", "metadata": {"name": "manager-secrets-role", "namespace": "system"}})
    )
    return tmp_path


def test_only_job_and_kueue_webhooks_are_kept_called_by_url_and_namespaced_ones_scoped(source: Path) -> None:
    mutating, validating = kueue.webhook_configurations(source, url=URL, ca_bundle="Q0E=")
    assert mutating["metadata"]["name"] == "vk-provider-kueue-mutating"
    assert validating["metadata"]["name"] == "vk-provider-kueue-validating"
    kept = {w["name"]: w for w in mutating["webhooks"]}
    assert set(kept) == {"job", "clusterqueue", "workload"}  # pods and deployments: other tests' objects
    assert kept["job"]["clientConfig"] == {"url": f"{URL}/x-jobs", "caBundle": "Q0E="}
    assert kept["job"]["namespaceSelector"] == {"matchLabels": {kueue.MANAGED_LABEL: "true"}}
    assert kept["workload"]["namespaceSelector"] == {"matchLabels": {kueue.MANAGED_LABEL: "true"}}
    assert "namespaceSelector" not in kept["clusterqueue"]  # cluster-scoped: a selector would not apply


def test_the_crds_upstream_converts_convert_through_the_webhook_by_url(source: Path) -> None:
    by_name = {crd["metadata"]["name"]: crd for crd in kueue.crds(source, url=URL, ca_bundle="Q0E=")}
    conversion = by_name["workloads.kueue.x-k8s.io"]["spec"]["conversion"]
    assert conversion["webhook"]["clientConfig"] == {"url": f"{URL}/convert", "caBundle": "Q0E="}
    assert "conversion" not in by_name["admissionchecks.kueue.x-k8s.io"]["spec"]  # Kueue cannot convert it


def test_kueue_runs_with_its_own_rights_and_only_in_managed_namespaces(source: Path, tmp_path: Path) -> None:
    role, binding, secrets, secrets_binding = kueue.rbac(source)
    assert secrets["metadata"] == {"name": kueue.CLUSTER_ROLE, "namespace": kueue.NAMESPACE}
    assert secrets_binding["subjects"] == binding["subjects"]
    assert role["metadata"]["name"] == binding["roleRef"]["name"] == kueue.CLUSTER_ROLE
    assert binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": kueue.USER}
    ]
    config = kueue.configuration(kueue.KueueFiles(tmp_path), webhook_port=9443, health_port=8081)
    assert config["managedJobsNamespaceSelector"] == {"matchLabels": {kueue.MANAGED_LABEL: "true"}}
    assert config["internalCertManagement"] == {"enable": False}
    assert config["integrations"] == {"frameworks": ["batch/job"]}


def test_the_pinned_module_is_kueue_v0_17_0() -> None:
    assert read_pins(kueue.KUEUE).version(kueue.MODULE) == "v0.17.0"
    assert sorted(path.name for path in kueue.GOMOD_DIR.iterdir()) == ["go.mod", "go.sum"]


@pytest.mark.parametrize("command", [["dev", "up", "--help"], ["dev", "demo", "--help"]])
def test_the_dev_commands_offer_kueue(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(command)
    assert exited.value.code == 0
    assert ("--with-kueue" if command[1] == "up" else "--kueue") in capsys.readouterr().out


def test_dev_build_builds_kueue_too() -> None:
    assert kueue.KUEUE in commands.BUILDS
