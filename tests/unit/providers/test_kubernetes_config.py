"""The kubernetes provider's settings and how it reads the remote apiserver's error statuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vk_provider.errors import InvalidPodError, NotFoundError, TemporaryProviderError
from vk_provider.kit.resilience import AccountError, ApiStatusError
from vk_provider.provider import ProviderContext
from vk_providers.kubernetes import KubernetesProvider, parse_settings
from vk_providers.kubernetes.config import DEFAULT_NAMESPACE
from vk_providers.kubernetes.provider import remote_status_error

KUBECONFIG = """
apiVersion: v1
kind: Config
clusters: [{name: remote, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: admin, user: {token: abc}}]
contexts: [{name: burst, context: {cluster: remote, user: admin}}]
current-context: burst
"""


def test_defaults_need_only_the_kubeconfig() -> None:
    settings = parse_settings({"kubeconfig_file": "/etc/remote/kubeconfig"})
    assert settings.kubeconfig_file == Path("/etc/remote/kubeconfig")
    assert settings.namespace == DEFAULT_NAMESPACE
    assert settings.service_type == "ClusterIP"
    assert settings.context is None


def test_the_kubeconfig_is_required() -> None:
    with pytest.raises(ValueError, match="kubeconfig_file"):
        parse_settings({})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("service_type", "ExternalName"),
        ("namespace", "Not_A_Label"),
        ("name_prefix", "a-very-long-prefix-for-names"),
        ("tolerations", [{"key": "gpu", "operatr": "Exists"}]),
        ("node_selector", {"pool": 3}),
        ("max_attempts", 0),
    ],
)
def test_a_wrong_value_names_its_key(key: str, value: Any) -> None:
    with pytest.raises(ValueError, match=key):
        parse_settings({"kubeconfig_file": "k", key: value})


def test_an_unknown_context_or_unreadable_kubeconfig_stops_the_provider_at_start(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)

    def provider(**config: Any) -> KubernetesProvider:
        context = ProviderContext(node_name="n", config=config, host_ip="127.0.0.1", state_dir=tmp_path)
        return KubernetesProvider(context)

    assert provider(kubeconfig_file=str(kubeconfig), context="burst").settings.context == "burst"
    with pytest.raises(ValueError, match="no context 'elsewhere'"):
        provider(kubeconfig_file=str(kubeconfig), context="elsewhere")
    with pytest.raises(ValueError, match="cannot read"):
        provider(kubeconfig_file=str(tmp_path / "missing"))


@pytest.mark.parametrize(
    ("status", "detail", "expected"),
    [
        (422, 'Pod "vk-1" is invalid: spec.containers[0].image: Required value', InvalidPodError),
        (400, "quantities must match the regular expression", InvalidPodError),
        (
            403,
            'pods "vk-1" is forbidden: exceeded quota: gpu, requested: nvidia.com/gpu=1',
            TemporaryProviderError,
        ),
        (
            403,
            'pods "vk-1" is forbidden: error looking up service account ns/default',
            TemporaryProviderError,
        ),
        (
            403,
            "unable to create new content in namespace x because it is being terminated",
            TemporaryProviderError,
        ),
        (
            403,
            'User "burst" cannot create resource "pods" in API group "" in the namespace "x"',
            AccountError,
        ),
        (403, 'pods "vk-1" is forbidden: violates PodSecurity "restricted:latest"', InvalidPodError),
        (401, "Unauthorized", AccountError),
        (404, 'namespaces "x" not found', NotFoundError),
        (409, "the object has been modified", TemporaryProviderError),
    ],
)
def test_remote_statuses_map_to_contract_errors(status: int, detail: str, expected: type[Exception]) -> None:
    error = remote_status_error(ApiStatusError(status, detail), "remote Kubernetes create pod")
    assert type(error) is expected
    assert detail in str(error)
