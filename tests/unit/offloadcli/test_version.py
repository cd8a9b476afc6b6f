"""`kubectl offload version`: the client's version always, the controller's from its leader Lease, and
"unreachable" with the reason instead of a failure when the Lease cannot be read."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest

from tests.unit.node.test_leadership import Clock, LeaseStore
from vk_provider import __version__
from vk_provider._kube.leaderelection import LeaderElector
from vk_provider.cli import offload_main
from vk_provider.controller.metrics import ControllerMetrics
from vk_provider.kit.kube import KubeApi, KubeApiError
from vk_provider.offload.names import CONTROLLER_LEASE, CONTROLLER_NAMESPACE, VERSION_ANNOTATION
from vk_provider.offloadcli.version import controller_version, describe_lease, unreachable_reason

pytestmark = pytest.mark.unit


async def test_the_controller_s_leader_lease_carries_its_version_through_every_write() -> None:
    store, clock = LeaseStore(), Clock()

    def replica(identity: str, version: str) -> LeaderElector:
        return LeaderElector(
            cast(KubeApi, store),
            namespace=CONTROLLER_NAMESPACE,
            name=CONTROLLER_LEASE,
            identity=identity,
            lease_seconds=6.0,
            renew_seconds=1.0,
            monotonic=clock,
            annotations={VERSION_ANNOTATION: version},
        )

    old, new = replica("a", "0.0.9"), replica("b", __version__)
    assert await old._attempt()  # created
    assert await old._attempt()  # renewed by the fast path
    assert store.lease is not None
    assert store.lease["metadata"]["annotations"] == {VERSION_ANNOTATION: "0.0.9"}
    store.lease["metadata"]["annotations"]["someone.else/note"] = "kept"
    await old.release()
    assert await new._attempt()  # taken over: the Lease now says the new leader's version
    text = await controller_version(cast(KubeApi, store), CONTROLLER_NAMESPACE, CONTROLLER_LEASE)
    assert text == f"{__version__} (leader b)"
    assert store.lease["metadata"]["annotations"]["someone.else/note"] == "kept"


def test_a_lease_without_a_leader_or_without_the_annotation_says_so() -> None:
    released = {"metadata": {"annotations": {VERSION_ANNOTATION: "0.1.0"}}, "spec": {"holderIdentity": None}}
    assert describe_lease(released, "ns/lease") == "0.1.0 (no leader now: the last one ran it)"
    assert describe_lease({"metadata": {}, "spec": {}}, "ns/lease") == (
        f"unknown (the Lease ns/lease carries no {VERSION_ANNOTATION} annotation)"
    )


def test_each_way_of_not_reaching_the_lease_has_its_reason() -> None:
    missing = KubeApiError(404, "NotFound", "not found")
    assert "no Lease ns/l: is the controller installed" in unreachable_reason(missing, "ns", "l")
    forbidden = KubeApiError(403, "Forbidden", "leases is forbidden")
    assert (
        unreachable_reason(forbidden, "ns", "l")
        == "the apiserver answered 403 Forbidden: leases is forbidden"
    )
    assert unreachable_reason(TimeoutError(), "ns", "l") == "no answer from the apiserver in time"


def test_an_unreachable_cluster_prints_both_lines_and_succeeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: t}}]\n"
    )
    assert offload_main(["version", "--kubeconfig", str(kubeconfig), "--request-timeout", "5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"client: {__version__}"
    assert lines[1].startswith("controller: unreachable (")
    assert "127.0.0.1" in lines[1]  # the reason names where it tried


def test_every_command_answers_version(capsys: pytest.CaptureFixture[str]) -> None:
    for words in (
        ["--version"],
        ["list", "--version"],
        ["policy", "status", "--version"],
        ["version", "--version"],
    ):
        with pytest.raises(SystemExit) as exit_:
            offload_main(words)
        assert exit_.value.code == 0
        assert capsys.readouterr().out == f"kubectl-offload {__version__}\n"


def test_the_controller_exports_its_version_as_build_info() -> None:
    text = ControllerMetrics().exposition().decode()
    assert f'vk_provider_build_info{{version="{__version__}"}} 1.0' in text


@pytest.mark.parametrize("value", ["0", "soon", "nan", "-5"])
def test_a_bad_request_timeout_is_one_line_and_exit_2(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        offload_main(["version", f"--request-timeout={value}"])
    assert exited.value.code == 2
    problem = capsys.readouterr().err.rstrip("\n").rpartition("\n")[2]
    assert problem == (
        f"kubectl offload version: error: argument --request-timeout: {value!r} is not a timeout like "
        "10m, 1h30m or 600"
    )
