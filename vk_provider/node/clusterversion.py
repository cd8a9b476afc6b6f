"""Say once, at start-up, which Kubernetes the node runs against and what an older one lacks.

The node works on every supported minor (`kit.kubeversions`), but some of what it offers needs a newer
apiserver; on an older one it keeps working without it. Saying so in the log at start is what keeps that
from being a silent gap: an operator reading why `kubectl exec` goes over SPDY finds it there.
"""

from __future__ import annotations

import logging

import aiohttp

from vk_provider.kit.kube import KubeApi, KubeApiError
from vk_provider.kit.kubeversions import (
    SUPPORTED_RANGE,
    WEBSOCKET_PASSTHROUGH,
    Feature,
    InvalidKubernetesVersionError,
    KubernetesVersion,
    cluster_version,
    support_problem,
    untested_note,
)
from vk_provider.node.settings import NodeSettings

logger = logging.getLogger(__name__)


def node_features(settings: NodeSettings) -> tuple[Feature, ...]:
    """The version-dependent features this node's settings use."""
    return (WEBSOCKET_PASSTHROUGH,) if settings.kubelet_websocket else ()


async def read_cluster_version(api: KubeApi) -> KubernetesVersion | None:
    """The apiserver's version from `/version`; None (and a warning) when it cannot be read, since the node
    must run anyway: the version only decides what it says. An apiserver not reachable yet is one of
    those cases (one line, no traceback): the Lease and the watches retry it after."""
    try:
        return await cluster_version(api)
    except (KubeApiError, InvalidKubernetesVersionError, aiohttp.ClientError, OSError, TimeoutError) as error:
        logger.warning("cannot read the cluster's Kubernetes version from /version: %s", error)
        return None


def version_messages(version: KubernetesVersion, features: tuple[Feature, ...]) -> list[tuple[int, str]]:
    """(log level, message) pairs for the node's start: the version, then each gap. Pure, for the tests."""
    problem = support_problem(version)
    messages = [(logging.WARNING, problem)] if problem else []
    note = untested_note(version)
    if note:
        messages.append((logging.INFO, note))
    if not messages:
        messages.append((logging.INFO, f"cluster Kubernetes {version} (supported: {SUPPORTED_RANGE})"))
    for feature in features:
        gap = feature.unavailable(version)
        if gap:
            messages.append((logging.WARNING, gap))
    return messages


async def report_cluster_version(api: KubeApi, settings: NodeSettings) -> KubernetesVersion | None:
    version = await read_cluster_version(api)
    if version is not None:
        for level, message in version_messages(version, node_features(settings)):
            logger.log(level, "node %s: %s", settings.node_name, message)
    return version
