"""The Helm chart (`charts/vk-provider`): it lints, its schema refuses bad values in words, it renders
what kustomize builds from `manifests/` for the same settings, and its ServiceAccounts may do what the
components need and nothing more. Helm v4 is built from our pinned module (`dev build`)."""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.conftest import MANIFESTS_GROUP, Kubectl
from tests.integration.test_manifests import (
    CONTROLLER,
    FORBIDDEN,
    NEEDED,
    ROUTER,
    SERVICE_ACCOUNT,
    TRAFFIC_RIGHTS,
    can_i_as,
)
from vk_devtools.devcluster.helm import helm_binary

pytestmark = MANIFESTS_GROUP

ROOT = Path(__file__).parents[2]
CHART = ROOT / "charts" / "vk-provider"
MANIFESTS = ROOT / "manifests"
NAMESPACE = "vk-provider-system"
HELM_LABELS = (
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "helm.sh/chart",
)
"""Labels Helm's convention adds to every object; kustomize's objects have the rest."""

Object = dict[str, Any]


@pytest.fixture(scope="module")
def helm() -> Callable[..., subprocess.CompletedProcess[str]]:
    binary = helm_binary()

    def run(*arguments: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(binary), *arguments], capture_output=True, text=True, timeout=120, check=False
        )
        if check and done.returncode != 0:
            raise AssertionError(f"helm {' '.join(arguments)} failed: {done.stderr}")
        return done

    return run


def render(helm: Callable[..., subprocess.CompletedProcess[str]], *values: str) -> list[Object]:
    done = helm("template", "vk", str(CHART), "--namespace", NAMESPACE, "--include-crds", *values)
    return [item for item in yaml.safe_load_all(done.stdout) if item]


def key(item: Mapping[str, Any]) -> tuple[str, str, str]:
    metadata = item["metadata"]
    return item["kind"], metadata.get("namespace", ""), metadata["name"]


def without_helm_additions(item: Object) -> Object:
    """The object as kustomize would write it: no Helm labels, no config checksum, no pull policy (the
    chart's `image.pullPolicy`; kustomize's objects leave Kubernetes' default)."""
    item = json.loads(json.dumps(item))
    labels = item["metadata"].get("labels") or {}
    for label in HELM_LABELS:
        labels.pop(label, None)
    template = (item.get("spec") or {}).get("template")
    if template:
        annotations = template["metadata"].get("annotations") or {}
        annotations.pop("checksum/config", None)
        if not annotations:
            template["metadata"].pop("annotations", None)
        for container in template["spec"].get("containers") or ():
            container.pop("imagePullPolicy", None)
    if item["kind"] == "ConfigMap":  # the settings file: the same settings, however they are spelled
        item["data"] = {name: yaml.safe_load(text) for name, text in item["data"].items()}
    if item["kind"] == "CustomResourceDefinition":  # crds/ is not templated: no labels at all
        item["metadata"].pop("labels", None)
    return item


def test_the_chart_lints(helm: Callable[..., subprocess.CompletedProcess[str]]) -> None:
    done = helm("lint", str(CHART), "--strict")
    assert "0 chart(s) failed" in done.stdout, done.stdout + done.stderr


def test_the_default_render_is_what_kustomize_builds(
    helm: Callable[..., subprocess.CompletedProcess[str]], kubectl: Kubectl
) -> None:
    """The Namespace is Helm's to make (`--create-namespace`), and the credentials Secret is the
    user's: the chart mounts an existing one, where kustomize ships a placeholder."""
    built = [
        item
        for folder in ("base", "traffic")
        for item in yaml.safe_load_all(kubectl("kustomize", str(MANIFESTS / folder)).stdout)
        if item
        and item["kind"] != "Namespace"
        and key(item) != ("Secret", NAMESPACE, "vk-provider-credentials")
    ]
    rendered = render(helm, "--no-hooks")  # the uninstall hook has no kustomize twin (test_chart_uninstall)
    expected = {key(item): without_helm_additions(item) for item in built}
    got = {key(item): without_helm_additions(item) for item in rendered}
    assert sorted(got) == sorted(expected)
    for name, item in expected.items():
        assert got[name] == item, name


def test_the_chart_s_crds_are_the_manifests_crds() -> None:
    for crd in (MANIFESTS / "crds").glob("*.yaml"):
        if crd.name != "kustomization.yaml":
            assert (CHART / "crds" / crd.name).read_text() == crd.read_text(), f"copy {crd} into the chart"


def test_two_nodes_each_get_their_settings_and_credentials(
    helm: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(
        yaml.safe_dump(
            {
                "image": {"repository": "registry.example/vk-provider", "tag": "0.2.0"},
                "nodes": [
                    {
                        "name": "runpod-burst",
                        "provider": "runpod",
                        "providerConfig": {"api_key_file": "/etc/vk-provider/credentials/runpod-api-key"},
                        "capacity": {"nvidia.com/gpu": "16"},
                        "credentialsSecret": "runpod-key",
                        "settings": {"labels": {"gpu.example.com/pool": "burst"}},
                    },
                    {"name": "remote", "provider": "kubernetes", "credentialsSecret": "", "replicas": 3},
                ],
                "router": {"enabled": False},
                "policies": [{"name": "training-first", "spec": {"offloads": {"selector": {}}}}],
            }
        )
    )
    rendered = {key(item): item for item in render(helm, "--values", str(values))}
    runpod = rendered["Deployment", NAMESPACE, "runpod-burst-node"]
    container = runpod["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "registry.example/vk-provider:0.2.0"
    assert {"name": "credentials", "secret": {"secretName": "runpod-key"}} in runpod["spec"]["template"][
        "spec"
    ]["volumes"]
    settings = yaml.safe_load(rendered["ConfigMap", NAMESPACE, "runpod-burst-node"]["data"]["node.yaml"])
    assert settings["node_name"] == "runpod-burst"
    assert settings["provider_config"] == {"api_key_file": "/etc/vk-provider/credentials/runpod-api-key"}
    assert settings["labels"] == {"gpu.example.com/pool": "burst"}
    remote = rendered["Deployment", NAMESPACE, "remote-node"]
    assert remote["spec"]["replicas"] == 3
    assert all(volume["name"] != "credentials" for volume in remote["spec"]["template"]["spec"]["volumes"])
    assert ("Deployment", NAMESPACE, "vk-provider-router") not in rendered
    assert ("OffloadPolicy", "", "training-first") in rendered
    # A changed setting changes the pods' checksum, so the Deployment rolls.
    annotations = runpod["spec"]["template"]["metadata"]["annotations"]
    assert (
        annotations["checksum/config"]
        != remote["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
    )


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"nodes": [{"name": "Not_A_Name", "provider": "mock"}]}, "nodes/0/name"),
        ({"nodes": [{"name": "n"}]}, "missing property 'provider'"),
        ({"router": {"replicas": "two"}}, "router/replicas"),
        ({"image": {"repository": "r", "digest": "latest"}}, "image/digest"),
        ({"controller": {"metricPort": 9000}}, "metricPort"),
    ],
    ids=["bad-name", "no-provider", "replicas-not-a-number", "bad-digest", "misspelt-key"],
)
def test_the_schema_refuses_bad_values_and_says_where(
    helm: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path, values: Object, words: str
) -> None:
    file = tmp_path / "values.yaml"
    file.write_text(yaml.safe_dump(values))
    done = helm("template", "vk", str(CHART), "--values", str(file), check=False)
    assert done.returncode != 0
    assert "values don't meet the specifications of the schema" in done.stderr, done.stderr
    assert words in done.stderr, done.stderr


@pytest.fixture(scope="module")
def chart_rbac_applied(
    helm: Callable[..., subprocess.CompletedProcess[str]],
    kubectl: Kubectl,
    one_worker_at_a_time: Callable[[], contextlib.AbstractContextManager[None]],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The chart's ServiceAccounts and RBAC applied over the same-named objects of `manifests/`. They
    stay: other tests run as these ServiceAccounts, and the chart's rules equal kustomize's (above)."""
    rendered = render(helm)
    rbac = [
        item
        for item in rendered
        if item["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
    ]
    file = tmp_path_factory.mktemp("chart") / "rbac.yaml"
    file.write_text(yaml.safe_dump_all(rbac))
    everything = file.with_name("all.yaml")
    everything.write_text(yaml.safe_dump_all(rendered))
    with one_worker_at_a_time():
        kubectl("apply", "-f", str(MANIFESTS / "base" / "namespace.yaml"))
        kubectl("apply", "-f", str(CHART / "crds"))
        dry_run = kubectl("apply", "-f", str(everything), "--dry-run=server")
        assert "(server dry run)" in dry_run.stdout
        kubectl("apply", "-f", str(file))


@pytest.mark.usefixtures("chart_rbac_applied")
@pytest.mark.parametrize(
    ("user", "needed", "forbidden"),
    [
        (SERVICE_ACCOUNT, NEEDED, FORBIDDEN),
        (ROUTER, *TRAFFIC_RIGHTS[ROUTER]),
        (CONTROLLER, *TRAFFIC_RIGHTS[CONTROLLER]),
    ],
    ids=["node", "router", "controller"],
)
def test_the_chart_s_service_accounts_may_do_what_they_need_and_nothing_more(
    kubectl: Kubectl,
    user: str,
    needed: list[tuple[str, str, str | None]],
    forbidden: list[tuple[str, str, str | None]],
) -> None:
    missing = [(verb, res) for verb, res, ns in needed if can_i_as(kubectl, user, verb, res, ns) != "yes"]
    excess = [(verb, res) for verb, res, ns in forbidden if can_i_as(kubectl, user, verb, res, ns) != "no"]
    assert missing == []
    assert excess == []


def test_the_monitoring_objects_carry_the_shipped_rules_and_dashboard(
    helm: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(
        yaml.safe_dump(
            {
                "monitoring": {
                    "spendBudgetUsdPerHour": 120,
                    "prometheusRule": {"enabled": True, "labels": {"release": "prometheus"}},
                    "grafanaDashboard": {"enabled": True},
                    "podMonitors": {"enabled": True},
                }
            }
        )
    )
    rendered = {key(item): item for item in render(helm, "--values", str(values))}
    rule = rendered["PrometheusRule", NAMESPACE, "vk-provider"]
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    text = yaml.safe_dump(rule["spec"]["groups"])
    assert "* 3600 > 120" in text
    shipped = yaml.safe_load((CHART / "files" / "prometheus-rules.yaml").read_text())["groups"]
    assert yaml.safe_load(text.replace("* 3600 > 120", "* 3600 > 50")) == shipped
    dashboard = rendered["ConfigMap", NAMESPACE, "vk-provider-dashboard"]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped_dashboard = json.loads((CHART / "files" / "grafana-dashboard.json").read_text())
    assert json.loads(dashboard["data"]["vk-provider.json"]) == shipped_dashboard
    node_monitor = rendered["PodMonitor", NAMESPACE, "vk-provider-node"]
    assert node_monitor["spec"]["selector"]["matchExpressions"][0]["values"] == ["vk-provider-node"]
    assert {("PodMonitor", NAMESPACE, f"vk-provider-{part}") for part in ("router", "controller")} <= set(
        rendered
    )
