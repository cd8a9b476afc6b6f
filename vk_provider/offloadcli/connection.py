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

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio import config

from vk_provider.kit.kube import KubeApi

DEFAULT_NAMESPACE = "default"


class ConfigurationError(Exception):
    """The kubeconfig or the context cannot be used; the message says why."""


SERVICE_ACCOUNT_FOLDER = Path("/var/run/secrets/kubernetes.io/serviceaccount")
IN_CLUSTER_VARIABLE = "KUBERNETES_SERVICE_HOST"


@dataclass(frozen=True)
class Target:
    kubeconfig: Path | None
    """None: the pod's ServiceAccount (in-cluster)."""
    context: str | None
    namespace: str


def kubeconfig_path(flag: str | None, environ: dict[str, str] | None = None) -> Path:
    environ = dict(os.environ) if environ is None else environ
    if flag:
        return Path(flag).expanduser()
    listed = [part for part in environ.get("KUBECONFIG", "").split(os.pathsep) if part]
    if listed:
        return Path(listed[0]).expanduser()
    return Path.home() / ".kube" / "config"


def _read_kubeconfig(path: Path) -> dict[str, Any]:
    try:
        document = yaml.safe_load(path.read_text())
    except OSError as error:
        raise ConfigurationError(f"cannot read kubeconfig {path}: {error.strerror or error}") from None
    except yaml.YAMLError as error:
        raise ConfigurationError(f"kubeconfig {path} is not valid YAML: {error}") from None
    if not isinstance(document, dict):
        raise ConfigurationError(f"kubeconfig {path} is empty or not a mapping")
    return document


def context_namespace(document: dict[str, Any], context: str | None) -> str | None:
    """The namespace the selected (or current) context names, if any; raise if the context is unknown."""
    name = context or document.get("current-context")
    contexts = {entry.get("name"): entry.get("context") or {} for entry in document.get("contexts") or []}
    if context and context not in contexts:
        known = ", ".join(sorted(str(key) for key in contexts)) or "none"
        raise ConfigurationError(f"context {context!r} is not in the kubeconfig (contexts: {known})")
    namespace = contexts.get(name, {}).get("namespace")
    return str(namespace) if namespace else None


def in_cluster(
    kubeconfig: str | None,
    context: str | None,
    environ: dict[str, str] | None = None,
    home: Path | None = None,
) -> bool:
    """Whether to use the pod's ServiceAccount: in a pod, and nothing names a kubeconfig or a context."""
    environ = dict(os.environ) if environ is None else environ
    home = Path.home() if home is None else home
    named = kubeconfig or context or environ.get("KUBECONFIG")
    return not named and bool(environ.get(IN_CLUSTER_VARIABLE)) and not (home / ".kube" / "config").exists()


def pod_namespace(folder: Path = SERVICE_ACCOUNT_FOLDER) -> str | None:
    try:
        return (folder / "namespace").read_text().strip() or None
    except OSError:
        return None


def resolve(kubeconfig: str | None, context: str | None, namespace: str | None) -> Target:
    if in_cluster(kubeconfig, context):
        return Target(
            kubeconfig=None, context=None, namespace=namespace or pod_namespace() or DEFAULT_NAMESPACE
        )
    path = kubeconfig_path(kubeconfig)
    document = _read_kubeconfig(path)
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
