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
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
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
    server: str | None = None
    """The apiserver's URL as the kubeconfig names it, for messages; None when unknown."""


def context_namespace(document: dict[str, Any], context: str | None) -> str | None:
    """The namespace the selected (or current) context names, if any; raise if the context is unknown."""
    name = context or document.get("current-context")
    contexts = {entry.get("name"): entry.get("context") or {} for entry in document.get("contexts") or []}
    if context and context not in contexts:
        known = ", ".join(sorted(str(key) for key in contexts)) or "none"
        raise ConfigurationError(f"context {context!r} is not in the kubeconfig (contexts: {known})")
    namespace = contexts.get(name, {}).get("namespace")
    return str(namespace) if namespace else None


def context_server(document: dict[str, Any], context: str | None) -> str | None:
    """The server URL of the selected (or current) context's cluster, if the kubeconfig names one."""
    name = context or document.get("current-context")
    contexts = {entry.get("name"): entry.get("context") or {} for entry in document.get("contexts") or []}
    cluster_name = (contexts.get(name) or {}).get("cluster")
    clusters = {entry.get("name"): entry.get("cluster") or {} for entry in document.get("clusters") or []}
    server = (clusters.get(cluster_name) or {}).get("server")
    return str(server) if server else None


def pod_namespace(folder: Path = SERVICE_ACCOUNT_FOLDER) -> str | None:
    return kubeconfigs.pod_namespace(folder / "namespace")


def resolve(kubeconfig: str | None, context: str | None, namespace: str | None) -> Target:
    if in_cluster(kubeconfig, context):
        host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
        return Target(
            kubeconfig=None,
            context=None,
            namespace=namespace or pod_namespace() or DEFAULT_NAMESPACE,
            server=f"https://{host}:{port}" if host and port else None,
        )
    path = kubeconfig_path(kubeconfig)
    document = read_kubeconfig(path)
    from_context = context_namespace(document, context)
    return Target(
        kubeconfig=path,
        context=context,
        namespace=namespace or from_context or DEFAULT_NAMESPACE,
        server=context_server(document, context),
    )


UNREACHABLE = (aiohttp.ClientError, OSError, TimeoutError)
"""What a request raises when it never got an answer from the apiserver."""


def unreachable_reason(error: BaseException) -> str:
    """Why the apiserver could not be reached, in one line: refused, a name that does not resolve, a
    certificate not trusted, no answer in time, or aiohttp's own words."""
    if isinstance(error, aiohttp.ClientConnectorCertificateError):
        cause = error.certificate_error
        why = getattr(cause, "verify_message", None) or " ".join(str(cause).split())
        return f"its TLS certificate is not trusted ({why})"
    if isinstance(error, aiohttp.ClientConnectorSSLError):
        return f"the TLS handshake failed ({error.os_error})"
    if isinstance(error, aiohttp.ClientConnectorError):
        return _connector_reason(error)
    if isinstance(error, TimeoutError):
        return "no answer in time"
    return " ".join(str(error).split()) or type(error).__name__


def _connector_reason(error: aiohttp.ClientConnectorError) -> str:
    cause = error.os_error
    if isinstance(cause, socket.gaierror) or isinstance(error, aiohttp.ClientConnectorDNSError):
        return f"the name {error.host} does not resolve ({cause.strerror or cause})"
    if isinstance(cause, ConnectionRefusedError):
        return f"the connection to {error.host}:{error.port} was refused"
    return f"cannot connect to {error.host}:{error.port} ({cause.strerror or cause})"


def unreachable_message(error: BaseException, server: str | None) -> str:
    """`cannot reach the apiserver at https://...: the connection to 127.0.0.1:1 was refused`."""
    where = f" at {server}" if server else ""
    return f"cannot reach the apiserver{where}: {unreachable_reason(error)}"


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
