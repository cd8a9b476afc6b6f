"""Which cluster and namespace a command talks to, resolved the way kubectl users expect.

The kubeconfig comes from --kubeconfig, else the first file of $KUBECONFIG, else ~/.kube/config; the
context from --context, else the file's current context; the namespace from -n, else the context's
namespace, else "default". `KubeApi.from_kubeconfig` cannot select a context, so we build the client
here with kubernetes_asyncio and wrap it.

In a pod (the chart's uninstall hook runs `kubectl-offload uninstall` in one), with no --kubeconfig, no
$KUBECONFIG and no ~/.kube/config, the pod's ServiceAccount is used, as kubectl does: the namespace
then defaults to the pod's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes_asyncio import config

from vk_provider.kit import kubeconfigs
from vk_provider.kit.kube import KubeApi
from vk_provider.kit.kubeconfigs import KubeconfigError, in_cluster, kubeconfig_path, read_kubeconfig

DEFAULT_NAMESPACE = "default"


ConfigurationError = KubeconfigError
"""The kubeconfig or the context cannot be used; the message says why."""

SERVICE_ACCOUNT_FOLDER = Path("/var/run/secrets/kubernetes.io/serviceaccount")


@dataclass(frozen=True)
class Target:
    kubeconfig: Path | None
    """None: the pod's ServiceAccount (in-cluster)."""
    context: str | None
    namespace: str


def context_namespace(document: dict[str, Any], context: str | None) -> str | None:
    """The namespace the selected (or current) context names, if any; raise if the context is unknown."""
    name = context or document.get("current-context")
    contexts = {entry.get("name"): entry.get("context") or {} for entry in document.get("contexts") or []}
    if context and context not in contexts:
        known = ", ".join(sorted(str(key) for key in contexts)) or "none"
        raise ConfigurationError(f"context {context!r} is not in the kubeconfig (contexts: {known})")
    namespace = contexts.get(name, {}).get("namespace")
    return str(namespace) if namespace else None


def pod_namespace(folder: Path = SERVICE_ACCOUNT_FOLDER) -> str | None:
    return kubeconfigs.pod_namespace(folder / "namespace")


def resolve(kubeconfig: str | None, context: str | None, namespace: str | None) -> Target:
    if in_cluster(kubeconfig, context):
        return Target(
            kubeconfig=None, context=None, namespace=namespace or pod_namespace() or DEFAULT_NAMESPACE
        )
    path = kubeconfig_path(kubeconfig)
    document = read_kubeconfig(path)
    from_context = context_namespace(document, context)
    return Target(kubeconfig=path, context=context, namespace=namespace or from_context or DEFAULT_NAMESPACE)


async def connect(target: Target) -> KubeApi:
    if target.kubeconfig is None:
        try:
            return await KubeApi.from_kubeconfig(None)
        except config.ConfigException as error:
            raise ConfigurationError(f"cannot use the pod's ServiceAccount: {error}") from None
    try:
        api_client = await config.new_client_from_config(
            config_file=str(target.kubeconfig), context=target.context
        )
    except config.ConfigException as error:
        raise ConfigurationError(f"cannot use kubeconfig {target.kubeconfig}: {error}") from None
    return KubeApi(api_client)
