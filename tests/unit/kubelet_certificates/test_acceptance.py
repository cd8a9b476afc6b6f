"""Who refuses a self-signed certificate: the apiserver's answer through its node proxy (`probe`) decides
between `RejectedByClients` (logs and exec fail) and `RejectedByOtherClients` (only `kubectl top`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.unit.kubelet_certificates import SigningCa
from tests.unit.kubelet_certificates.test_modes import NAMES, auto, eventually, refuse, running
from tests.unit.kubelet_certificates.test_tls import tls_server
from vk_provider.kubelet.certificates import ServingCertificate
from vk_provider.kubelet.certificates.probe import (
    INSTANCE_HEADER,
    INSTANCE_ID,
    ProbeResult,
    Verdict,
    classify,
)

TLS_FAILURE = (
    "error trying to reach service: tls: failed to verify certificate: x509: certificate signed by unknown "
    'authority (possibly because of "crypto/rsa: verification error")'
)


class ScriptedProbe:
    """Answers with `verdict` and counts the questions."""

    def __init__(self, verdict: Verdict, detail: str = "scripted") -> None:
        self.result = ProbeResult(verdict, detail)
        self.calls = 0

    async def __call__(self) -> ProbeResult:
        self.calls += 1
        return self.result


@contextlib.asynccontextmanager
async def checking(serving: ServingCertificate, probe: ScriptedProbe) -> AsyncIterator[None]:
    task = asyncio.create_task(serving.check_acceptance(probe))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@pytest.mark.parametrize(
    ("status", "message", "headers", "verdict"),
    [
        (200, "ok", {INSTANCE_HEADER: INSTANCE_ID}, Verdict.ACCEPTED),
        (200, "ok", {INSTANCE_HEADER: "another-replica"}, Verdict.UNKNOWN),
        (200, "ok", None, Verdict.UNKNOWN),  # a kubelet that is not ours
        (503, TLS_FAILURE, None, Verdict.REFUSED),
        (502, "x509: certificate is valid for 10.0.0.1, not 10.0.0.2", None, Verdict.REFUSED),
        (403, 'nodes "n1" is forbidden: cannot get resource "nodes/proxy"', None, Verdict.UNKNOWN),
        (404, 'nodes "n1" not found', None, Verdict.UNKNOWN),
        (
            503,
            "error trying to reach service: dial tcp 10.0.0.1:10250: connect: connection refused",
            None,
            Verdict.UNKNOWN,
        ),
    ],
    ids=[
        "ours",
        "another-replica",
        "not-ours",
        "unknown-ca",
        "wrong-address",
        "forbidden",
        "no-node",
        "unreachable",
    ],
)
def test_the_apiserver_s_answer_is_read_as_a_verdict(
    status: int, message: str, headers: dict[str, str] | None, verdict: Verdict
) -> None:
    result = classify(status, message, headers)
    assert result.verdict is verdict
    if status == 403:
        assert "nodes/proxy" in result.detail  # what to grant
    if verdict is Verdict.REFUSED:
        assert message in result.detail


async def test_an_apiserver_that_refuses_is_reported_at_the_fallback_before_anyone_uses_the_node(
    ca_file: Path,
) -> None:
    serving, _ = auto(ca_file, wait_seconds=0.0)
    probe = ScriptedProbe(Verdict.REFUSED, f"the apiserver's node proxy answered 503: {TLS_FAILURE}")
    async with running(serving), checking(serving, probe):
        await eventually(lambda: serving.state.reason == "RejectedByClients", "the apiserver's refusal")
        assert serving.refused_handshakes == 0  # nobody else was asked
        assert not serving.state.working
        assert "the apiserver refuses" in serving.state.message
        assert "x509: certificate signed by unknown authority" in serving.state.message
        assert "serving_certificate csr" in serving.state.message
        assert probe.calls == 1


async def test_a_refusal_by_another_client_leaves_the_certificate_working_and_names_metrics_server(
    ca_file: Path,
) -> None:
    serving, _ = auto(ca_file, wait_seconds=0.0)
    probe = ScriptedProbe(Verdict.ACCEPTED)
    async with running(serving), checking(serving, probe), tls_server(serving) as port:
        await eventually(lambda: probe.calls == 1, "the check after the fallback")
        assert serving.state.reason == "SelfSigned"  # accepted, and nobody refused yet
        await asyncio.to_thread(refuse, port)
        await eventually(
            lambda: serving.state.reason == "RejectedByOtherClients", "the other client's refusal"
        )
        assert serving.state.working
        assert "kubectl logs, exec and port-forward work" in serving.state.message
        assert "--kubelet-insecure-tls" in serving.state.message
        await asyncio.to_thread(refuse, port)
        await eventually(lambda: serving.refused_handshakes == 2, "the second refusal")
        assert probe.calls == 1  # the verdict holds for the certificate in service
        assert serving.state.reason == "RejectedByOtherClients"


async def test_a_refusal_the_apiserver_cannot_be_asked_about_says_what_is_missing(ca_file: Path) -> None:
    serving, _ = auto(ca_file, wait_seconds=0.0)
    probe = ScriptedProbe(
        Verdict.UNKNOWN, "the node may not use its own node proxy (403); grant get on nodes/proxy"
    )
    async with running(serving), checking(serving, probe), tls_server(serving) as port:
        await eventually(lambda: probe.calls == 1, "the check after the fallback")
        assert serving.state.reason == "SelfSigned"  # nothing refused yet, nothing known
        await asyncio.to_thread(refuse, port)
        await eventually(lambda: serving.state.reason == "RejectedByClients", "the refusal")
        assert "could not ask the apiserver" in serving.state.message
        assert "nodes/proxy" in serving.state.message


async def test_an_issued_certificate_is_never_checked(ca_file: Path, ca: SigningCa) -> None:
    serving, made = auto(ca_file, wait_seconds=30.0)
    probe = ScriptedProbe(Verdict.REFUSED)
    async with running(serving), checking(serving, probe), tls_server(serving) as port:
        issued, key = ca.issue(node_name="n1", names=NAMES)
        made[0].issue(issued, key)
        await asyncio.to_thread(refuse, port)  # a client without the cluster CA
        await eventually(lambda: serving.refused_handshakes == 1, "the refusal")
        assert serving.state.reason == "Issued"
        assert probe.calls == 0
