"""Helm, for the chart's tests: built from our pinned Go module (`gomod-helm/`), like the control plane.

The tests run `helm lint` and `helm template` on `charts/vk-provider` and compare what it renders with
what kustomize builds from `manifests/`; nothing here installs into a cluster by itself.
"""

from __future__ import annotations

import sys
from pathlib import Path

from vk_devtools.devcluster.building import BinaryCache, Component, GoBuild, VersionStamp

MODULE = "helm.sh/helm/v4"


def _version_variables(version: str) -> dict[str, str]:
    # What Helm's Makefile stamps, so `helm version` names the pinned release.
    return {
        f"{MODULE}/internal/version.version": version,
        f"{MODULE}/internal/version.gitTreeState": "clean",
    }


HELM = GoBuild(
    name="Helm",
    cache_folder="helm",
    gomod_dir=Path(__file__).with_name("gomod-helm"),
    components=(Component("helm", f"{MODULE}/cmd/helm", VersionStamp(MODULE, _version_variables)),),
    folder_modules=(("helm", MODULE),),
    cold_build_note="A cold build takes 3 to 5 minutes on 2 cores.",
)


def helm_binary() -> Path:
    """The built `helm`, building it first if the cache lacks it (progress on stderr)."""
    return BinaryCache.for_build(HELM).ensure(wait=True, out=sys.stderr) / "helm"
