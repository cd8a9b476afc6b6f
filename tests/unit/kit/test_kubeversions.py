"""The supported Kubernetes range, written once (`kit.kubeversions`), and what is said about a version."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from vk_provider.cli import main
from vk_provider.kit.kubeversions import (
    FEATURES,
    HELM_KUBE_VERSION,
    NATIVE_POD_GROUPS,
    NEWEST_TESTED,
    OLDEST_SUPPORTED,
    SUPPORTED_RANGE,
    WEBSOCKET_PASSTHROUGH,
    InvalidKubernetesVersionError,
    KubernetesVersion,
    support_problem,
    untested_note,
)

pytestmark = pytest.mark.unit

CHART = Path(__file__).parents[3] / "charts" / "vk-provider" / "Chart.yaml"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("v1.35.4", (1, 35, 4)),
        ("1.35", (1, 35, 0)),
        ("v1.37.2-eks-1a2b3c", (1, 37, 2)),
        ("v1.36.1+k3s1", (1, 36, 1)),
        (" 1.35.0 ", (1, 35, 0)),
    ],
)
def test_versions_parse_as_servers_and_people_write_them(text: str, expected: tuple[int, int, int]) -> None:
    version = KubernetesVersion.parse(text)
    assert (version.major, version.minor, version.patch) == expected
    assert str(version) == text.strip()


@pytest.mark.parametrize("text", ["", "1", "one.two", "v1.x.3", "1.35.4.5"])
def test_a_bad_version_is_a_clear_error(text: str) -> None:
    with pytest.raises(InvalidKubernetesVersionError, match="is not a Kubernetes version"):
        KubernetesVersion.parse(text)


def test_the_version_endpoint_is_read_from_git_version_else_major_and_minor() -> None:
    assert KubernetesVersion.from_version_info({"gitVersion": "v1.35.4"}).minor_version == (1, 35)
    # Some managed services write the minor as "35+" and a gitVersion of their own.
    odd = KubernetesVersion.from_version_info({"major": "1", "minor": "35+", "gitVersion": "custom"})
    assert odd.minor_version == (1, 35)
    with pytest.raises(InvalidKubernetesVersionError, match="names no version"):
        KubernetesVersion.from_version_info({"platform": "linux/amd64"})


def test_versions_compare_by_number_not_text() -> None:
    parse = KubernetesVersion.parse
    assert parse("v1.9.0") < parse("v1.35.0") < parse("1.35.4")
    assert parse("v1.35.4") == parse("1.35.4-gke.100")


def test_the_range_is_1_35_to_1_37_and_only_older_minors_are_a_problem() -> None:
    assert (OLDEST_SUPPORTED, NEWEST_TESTED, SUPPORTED_RANGE) == ((1, 35), (1, 37), "1.35 to 1.37")
    problem = support_problem(KubernetesVersion.parse("v1.34.9"))
    assert problem is not None
    assert "older than the oldest supported minor, 1.35 (supported: 1.35 to 1.37)" in problem
    assert support_problem(KubernetesVersion.parse("v1.35.0")) is None
    assert support_problem(KubernetesVersion.parse("v1.38.0")) is None
    assert untested_note(KubernetesVersion.parse("v1.38.0")) == (
        "Kubernetes v1.38.0 is newer than the newest tested minor, 1.37"
    )
    assert untested_note(KubernetesVersion.parse("v1.37.2")) is None


def test_a_feature_is_unavailable_below_the_minor_it_needs_and_says_what_happens_instead() -> None:
    old = KubernetesVersion.parse("v1.35.4")
    assert WEBSOCKET_PASSTHROUGH.unavailable(old) == (
        "cluster v1.35.4: WebSocket passthrough of exec, attach and port-forward unavailable (needs 1.36+); "
        "the apiserver translates kubectl's WebSocket streams to SPDY for the node, which serves both"
    )
    assert WEBSOCKET_PASSTHROUGH.unavailable(KubernetesVersion.parse("v1.36.0")) is None
    assert NATIVE_POD_GROUPS.unavailable(KubernetesVersion.parse("v1.36.3")) is not None
    assert NATIVE_POD_GROUPS.unavailable(KubernetesVersion.parse("v1.37.2")) is None
    # Every feature exists within the supported range, or it would never be available.
    assert all(OLDEST_SUPPORTED < feature.needs <= NEWEST_TESTED for feature in FEATURES)


def test_the_chart_declares_the_same_oldest_minor() -> None:
    chart = yaml.safe_load(CHART.read_text())
    assert chart["kubeVersion"] == HELM_KUBE_VERSION == ">=1.35.0-0"


def test_the_node_s_help_names_the_supported_range(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["node", "--help"])
    assert exited.value.code == 0
    assert f"Supported clusters: Kubernetes {SUPPORTED_RANGE}" in " ".join(capsys.readouterr().out.split())
