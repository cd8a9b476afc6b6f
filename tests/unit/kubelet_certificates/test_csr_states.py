"""What the CSR flow reports while it waits: which CSR, what it needs, and a denial."""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, cast

from cryptography import x509

from tests.unit.kubelet_certificates import SigningCa, cert_pem
from vk_provider.kit.kube import KubeApi, KubeApiError, WatchEvent
from vk_provider.kubelet.certificates import serving_names, via_csr


class CsrApi:
    """The CSR endpoints as the flow uses them: create, get, and a watch that shows each change once."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.changes: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def create(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        name = f"n1-serving-{len(self.created)}"
        obj = {**body, "metadata": {"name": name, "resourceVersion": "1"}, "status": {}}
        self.created.append(obj)
        return obj

    async def get(self, path: str, **_: Any) -> dict[str, Any]:
        return self.created[-1]

    async def watch(
        self, path: str, *, query: Mapping[str, Any], timeout_seconds: int
    ) -> AsyncIterator[WatchEvent]:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_seconds):
                change = await self.changes.get()
                self.created[-1] = change
                yield WatchEvent("MODIFIED", change)

    def condition(self, kind: str) -> None:
        current = self.created[-1]
        conditions = [*current["status"].get("conditions", []), {"type": kind, "status": "True"}]
        self.changes.put_nowait({**current, "status": {**current["status"], "conditions": conditions}})

    def issue(self, ca: SigningCa) -> x509.Certificate:
        current = self.created[-1]
        csr = x509.load_pem_x509_csr(base64.b64decode(current["spec"]["request"]))
        cert, _ = ca.issue(node_name="n1", names=serving_names("n1", ["127.0.0.1"]))
        # Signed for the CSR's key, as the signer does.
        cert = (
            x509.CertificateBuilder()
            .subject_name(cert.subject)
            .issuer_name(cert.issuer)
            .public_key(csr.public_key())
            .serial_number(cert.serial_number)
            .not_valid_before(cert.not_valid_before_utc)
            .not_valid_after(cert.not_valid_after_utc)
            .add_extension(cert.extensions[0].value, critical=False)
            .sign(ca.key, cert.signature_hash_algorithm)  # type: ignore[arg-type]
        )
        status = {**current["status"], "certificate": base64.b64encode(cert_pem(cert)).decode()}
        self.changes.put_nowait({**current, "status": status})
        return cert


async def settle(condition: Any) -> None:
    """Until `condition()` holds; polled, as the flow's states change inside its own task."""
    async with asyncio.timeout(5):
        while not condition():  # noqa: ASYNC110 - a state to poll, not an event to wait on
            await asyncio.sleep(0.01)  # the polling period of a condition wait (noqa: sleep-ok)


async def test_the_flow_reports_the_csr_it_waits_for_a_denial_and_the_issue(
    tmp_path: Path, ca: SigningCa
) -> None:
    api = CsrApi()
    serving = via_csr(
        cast(KubeApi, api),
        node_name="n1",
        addresses=["127.0.0.1"],
        client_ca_file=ca.write(tmp_path / "ca.crt"),
        state_dir=tmp_path / "state",
        self_approve=False,
        retry_initial_seconds=0.05,
        retry_max_seconds=0.1,
    )
    assert serving.state.reason == "Requesting"
    assert not serving.state.working
    assert serving.requesting_since() is None
    task = asyncio.create_task(serving.run())
    try:
        await settle(lambda: serving.state.reason == "Pending")
        assert serving.pending_csr == "n1-serving-0"
        asking_since = serving.requesting_since()
        assert asking_since is not None
        assert "kubectl certificate approve n1-serving-0" in serving.state.message

        api.condition("Denied")
        await settle(lambda: serving.state.reason == "Denied")
        assert "n1-serving-0 denied" in serving.state.message
        assert serving.state.warning

        await settle(lambda: serving.state.reason == "Pending" and serving.pending_csr == "n1-serving-1")
        assert serving.requesting_since() == asking_since  # since the first CSR, not the retry
        api.condition("Approved")
        await settle(lambda: "approved" in serving.state.message)
        assert "n1-serving-1" in serving.state.message

        issued = api.issue(ca)
        await settle(lambda: serving.state.reason == "Issued")
        assert serving.state.working
        assert "n1-serving-1" in serving.state.message
        assert serving.certificate is not None
        assert serving.certificate.serial_number == issued.serial_number
        assert serving.pending_csr is None
        assert serving.requesting_since() is None
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class ForbiddenApi(CsrApi):
    async def create(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        raise KubeApiError(403, "Forbidden", "cannot create certificatesigningrequests")


async def test_a_csr_the_node_may_not_create_is_a_warning_with_the_apiserver_s_answer(
    tmp_path: Path, ca: SigningCa
) -> None:
    serving = via_csr(
        cast(KubeApi, ForbiddenApi()),
        node_name="n1",
        addresses=["127.0.0.1"],
        client_ca_file=ca.write(tmp_path / "ca.crt"),
        state_dir=tmp_path / "state",
        self_approve=False,
        retry_initial_seconds=0.05,
        retry_max_seconds=0.1,
    )
    task = asyncio.create_task(serving.run())
    try:
        await settle(lambda: serving.state.reason == "RequestFailed")
        assert serving.state.warning
        assert "403 Forbidden: cannot create certificatesigningrequests" in serving.state.message
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
