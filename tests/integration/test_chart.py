"""The Helm chart (`charts/vk-provider`): it lints, its schema refuses bad values in words, it renders
what kustomize builds from `manifests/` for the same settings, and its ServiceAccounts may do what the
components need and nothing more. Helm v4 is built from our pinned module (`dev build`)."""

from __future__ import annotations

import contextlib
import json
import os
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

pytestmark = MANIFESTS_GROUP

ROOT = Path(__file__).parents[2]
CHART = ROOT / "charts" / "vk-provider"
MANIFESTS = ROOT / "manifests"
RUNBOOKS = "https://github.com/vk-provider/vk-provider/blob/main/docs/runbooks.md"
"""Where the shipped rules point their runbook_url (the chart's `monitoring.runbookBaseUrl` default)."""
NAMESPACE = "vk-provider-system"
HELM_LABELS = (
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "helm.sh/chart",
)
"""Labels Helm's convention adds to every object; kustomize's objects have the rest."""

Object = dict[str, Any]


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


BASE_EQUIVALENT: Object = {
    "nodes": [
        {
            "name": "vk-provider",
            "provider": "runpod",
            "providerConfig": {
                "api_key_file": "/etc/vk-provider/credentials/runpod-api-key",
                "gpu_type": "NVIDIA L4",
            },
            "capacity": {"cpu": "64", "memory": "256Gi", "pods": "100", "nvidia.com/gpu": "8"},
            "existingSecret": {"name": "vk-provider-credentials"},
        }
    ],
    "router": {"aws": {"existingSecret": {"name": "vk-provider-router-aws"}}},
}
"""The values that say what `manifests/base` and `manifests/traffic` say: the base's RunPod node (the
chart has none by default) and the Secrets the manifests mount, both optional."""


def values_file(tmp_path: Path, values: Object, name: str = "values.yaml") -> str:
    file = tmp_path / name
    file.write_text(yaml.safe_dump(values))
    return str(file)


def test_the_render_for_the_base_s_node_is_what_kustomize_builds(
    helm: Callable[..., subprocess.CompletedProcess[str]], kubectl: Kubectl, tmp_path: Path
) -> None:
    """The Namespace is Helm's to make (`--create-namespace`). Every other object, probes and
    disruption budgets included, must be the same, so a change to one side alone fails here."""
    built = [
        item
        for folder in ("base", "traffic")
        for item in yaml.safe_load_all(kubectl("kustomize", str(MANIFESTS / folder)).stdout)
        if item and item["kind"] != "Namespace"
    ]
    # The uninstall hook has no kustomize twin (test_chart_uninstall).
    rendered = render(helm, "--no-hooks", "--values", values_file(tmp_path, BASE_EQUIVALENT))
    expected = {key(item): without_helm_additions(item) for item in built}
    got = {key(item): without_helm_additions(item) for item in rendered}
    assert sorted(got) == sorted(expected)
    for name, item in expected.items():
        assert got[name] == item, name


RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
GUARD_KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")


def test_served_namespaces_render_the_rbac_of_the_namespaced_example(
    helm: Callable[..., subprocess.CompletedProcess[str]], kubectl: Kubectl, tmp_path: Path
) -> None:
    """`node.namespaces` gives the nodes the RBAC and the binding guard of
    manifests/examples/namespaced-node (whose one served namespace is `inference`), which
    test_namespaced_node proves on the plane, and the nodes the setting; without it the render is
    the base's (above)."""
    values = {**BASE_EQUIVALENT, "node": {"namespaces": ["inference"]}}
    rendered = render(helm, "--no-hooks", "--values", values_file(tmp_path, values))
    built = [
        item
        for item in yaml.safe_load_all(
            kubectl("kustomize", str(MANIFESTS / "examples" / "namespaced-node")).stdout
        )
        if item
    ]

    def node_rbac_and_guard(items: list[Object]) -> dict[tuple[str, str, str], Object]:
        return {
            key(item): without_helm_additions(item)
            for item in items
            if item["kind"] in (*RBAC_KINDS, *GUARD_KINDS)
            and item["metadata"]["name"].startswith("vk-provider-node")
        }

    expected, got = node_rbac_and_guard(built), node_rbac_and_guard(rendered)
    assert ("ValidatingAdmissionPolicy", "", "vk-provider-node-served-namespaces") in expected
    assert sorted(got) == sorted(expected)
    for name, item in expected.items():
        assert got[name] == item, name
    (config,) = [item for item in rendered if key(item) == ("ConfigMap", NAMESPACE, "vk-provider-node")]
    assert yaml.safe_load(config["data"]["node.yaml"])["namespaces"] == ["inference"]


def test_served_namespaces_are_set_for_all_nodes_or_none(
    helm: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    """The nodes share one ServiceAccount: one node's own list would not match the RoleBindings."""
    node = {**BASE_EQUIVALENT["nodes"][0], "settings": {"namespaces": ["elsewhere"]}}
    values = {"nodes": [node], "node": {"namespaces": ["inference"]}}
    done = helm("template", "vk", str(CHART), "--values", values_file(tmp_path, values), check=False)
    assert done.returncode != 0
    assert "set the served namespaces in node.namespaces, not in settings" in done.stderr, done.stderr


def test_the_default_render_has_no_node_and_no_secret_to_create_by_hand(
    helm: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    rendered = {key(item): item for item in render(helm)}
    deployments = {name for kind, _, name in rendered if kind == "Deployment"}
    assert deployments == {"vk-provider-router", "vk-provider-controller"}
    assert not [name for name in rendered if name[0] in ("ConfigMap", "Secret")]
    router = rendered["Deployment", NAMESPACE, "vk-provider-router"]["spec"]["template"]["spec"]
    # No Secret named: no mount and no file flag, so the router signs with AWS's default chain.
    assert "volumes" not in router
    assert not [arg for arg in router["containers"][0]["args"] if arg.startswith("--aws-credentials-file")]
    # The node daemons' identity and rights exist already, ready for a node added later.
    assert ("ServiceAccount", NAMESPACE, "vk-provider-node") in rendered
    # No node, no node proxy: an empty resourceNames would grant every node's.
    node_rules = rendered["ClusterRole", "", "vk-provider-node"]["rules"]
    assert not [rule for rule in node_rules if "nodes/proxy" in rule["resources"]]


def test_every_deployment_has_probes_and_the_router_a_disruption_budget_and_spread(
    helm: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    rendered = {key(item): item for item in render(helm, "--values", values_file(tmp_path, BASE_EQUIVALENT))}
    deployments = [item for item in rendered.values() if item["kind"] == "Deployment"]
    assert len(deployments) == 3
    for deployment in deployments:
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            assert container[probe]["httpGet"]["path"], (deployment["metadata"]["name"], probe)
    node = rendered["Deployment", NAMESPACE, "vk-provider-node"]["spec"]["template"]["spec"]
    [container] = node["containers"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert {"name": "health", "containerPort": 10248} in container["ports"]
    settings = yaml.safe_load(rendered["ConfigMap", NAMESPACE, "vk-provider-node"]["data"]["node.yaml"])
    assert settings["health_port"] == 10248  # the daemon serves what the probes ask
    budget = rendered["PodDisruptionBudget", NAMESPACE, "vk-provider-router"]["spec"]
    assert budget == {
        "maxUnavailable": 1,
        "selector": {"matchLabels": {"app.kubernetes.io/name": "vk-provider-router"}},
    }
    spread = rendered["Deployment", NAMESPACE, "vk-provider-router"]["spec"]["template"]["spec"]["affinity"]
    [term] = spread["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"


def test_the_router_s_admin_port_is_probed_scraped_and_closed_to_all_but_the_controller_and_prometheus(
    helm: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    prometheus = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    values = {
        "nodes": BASE_EQUIVALENT["nodes"],
        "router": {"adminPort": 9555, "networkPolicy": {"adminFrom": [prometheus]}},
        "monitoring": {"podMonitors": {"enabled": True}},
    }
    rendered = {key(item): item for item in render(helm, "--values", values_file(tmp_path, values))}
    [router] = rendered["Deployment", NAMESPACE, "vk-provider-router"]["spec"]["template"]["spec"][
        "containers"
    ]
    assert "--admin-listen=0.0.0.0:9555" in router["args"]
    assert {"name": "admin", "containerPort": 9555} in router["ports"]
    assert {
        router[probe]["httpGet"]["port"] for probe in ("startupProbe", "readinessProbe", "livenessProbe")
    } == {"admin"}
    [controller] = rendered["Deployment", NAMESPACE, "vk-provider-controller"]["spec"]["template"]["spec"][
        "containers"
    ]
    assert "--router-port=9555" in controller["args"]
    assert rendered["PodMonitor", NAMESPACE, "vk-provider-router"]["spec"]["podMetricsEndpoints"] == [
        {"port": "admin", "path": "/-/metrics", "honorLabels": True}
    ]
    policy = rendered["NetworkPolicy", NAMESPACE, "vk-provider-router"]["spec"]
    assert policy["ingress"] == [
        {"ports": [{"port": "http"}]},
        {
            "ports": [{"port": "admin"}],
            "from": [
                {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "vk-provider-controller"}}},
                prometheus,
            ],
        },
    ]


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
                        "existingSecret": {"name": "runpod-key", "keys": ["runpod-api-key"]},
                        "settings": {"labels": {"gpu.example.com/pool": "burst"}},
                    },
                    {"name": "remote", "provider": "kubernetes", "replicas": 3},
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
    assert {
        "name": "credentials",
        "secret": {
            "secretName": "runpod-key",
            "optional": True,  # a missing Secret is reported on the Node, not a pod stuck mounting
            "items": [{"key": "runpod-api-key", "path": "runpod-api-key"}],
        },
    } in runpod["spec"]["template"]["spec"]["volumes"]
    settings = yaml.safe_load(rendered["ConfigMap", NAMESPACE, "runpod-burst-node"]["data"]["node.yaml"])
    assert settings["node_name"] == "runpod-burst"
    assert settings["provider_config"] == {"api_key_file": "/etc/vk-provider/credentials/runpod-api-key"}
    assert settings["labels"] == {"gpu.example.com/pool": "burst"}
    remote = rendered["Deployment", NAMESPACE, "remote-node"]
    assert remote["spec"]["replicas"] == 3
    assert all(volume["name"] != "credentials" for volume in remote["spec"]["template"]["spec"]["volumes"])
    assert ("Deployment", NAMESPACE, "vk-provider-router") not in rendered
    assert ("OffloadPolicy", "", "training-first") in rendered
    # The serving certificate's check through the apiserver: each node's own proxy, and no other.
    [proxy_rule] = [
        rule
        for rule in rendered["ClusterRole", "", "vk-provider-node"]["rules"]
        if "nodes/proxy" in rule["resources"]
    ]
    assert proxy_rule == {
        "apiGroups": [""],
        "resources": ["nodes/proxy"],
        "resourceNames": ["runpod-burst", "remote"],
        "verbs": ["get"],
    }
    # A changed setting changes the pods' checksum, so the Deployment rolls.
    annotations = runpod["spec"]["template"]["metadata"]["annotations"]
    assert (
        annotations["checksum/config"]
        != remote["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
    )


def test_serving_certificates_are_values_shared_or_per_node(
    helm: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    values = {
        "node": {"servingCertificate": {"waitSeconds": 20}},
        "nodes": [
            {"name": "default", "provider": "mock"},
            {"name": "eks", "provider": "mock", "servingCertificate": {"mode": "self-signed"}},
            {
                "name": "managed",
                "provider": "mock",
                "servingCertificate": {"mode": "file", "secretName": "tls"},
            },
        ],
    }
    rendered = {key(item): item for item in render(helm, "--values", values_file(tmp_path, values))}

    def settings(node: str) -> Object:
        config: Object = yaml.safe_load(rendered["ConfigMap", NAMESPACE, f"{node}-node"]["data"]["node.yaml"])
        return config

    assert settings("default")["serving_certificate"] == "auto"
    assert settings("default")["serving_certificate_wait_seconds"] == 20
    assert "kubelet_serving_cert_file" not in settings("default")
    assert settings("eks")["serving_certificate"] == "self-signed"
    managed = settings("managed")
    assert managed["serving_certificate"] == "file"
    assert managed["kubelet_serving_cert_file"] == "/etc/vk-provider/serving-certificate/tls.crt"
    assert managed["kubelet_serving_key_file"] == "/etc/vk-provider/serving-certificate/tls.key"
    pod = rendered["Deployment", NAMESPACE, "managed-node"]["spec"]["template"]["spec"]
    assert {"name": "serving-certificate", "secret": {"secretName": "tls"}} in pod["volumes"]
    mount = {
        "name": "serving-certificate",
        "mountPath": "/etc/vk-provider/serving-certificate",
        "readOnly": True,
    }
    assert mount in pod["containers"][0]["volumeMounts"]
    default_pod = rendered["Deployment", NAMESPACE, "default-node"]["spec"]["template"]["spec"]
    assert all(volume["name"] != "serving-certificate" for volume in default_pod["volumes"])

    no_secret = {"nodes": [{"name": "plain", "provider": "mock", "servingCertificate": {"mode": "file"}}]}
    file = values_file(tmp_path, no_secret, "no-secret.yaml")
    done = helm("template", "vk", str(CHART), "--values", file, check=False)
    assert done.returncode != 0
    assert "servingCertificate mode file needs a secretName" in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"nodes": [{"name": "Not_A_Name", "provider": "mock"}]}, "nodes/0/name"),
        ({"node": {"servingCertificate": {"mode": "acme"}}}, "node/servingCertificate/mode"),
        ({"nodes": [{"name": "n"}]}, "missing property 'provider'"),
        ({"router": {"replicas": "two"}}, "router/replicas"),
        ({"image": {"repository": "r", "digest": "latest"}}, "image/digest"),
        ({"controller": {"metricPort": 9000}}, "metricPort"),
        ({"nodes": [{"name": "n", "provider": "runpood"}]}, "nodes/0/provider"),
        ({"nodes": [{"name": "n", "provider": "runpod", "credentialsSecret": "key"}]}, "credentialsSecret"),
        ({"router": {"aws": {"existingSecret": {"name": "Not A Name"}}}}, "router/aws/existingSecret/name"),
        ({"router": {"signForHosts": ["https://s3.amazonaws.com/"]}}, "router/signForHosts/0"),
    ],
    ids=[
        "bad-name",
        "bad-serving-certificate-mode",
        "no-provider",
        "replicas-not-a-number",
        "bad-digest",
        "misspelt-key",
        "unknown-provider",
        "old-credentials-key",
        "bad-secret-name",
        "url-to-sign-for",
    ],
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
    rbac = [item for item in rendered if item["kind"] in RBAC_KINDS]
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
                "nodes": BASE_EQUIVALENT["nodes"],
                "monitoring": {
                    "spendBudgetUsdPerHour": 120,
                    "runbookBaseUrl": "https://wiki.example.com/vk-provider/runbooks",
                    "prometheusRule": {"enabled": True, "labels": {"release": "prometheus"}},
                    "grafanaDashboard": {"enabled": True},
                    "podMonitors": {"enabled": True},
                },
            }
        )
    )
    rendered = {key(item): item for item in render(helm, "--values", str(values))}
    rule = rendered["PrometheusRule", NAMESPACE, "vk-provider"]
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    rules = {item["alert"]: item for group in rule["spec"]["groups"] for item in group["rules"]}
    spend = rules["VkProviderSpendAboveBudget"]
    assert spend["expr"].endswith("* 3600 > 120")
    assert "the budget of 120 USD/h" in spend["annotations"]["description"]  # the text says it too
    for alert, item in rules.items():
        anchor = alert.lower()
        assert item["annotations"]["runbook_url"] == f"https://wiki.example.com/vk-provider/runbooks#{anchor}"
    # Nothing else differs from the file a plain Prometheus loads.
    text = json.dumps(rule["spec"]["groups"])
    for chart_value, shipped_value in (
        ("* 3600 > 120", "* 3600 > 50"),
        ("the budget of 120 USD/h", "the budget of 50 USD/h"),
        ("https://wiki.example.com/vk-provider/runbooks", RUNBOOKS),
    ):
        text = text.replace(chart_value, shipped_value)
    shipped = yaml.safe_load((CHART / "files" / "prometheus-rules.yaml").read_text())["groups"]
    assert json.loads(text) == shipped
    dashboard = rendered["ConfigMap", NAMESPACE, "vk-provider-dashboard"]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped_dashboard = json.loads((CHART / "files" / "grafana-dashboard.json").read_text())
    assert json.loads(dashboard["data"]["vk-provider.json"]) == shipped_dashboard
    node_monitor = rendered["PodMonitor", NAMESPACE, "vk-provider-node"]
    assert node_monitor["spec"]["selector"]["matchExpressions"][0]["values"] == ["vk-provider-node"]
    monitors = [
        rendered["PodMonitor", NAMESPACE, f"vk-provider-{part}"] for part in ("node", "router", "controller")
    ]
    # Our own `namespace` and `pod` labels (an Offload's, a placed pod's) win over the target's.
    assert all(
        endpoint["honorLabels"] for monitor in monitors for endpoint in monitor["spec"]["podMetricsEndpoints"]
    )
    # The scrape token nothing else creates: the chart's own, allowed only `get nodes/metrics`.
    credentials = node_monitor["spec"]["podMetricsEndpoints"][0]["authorization"]["credentials"]
    assert credentials == {"name": "vk-provider-metrics-reader", "key": "token"}
    token = rendered["Secret", NAMESPACE, "vk-provider-metrics-reader"]
    assert token["type"] == "kubernetes.io/service-account-token"
    assert rendered["ClusterRole", "", "vk-provider-metrics-reader"]["rules"] == [
        {"apiGroups": [""], "resources": ["nodes/metrics"], "verbs": ["get"]}
    ]


def test_a_named_token_secret_is_used_and_none_is_created(
    helm: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    values = {
        "nodes": BASE_EQUIVALENT["nodes"],
        "monitoring": {
            "podMonitors": {"enabled": True, "nodeToken": {"existingSecret": {"name": "prom", "key": "t"}}}
        },
    }
    rendered = {key(item): item for item in render(helm, "--values", values_file(tmp_path, values))}
    node_monitor = rendered["PodMonitor", NAMESPACE, "vk-provider-node"]
    credentials = node_monitor["spec"]["podMetricsEndpoints"][0]["authorization"]["credentials"]
    assert credentials == {"name": "prom", "key": "t"}
    assert ("Secret", NAMESPACE, "vk-provider-metrics-reader") not in rendered


EXAMPLES = CHART / "examples"


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.yaml")), ids=lambda path: path.stem)
def test_each_example_passes_the_schema_and_renders_its_node(
    helm: Callable[..., subprocess.CompletedProcess[str]], example: Path
) -> None:
    values = yaml.safe_load(example.read_text())
    rendered = {key(item): item for item in render(helm, "--values", str(example))}
    for node in values["nodes"]:
        name = f"{node['name']}-node"
        settings = yaml.safe_load(rendered["ConfigMap", NAMESPACE, name]["data"]["node.yaml"])
        assert settings["provider"] == node["provider"]
        assert settings["provider_config"] == node["providerConfig"]
        pod = rendered["Deployment", NAMESPACE, name]["spec"]["template"]["spec"]
        secret = (node.get("existingSecret") or {}).get("name")
        mounted = [volume["secret"] for volume in pod["volumes"] if volume["name"] == "credentials"]
        assert [volume["secretName"] for volume in mounted] == ([secret] if secret else [])
        # Every credentials file a setting names is under the mounted Secret's folder.
        files = [
            value for value in yaml.safe_dump(node["providerConfig"]).split() if value.startswith("/etc/")
        ]
        assert all(path.startswith("/etc/vk-provider/credentials/") for path in files) or not secret
        assert [c["name"] for c in pod["containers"]] == ["node"] + [
            c["name"] for c in node.get("extraContainers", [])
        ]
    for component in ("node", "router"):
        annotations = ((values.get(component) or {}).get("serviceAccount") or {}).get("annotations")
        if annotations:
            account = rendered["ServiceAccount", NAMESPACE, f"vk-provider-{component}"]
            assert account["metadata"]["annotations"] == annotations


def test_service_accounts_can_be_annotated_renamed_or_brought(
    helm: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    irsa = {"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/router"}
    values = {
        "nodes": BASE_EQUIVALENT["nodes"],
        "node": {"serviceAccount": {"create": False, "name": "platform-nodes"}},
        "router": {"serviceAccount": {"annotations": irsa}},
        "controller": {"serviceAccount": {"name": "migrations"}},
    }
    rendered = {key(item): item for item in render(helm, "--values", values_file(tmp_path, values))}
    accounts = {name for kind, _, name in rendered if kind == "ServiceAccount"}
    # The node's is the user's own; the uninstall hook's is a hook of its own (test_chart_uninstall).
    assert accounts == {"vk-provider-router", "migrations", "vk-provider-uninstall"}
    assert rendered["ServiceAccount", NAMESPACE, "vk-provider-router"]["metadata"]["annotations"] == irsa
    node_pod = rendered["Deployment", NAMESPACE, "vk-provider-node"]["spec"]["template"]["spec"]
    assert node_pod["serviceAccountName"] == "platform-nodes"
    controller_pod = rendered["Deployment", NAMESPACE, "vk-provider-controller"]["spec"]["template"]["spec"]
    assert controller_pod["serviceAccountName"] == "migrations"
    subjects = {
        (item["metadata"]["name"], subject["name"])
        for item in rendered.values()
        if item["kind"] in ("ClusterRoleBinding", "RoleBinding")
        for subject in item["subjects"]
    }
    assert ("vk-provider-node", "platform-nodes") in subjects
    assert ("vk-provider-controller", "migrations") in subjects
    flow_subjects = [
        rule["subjects"][0]["serviceAccount"]["name"]
        for item in rendered.values()
        if item["kind"] == "FlowSchema"
        for rule in item["spec"]["rules"]
    ]
    assert flow_subjects == ["platform-nodes", "platform-nodes"]


def test_pods_carry_extra_labels_such_as_aks_workload_identity_s(
    helm: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    workload_identity = {"azure.workload.identity/use": "true"}
    values = {
        "nodes": BASE_EQUIVALENT["nodes"],
        "node": {"podLabels": workload_identity},
        "router": {"podLabels": workload_identity},
        "controller": {"podLabels": {"team": "inference"}},
    }
    rendered = {key(item): item for item in render(helm, "--values", values_file(tmp_path, values))}

    def pod_labels(deployment: str) -> dict[str, str]:
        labels: dict[str, str] = rendered["Deployment", NAMESPACE, deployment]["spec"]["template"][
            "metadata"
        ]["labels"]
        return labels

    assert pod_labels("vk-provider-node") == {
        "app.kubernetes.io/name": "vk-provider-node",
        **workload_identity,
    }
    assert pod_labels("vk-provider-router") == {
        "app.kubernetes.io/name": "vk-provider-router",
        **workload_identity,
    }
    assert pod_labels("vk-provider-controller")["team"] == "inference"
    # The selectors stay what they were: a label added later must not orphan the ReplicaSets.
    selector = rendered["Deployment", NAMESPACE, "vk-provider-router"]["spec"]["selector"]["matchLabels"]
    assert selector == {"app.kubernetes.io/name": "vk-provider-router"}


def test_a_host_network_cluster_s_needs_are_values(
    helm: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    """What the development cluster's overlay patches in (devtools/vk_devtools/devcluster/incluster.py),
    said as values: listen on the Pod's address, bind the kubelet API there, keep provider state on
    the host."""
    pod_ip = {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
    bind = {
        "name": "VK_PROVIDER_KUBELET_BIND_ADDRESS",
        "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
    }
    state = {"name": "provider-state", "hostPath": {"path": "/srv/vk", "type": "DirectoryOrCreate"}}
    state_mount = {"name": "provider-state", "mountPath": "/var/lib/vk-provider/provider"}
    values = {
        "nodes": [{**BASE_EQUIVALENT["nodes"][0], "settings": {"kubelet_csr_self_approve": True}}],
        "node": {"extraEnv": [bind], "extraVolumes": [state], "extraVolumeMounts": [state_mount]},
        "router": {"listenAddress": "$(POD_IP)", "extraEnv": [pod_ip]},
        "controller": {"listenAddress": "$(POD_IP)", "extraEnv": [pod_ip]},
    }
    rendered = {key(item): item for item in render(helm, "--values", values_file(tmp_path, values))}

    def container(name: str) -> Object:
        pod = rendered["Deployment", NAMESPACE, name]["spec"]["template"]["spec"]
        return dict(pod["containers"][0], volumes=pod.get("volumes", []))

    node = container("vk-provider-node")
    assert bind in node["env"]
    assert state in node["volumes"]
    assert state_mount in node["volumeMounts"]
    settings = yaml.safe_load(rendered["ConfigMap", NAMESPACE, "vk-provider-node"]["data"]["node.yaml"])
    assert settings["kubelet_csr_self_approve"] is True
    router = container("vk-provider-router")
    assert "--listen=$(POD_IP):8080" in router["args"]
    assert pod_ip in router["env"]  # declared, so Kubernetes expands $(POD_IP) in the arguments
    controller = container("vk-provider-controller")
    assert "--admin-listen=$(POD_IP):8081" in controller["args"]
    assert [variable["name"] for variable in controller["env"]] == ["POD_NAME", "POD_IP"]


def test_the_router_s_trust_settings_are_values(
    helm: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    """Hosts to sign for besides SageMaker runtime's own, and EndpointSlice managers besides
    Kubernetes' controller: none by default, each one an argument of the router."""
    values = {"router": {"signForHosts": ["vpce-1.runtime.sagemaker.eu-west-1.vpce.amazonaws.com"]}}
    values["router"]["endpointSliceManagers"] = ["mesh.io"]
    rendered = {key(item): item for item in render(helm, "--values", values_file(tmp_path, values))}
    default = {key(item): item for item in render(helm)}

    def router_args(objects: Mapping[tuple[str, str, str], Object]) -> list[str]:
        pod = objects["Deployment", NAMESPACE, "vk-provider-router"]["spec"]["template"]["spec"]
        args: list[str] = pod["containers"][0]["args"]
        return args

    trust = [arg for arg in router_args(rendered) if arg.startswith(("--sign-for-host", "--endpoint-slice"))]
    assert trust == [
        "--sign-for-host=vpce-1.runtime.sagemaker.eu-west-1.vpce.amazonaws.com",
        "--endpoint-slice-manager=mesh.io",
    ]
    assert not [
        arg for arg in router_args(default) if arg.startswith(("--sign-for-host", "--endpoint-slice"))
    ]


def test_the_interconnect_exporter_renders_what_its_component_builds(
    helm: Callable[..., subprocess.CompletedProcess[str]], kubectl: Kubectl, tmp_path: Path
) -> None:
    """Off by default; on, the chart's DaemonSet is the kustomize component's (under an overlay that
    adds the part-of label, as manifests/base and traffic do), and its values reach the pods."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    component = os.path.relpath(MANIFESTS / "components" / "interconnect-exporter", overlay)
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "labels": [
                    {"pairs": {"app.kubernetes.io/part-of": "vk-provider"}, "includeSelectors": False}
                ],
                "components": [component],
            }
        )
    )
    built = [item for item in yaml.safe_load_all(kubectl("kustomize", str(overlay)).stdout) if item]
    assert not [item for item in render(helm, "--no-hooks") if item["kind"] == "DaemonSet"]
    rendered = render(helm, "--no-hooks", "--set", "interconnectExporter.enabled=true")
    daemonsets = [without_helm_additions(item) for item in rendered if item["kind"] == "DaemonSet"]
    assert daemonsets == [without_helm_additions(item) for item in built]

    values = {
        "interconnectExporter": {
            "enabled": True,
            "port": 9500,
            "intervalSeconds": 5,
            "dcgmExporterUrl": "http://$(NODE_IP):9400/metrics",
            "nodeSelector": {"nvidia.com/gpu.present": "true"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
        "monitoring": {"podMonitors": {"enabled": True}},
    }
    rendered_items = {key(item): item for item in render(helm, "--values", values_file(tmp_path, values))}
    pod = rendered_items["DaemonSet", NAMESPACE, "vk-provider-interconnect-exporter"]["spec"]["template"][
        "spec"
    ]
    [container] = pod["containers"]
    assert container["args"] == [
        "interconnect-exporter",
        "--sysfs-root=/host/sys",
        "--port=9500",
        "--interval-seconds=5",
        "--dcgm-exporter-url=http://$(NODE_IP):9400/metrics",
    ]
    assert container["ports"] == [{"name": "metrics", "containerPort": 9500}]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert pod["tolerations"] == values["interconnectExporter"]["tolerations"]
    monitor = rendered_items["PodMonitor", NAMESPACE, "vk-provider-interconnect-exporter"]["spec"]
    assert monitor["podMetricsEndpoints"] == [{"port": "metrics", "path": "/metrics", "honorLabels": True}]
