"""Which cluster a command talks to, found as kubectl and client-go find it.

`--kubeconfig` when given, else the first file of `$KUBECONFIG`, else `~/.kube/config` when it exists,
else the pod's ServiceAccount (in a pod: `KUBERNETES_SERVICE_HOST` is set). Every command resolves it
once at start, so the daemons (`node`, `router`, `xds`, `controller`) and `kubectl offload` agree, and
a mistake (a file that is missing, unreadable, not YAML, without a current context; no cluster at all)
is one line that names the file, not a traceback from deep in the client.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

IN_CLUSTER_VARIABLE = "KUBERNETES_SERVICE_HOST"
"""Set by the kubelet in every container: the sign of running in a pod."""
SERVICE_ACCOUNT_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class KubeconfigError(ValueError):
    """The kubeconfig (or the pod's ServiceAccount) cannot be used; the message says why, in one line."""


def kubeconfig_path(
    flag: str | None, environ: Mapping[str, str] | None = None, home: Path | None = None
) -> Path:
    """The file named by `--kubeconfig`, else by `$KUBECONFIG` (its first entry), else ~/.kube/config."""
    environ = os.environ if environ is None else environ
    if flag:
        return Path(flag).expanduser()
    listed = [part for part in environ.get("KUBECONFIG", "").split(os.pathsep) if part]
    if listed:
        return Path(listed[0]).expanduser()
    return (Path.home() if home is None else home) / ".kube" / "config"


def in_cluster(
    kubeconfig: str | None,
    context: str | None = None,
    environ: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> bool:
    """Whether to use the pod's ServiceAccount: in a pod, and nothing names a kubeconfig or a context."""
    environ = os.environ if environ is None else environ
    home = Path.home() if home is None else home
    named = kubeconfig or context or environ.get("KUBECONFIG")
    return not named and bool(environ.get(IN_CLUSTER_VARIABLE)) and not (home / ".kube" / "config").exists()


def pod_namespace(namespace_file: Path = SERVICE_ACCOUNT_NAMESPACE_FILE) -> str | None:
    """The namespace of the pod this process runs in (its ServiceAccount's mount); None outside a pod."""
    try:
        return namespace_file.read_text().strip() or None
    except OSError:
        return None


def read_kubeconfig(path: Path) -> dict[str, Any]:
    """The kubeconfig's document; KubeconfigError when it cannot be read or is not a mapping."""
    try:
        document = yaml.safe_load(path.read_text())
    except OSError as error:
        raise KubeconfigError(f"cannot read kubeconfig {path}: {error.strerror or error}") from None
    except yaml.YAMLError as error:
        # PyYAML's message spans lines (it draws the spot): one line here.
        raise KubeconfigError(
            f"kubeconfig {path} is not valid YAML: {' '.join(str(error).split())}"
        ) from None
    if not isinstance(document, dict):
        raise KubeconfigError(f"kubeconfig {path} is empty or not a mapping")
    return document


def daemon_kubeconfig(
    flag: str | None, environ: Mapping[str, str] | None = None, home: Path | None = None
) -> str | None:
    """The kubeconfig file a daemon uses, checked enough to fail early and clearly; None for the pod's
    ServiceAccount. KubeconfigError when the file cannot be used, or there is no file and no pod."""
    environ = os.environ if environ is None else environ
    if in_cluster(flag, None, environ, home):
        return None
    path = kubeconfig_path(flag, environ, home)
    if not flag and not environ.get("KUBECONFIG") and not path.exists():
        raise KubeconfigError(
            f"no cluster to talk to: no --kubeconfig, no $KUBECONFIG, no {path}, and not in a pod"
        )
    document = read_kubeconfig(path)
    current = document.get("current-context")
    contexts = {entry.get("name") for entry in document.get("contexts") or [] if isinstance(entry, dict)}
    if not current:
        raise KubeconfigError(f"kubeconfig {path} sets no current-context")
    if current not in contexts:
        raise KubeconfigError(f"kubeconfig {path}: its current-context {current!r} is not among its contexts")
    return str(path)
