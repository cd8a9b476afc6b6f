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
from vk_devtools.devcluster.traffic import apply_crds

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
    return apply_crds(bin_dir, kubeconfig, folder / f"gateway-api-{VERSION}-standard.yaml", standard_crds())
