"""The Gateway API's CRDs, from the pinned upstream module, for the `gatewayapi` data plane's tests.

The CRDs are the standard channel's (`config/crd/standard`) of `sigs.k8s.io/gateway-api` at
`VERSION`, fetched through the Go module proxy like the control plane's sources. Only the
CustomResourceDefinitions are applied: the channel's ValidatingAdmissionPolicy guards upgrades
between channels, which a test plane never does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from vk_devtools.devcluster.building import module_source
from vk_devtools.devcluster.traffic import kubectl_apply

MODULE = "sigs.k8s.io/gateway-api"
VERSION = "v1.6.1"
"""The version Envoy Gateway v1.9.1 builds against."""


def standard_crds() -> list[dict[str, Any]]:
    """The standard channel's CustomResourceDefinitions (GatewayClass, Gateway, HTTPRoute, ...)."""
    folder = module_source(MODULE, VERSION) / "config" / "crd" / "standard"
    documents = [
        document
        for path in sorted(folder.glob("*.yaml"))
        for document in yaml.safe_load_all(path.read_text())
        if document and document.get("kind") == "CustomResourceDefinition"
    ]
    if not documents:
        raise RuntimeError(f"no CustomResourceDefinition in {folder}")
    return documents


def install_crds(bin_dir: Path, kubeconfig: Path, folder: Path) -> list[str]:
    """Apply the CRDs (server-side: one of them is larger than a client-side apply's annotation may
    be) and wait until they are Established; their names."""
    crds = standard_crds()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"gateway-api-{VERSION}-standard.yaml"
    path.write_text(yaml.safe_dump_all(crds))
    kubectl_apply(bin_dir, kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", str(path))
    names = [str(crd["metadata"]["name"]) for crd in crds]
    kubectl_apply(
        bin_dir,
        kubeconfig,
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        *(f"crd/{name}" for name in names),
    )
    return names
