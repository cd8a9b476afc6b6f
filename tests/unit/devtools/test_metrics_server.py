"""metrics-server in the development cluster: its pinned build, certificates, objects and command line."""

from __future__ import annotations

import base64
import ipaddress
import json
import re
from pathlib import Path

import pytest
from cryptography import x509

from vk_devtools.devcluster import metricsserver
from vk_devtools.devcluster.building import read_pins
from vk_devtools.devcluster.pki import CertificateAuthority

pytestmark = pytest.mark.unit

ADDRESS = "198.19.1.3"


def test_the_build_pins_metrics_server_v0_8_0_in_a_module_without_code() -> None:
    build = metricsserver.METRICS_SERVER
    assert sorted(path.name for path in build.gomod_dir.iterdir()) == ["go.mod", "go.sum"]
    assert read_pins(build).version(metricsserver.MODULE) == "v0.8.0"
    [component] = build.components
    assert component.package == "sigs.k8s.io/metrics-server/cmd/metrics-server"
    assert component.version_stamp is not None
    stamped = component.version_stamp.variables("v0.8.0")
    assert stamped["k8s.io/client-go/pkg/version.gitVersion"] == "v0.8.0"


def test_the_apiservice_reaches_the_host_process_through_the_services_endpoint_slice() -> None:
    objects = metricsserver.manifests(ca_pem=b"PEM", listen_address=ADDRESS, port=4443)
    [apiservice] = [item for item in objects if item["kind"] == "APIService"]
    [service] = [item for item in objects if item["kind"] == "Service"]
    [endpoints] = [item for item in objects if item["kind"] == "EndpointSlice"]
    spec = apiservice["spec"]
    assert apiservice["metadata"]["name"] == "v1beta1.metrics.k8s.io"
    assert (spec["group"], spec["version"]) == ("metrics.k8s.io", "v1beta1")
    assert base64.b64decode(spec["caBundle"]) == b"PEM"  # verified TLS, no insecureSkipTLSVerify
    assert "insecureSkipTLSVerify" not in spec
    assert spec["service"] == {
        "name": service["metadata"]["name"],
        "namespace": service["metadata"]["namespace"],
        "port": service["spec"]["ports"][0]["port"],
    }
    assert "selector" not in service["spec"]
    # The aggregator matches the Service port to the slice's port by name.
    assert endpoints["ports"] == [
        {"name": service["spec"]["ports"][0]["name"], "port": 4443, "protocol": "TCP"}
    ]
    assert endpoints["metadata"]["labels"]["kubernetes.io/service-name"] == service["metadata"]["name"]
    assert endpoints["endpoints"][0]["addresses"] == [ADDRESS]
    assert not ipaddress.ip_address(ADDRESS).is_loopback  # EndpointSlices refuse loopback


def test_its_identity_may_scrape_nodes_and_delegate_authentication() -> None:
    objects = metricsserver.manifests(ca_pem=b"PEM", listen_address=ADDRESS, port=4443)
    bindings = [item for item in objects if item["kind"] in ("ClusterRoleBinding", "RoleBinding")]
    roles = {item["roleRef"]["name"] for item in bindings}
    assert roles == {
        "system:metrics-server",
        "system:auth-delegator",
        "extension-apiserver-authentication-reader",
    }
    for binding in bindings:
        assert binding["subjects"] == [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:metrics-server"}
        ]
    [scraping] = [
        item
        for item in objects
        if item["kind"] == "ClusterRole" and item["metadata"]["name"] == "system:metrics-server"
    ]
    assert {"apiGroups": [""], "resources": ["nodes/metrics"], "verbs": ["get"]} in scraping["rules"]


def test_the_serving_certificate_names_the_service_and_the_address(tmp_path: Path) -> None:
    ca = CertificateAuthority.create(tmp_path / "pki")
    pairs = metricsserver.issue_certificates(ca, tmp_path, 5)
    serving = x509.load_pem_x509_certificate(pairs[metricsserver.SERVING_STEM].cert.read_bytes())
    names = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "metrics-server.kube-system.svc" in names.get_values_for_type(x509.DNSName)
    assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address(metricsserver.address(5))]
    client = x509.load_pem_x509_certificate(pairs[metricsserver.IDENTITY.file_stem].cert.read_bytes())
    assert client.subject.rfc4514_string() == "CN=system:metrics-server"


def test_the_command_line_verifies_the_nodes_and_scrapes_faster_than_its_timeout(tmp_path: Path) -> None:
    ca = CertificateAuthority.create(tmp_path / "pki")
    pairs = metricsserver.issue_certificates(ca, tmp_path, 0)
    argv = metricsserver.argv(
        tmp_path / "metrics-server",
        kubeconfig=tmp_path / "kubeconfig",
        pki=pairs,
        ca_cert=ca.paths.cert,
        listen_address=ADDRESS,
        port=4443,
    )
    flags = dict(item.removeprefix("--").split("=", 1) for item in argv[1:] if "=" in item)
    assert flags["bind-address"] == ADDRESS
    assert flags["kubelet-certificate-authority"] == str(ca.paths.cert)
    assert "--kubelet-insecure-tls" not in argv
    seconds = {
        name: int(re.sub(r"s$", "", flags[name])) for name in ("metric-resolution", "kubelet-request-timeout")
    }
    # metrics-server refuses to start unless the resolution is above the request timeout, and below 10 s.
    assert seconds["metric-resolution"] >= 10
    assert seconds["kubelet-request-timeout"] < seconds["metric-resolution"]


@pytest.mark.parametrize(
    ("status", "available"),
    [
        ({"conditions": [{"type": "Available", "status": "True"}]}, True),
        ({"conditions": [{"type": "Available", "status": "False", "reason": "FailedDiscoveryCheck"}]}, False),
        ({}, False),
    ],
)
def test_available_is_the_apiservices_condition(status: dict[str, object], available: bool) -> None:
    assert metricsserver.is_available(json.dumps({"status": status})) is available
    assert metricsserver.is_available(None) is False
