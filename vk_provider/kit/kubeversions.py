"""The Kubernetes versions vk-provider supports, and the features that need a newer one than the oldest.

The one place for the supported range: the node's `--help`, its start-up check (`node.clusterversion`),
the policy's messages and the tests read it here; the chart's `kubeVersion` (Chart.yaml) must say the
same, which a unit test checks.

Why 1.35 is the oldest: it is the oldest minor still in standard support on all three managed services
in December 2026 (EKS: 14 months per minor, 1.34's ended 2 Dec 2026, 1.35's ends 27 Mar 2027; GKE:
1.34's maintenance ended 1 Oct 2026, 1.35's active support ends 28 Feb 2027; AKS: the newest GA minor
and the two before it, so 1.35 with 1.37 upstream). 1.37 is the newest minor released, and tested.

A feature that needs a newer minor than the cluster's is not an error: the component says once what it
does without it (`unavailable`), and keeps working.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from vk_provider.kit.kube import KubeApi

OLDEST_SUPPORTED = (1, 35)
"""The oldest Kubernetes minor vk-provider supports (and tests, with the 1.35 development plane)."""
NEWEST_TESTED = (1, 37)
"""The newest minor tested; newer ones are expected to work, only not yet tested."""


def minor_text(minor: tuple[int, int]) -> str:
    return f"{minor[0]}.{minor[1]}"


SUPPORTED_RANGE = f"{minor_text(OLDEST_SUPPORTED)} to {minor_text(NEWEST_TESTED)}"
"""For people: "1.35 to 1.37"."""
HELM_KUBE_VERSION = f">={minor_text(OLDEST_SUPPORTED)}.0-0"
"""What the chart's Chart.yaml `kubeVersion` must say (`-0` lets pre-release and vendor builds in)."""


class InvalidKubernetesVersionError(ValueError):
    """A version string that is not `[v]MAJOR.MINOR[.PATCH][-pre][+build]`."""


_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?([-+].*)?$")


@dataclasses.dataclass(frozen=True, slots=True, order=True)
class KubernetesVersion:
    major: int
    minor: int
    patch: int = 0
    text: str = dataclasses.field(default="", compare=False)
    """As the server said it (`v1.35.4-eks-1a2b3c`), for messages."""

    @classmethod
    def parse(cls, text: str) -> KubernetesVersion:
        match = _VERSION.match(text.strip())
        if match is None:
            raise InvalidKubernetesVersionError(
                f"{text!r} is not a Kubernetes version (expected MAJOR.MINOR[.PATCH], e.g. 1.35 or v1.35.4)"
            )
        major, minor, patch, _ = match.groups()
        return cls(int(major), int(minor), int(patch or 0), text.strip())

    @classmethod
    def from_version_info(cls, info: Mapping[str, Any]) -> KubernetesVersion:
        """From the apiserver's `/version` answer: its `gitVersion`, else `major` and `minor` (some
        managed services write the minor as "35+")."""
        git_version = info.get("gitVersion")
        if isinstance(git_version, str) and _VERSION.match(git_version.strip()):
            return cls.parse(git_version)
        major = str(info.get("major", "")).rstrip("+")
        minor = str(info.get("minor", "")).rstrip("+")
        if major.isdigit() and minor.isdigit():
            return cls(int(major), int(minor), 0, f"{major}.{minor}")
        raise InvalidKubernetesVersionError(f"the apiserver's /version names no version: {dict(info)!r}")

    @property
    def minor_version(self) -> tuple[int, int]:
        return (self.major, self.minor)

    def __str__(self) -> str:
        return self.text or f"v{self.major}.{self.minor}.{self.patch}"


async def cluster_version(api: KubeApi) -> KubernetesVersion:
    """The apiserver's version, from `/version` (readable by every authenticated identity). Raises
    KubeApiError or InvalidKubernetesVersionError; callers decide whether a guess will do."""
    return KubernetesVersion.from_version_info(await api.get("/version"))


def support_problem(version: KubernetesVersion) -> str | None:
    """Why `version` is outside what vk-provider supports, or None when it is inside (or newer than tested,
    which `untested_note` says)."""
    if version.minor_version < OLDEST_SUPPORTED:
        return (
            f"Kubernetes {version} is older than the oldest supported minor, {minor_text(OLDEST_SUPPORTED)} "
            f"(supported: {SUPPORTED_RANGE}); it is not tested and may not work"
        )
    return None


def untested_note(version: KubernetesVersion) -> str | None:
    if version.minor_version > NEWEST_TESTED:
        return f"Kubernetes {version} is newer than the newest tested minor, {minor_text(NEWEST_TESTED)}"
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class Feature:
    """Something vk-provider uses that not every supported minor has."""

    name: str
    needs: tuple[int, int]
    """The oldest minor that has it."""
    without: str
    """What happens on an older cluster instead."""

    def available_on(self, version: KubernetesVersion) -> bool:
        return version.minor_version >= self.needs

    def unavailable(self, version: KubernetesVersion) -> str | None:
        """The one-line message for an older cluster, None when the cluster has it."""
        if self.available_on(version):
            return None
        return f"cluster {version}: {self.name} unavailable (needs {minor_text(self.needs)}+); {self.without}"


WEBSOCKET_PASSTHROUGH = Feature(
    name="WebSocket passthrough of exec, attach and port-forward",
    # The apiserver's ExtendWebSocketsToKubelet and the Node's status.declaredFeatures: beta, on by
    # default, in 1.36; NodeDeclaredFeatures is alpha and off in 1.35, so the field is dropped there.
    needs=(1, 36),
    without="the apiserver translates kubectl's WebSocket streams to SPDY for the node, which serves both",
)
NATIVE_POD_GROUPS = Feature(
    name="native PodGroups (scheduling.k8s.io/v1beta1)",
    # 1.35 has only the alpha Workload API (v1alpha1, no PodGroup objects) and 1.36 an alpha v1alpha2
    # PodGroup; the beta v1beta1 PodGroup the policy reads is 1.37's.
    needs=(1, 37),
    without="training demand is read from pods and Kueue Workloads only",
)
FEATURES = (WEBSOCKET_PASSTHROUGH, NATIVE_POD_GROUPS)
