"""The node says once at start which Kubernetes it runs against, and what an older one lacks."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, cast

import pytest

from vk_provider.kit.kube import KubeApi, KubeApiError
from vk_provider.kit.kubeversions import KubernetesVersion
from vk_provider.node.clusterversion import node_features, report_cluster_version, version_messages
from vk_provider.node.settings import NodeSettings

pytestmark = pytest.mark.unit


class VersionApi:
    """Answers `/version` only, as the apiserver does, or fails as a forbidden one would."""

    def __init__(self, answer: Mapping[str, Any] | KubeApiError) -> None:
        self.answer = answer
        self.paths: list[str] = []

    async def get(self, path: str, **_: Any) -> Mapping[str, Any]:
        self.paths.append(path)
        if isinstance(self.answer, KubeApiError):
            raise self.answer
        return self.answer


def test_a_supported_cluster_gets_one_line_and_no_gap() -> None:
    messages = version_messages(KubernetesVersion.parse("v1.37.2"), node_features(NodeSettings()))
    assert messages == [(logging.INFO, "cluster Kubernetes v1.37.2 (supported: 1.35 to 1.37)")]


def test_on_1_35_the_websocket_passthrough_is_said_to_be_unavailable_only_if_the_node_declares_it() -> None:
    old = KubernetesVersion.parse("v1.35.4")
    messages = version_messages(old, node_features(NodeSettings()))
    assert messages[1][0] == logging.WARNING
    assert messages[1][1].startswith(
        "cluster v1.35.4: WebSocket passthrough of exec, attach and port-forward"
    )
    assert "(needs 1.36+)" in messages[1][1]
    assert version_messages(old, node_features(NodeSettings(kubelet_websocket=False))) == messages[:1]


def test_an_older_cluster_than_supported_is_a_warning_not_a_refusal() -> None:
    messages = version_messages(KubernetesVersion.parse("v1.33.1"), ())
    assert messages == [
        (
            logging.WARNING,
            "Kubernetes v1.33.1 is older than the oldest supported minor, 1.35 (supported: 1.35 to 1.37); "
            "it is not tested and may not work",
        )
    ]


async def test_the_daemon_reads_slash_version_and_logs_each_message_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = VersionApi({"major": "1", "minor": "35", "gitVersion": "v1.35.4"})
    with caplog.at_level(logging.INFO, logger="vk_provider.node.clusterversion"):
        version = await report_cluster_version(cast(KubeApi, api), NodeSettings(node_name="burst"))
    assert version == KubernetesVersion.parse("v1.35.4")
    assert api.paths == ["/version"]
    lines = [record.getMessage() for record in caplog.records]
    assert lines[0] == "node burst: cluster Kubernetes v1.35.4 (supported: 1.35 to 1.37)"
    assert len(lines) == 2
    assert "needs 1.36+" in lines[1]


async def test_an_unreadable_version_is_a_warning_and_the_node_runs_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = VersionApi(KubeApiError(403, "Forbidden", "no"))
    with caplog.at_level(logging.WARNING, logger="vk_provider.node.clusterversion"):
        assert await report_cluster_version(cast(KubeApi, api), NodeSettings()) is None
    assert "cannot read the cluster's Kubernetes version from /version" in caplog.text
