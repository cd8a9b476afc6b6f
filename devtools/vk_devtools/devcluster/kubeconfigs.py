"""Write kubeconfig files that point a client certificate at the development apiserver."""

from __future__ import annotations

from pathlib import Path

import yaml

from vk_devtools.devcluster.pki import KeyPair

CLUSTER_NAME = "vk-provider-dev"


def write_kubeconfig(path: Path, *, server: str, ca_cert: Path, client: KeyPair, user: str) -> Path:
    """A kubeconfig with one cluster, one user and one current context, referencing PEM files by path."""
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": CLUSTER_NAME, "cluster": {"server": server, "certificate-authority": str(ca_cert)}}
        ],
        "users": [
            {"name": user, "user": {"client-certificate": str(client.cert), "client-key": str(client.key)}}
        ],
        "contexts": [{"name": CLUSTER_NAME, "context": {"cluster": CLUSTER_NAME, "user": user}}],
        "current-context": CLUSTER_NAME,
        "preferences": {},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    path.chmod(0o600)
    return path
