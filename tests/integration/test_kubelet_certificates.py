"""The kubelet serving certificate from the real plane's kubelet-serving signer, served over TLS.

The controller-manager signs `kubernetes.io/kubelet-serving` CSRs with the cluster CA, and the apiserver
verifies kubelet certificates against that CA, so these tests see exactly what a cluster would.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import ssl
import stat
import uuid
import warnings
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from kubernetes_asyncio import client

from tests.integration.waiting import wait_for
from vk_devtools.devcluster import cluster
from vk_devtools.devcluster.kubeconfigs import write_kubeconfig
from vk_devtools.devcluster.pki import CertificateAuthority, ClientIdentity, KeyPair
from vk_provider.kit.kube import MERGE_PATCH, KubeApi, KubeApiError
from vk_provider.kubelet.certificates import (
    APPROVAL_REASON,
    CSR_PATH,
    SIGNER_NAME,
    STORE_FILE_NAME,
    ServingCertificate,
    via_csr,
)

LOGGER = "vk_provider.kubelet.certificates"
HINT = re.compile(r'waiting for approval of CSR (\S+): run "kubectl certificate approve (\S+)"')
READY_TIMEOUT_SECONDS = 60

# The RBAC a node needs, as given to operators for the manifests (kept in step with the module's
# docstring): the first rule always, the other two for self-approval.
CSR_RULES: list[dict[str, Any]] = [
    {
        "apiGroups": ["certificates.k8s.io"],
        "resources": ["certificatesigningrequests"],
        "verbs": ["create", "get", "list", "watch"],
    }
]
SELF_APPROVAL_RULES: list[dict[str, Any]] = [
    {
        "apiGroups": ["certificates.k8s.io"],
        "resources": ["certificatesigningrequests/approval"],
        "verbs": ["update"],
    },
    {
        "apiGroups": ["certificates.k8s.io"],
        "resources": ["signers"],
        "resourceNames": ["kubernetes.io/kubelet-serving"],
        "verbs": ["approve"],
    },
]


@pytest.fixture
def admin(kube_api: client.ApiClient) -> KubeApi:
    return KubeApi(kube_api)  # closed with kube_api


@pytest.fixture
async def node_name(admin: KubeApi) -> AsyncIterator[str]:
    """A unique node name; the CSRs made for it are deleted afterwards."""
    name = f"cert-node-{uuid.uuid4().hex[:8]}"
    yield name
    for csr in await csrs_of(admin, name):
        with contextlib.suppress(KubeApiError):
            await admin.delete(f"{CSR_PATH}/{csr['metadata']['name']}")


async def csrs_of(admin: KubeApi, node_name: str) -> list[dict[str, Any]]:
    listing = await admin.get(CSR_PATH)
    prefix = f"{node_name}-serving-"
    return [item for item in listing["items"] if item["metadata"]["name"].startswith(prefix)]


@contextlib.asynccontextmanager
async def running(serving: ServingCertificate) -> AsyncIterator[None]:
    task = asyncio.create_task(serving.run())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        assert task.cancelled()  # run() ended by our cancellation, never by an error of its own


async def until_ready(serving: ServingCertificate) -> x509.Certificate:
    await asyncio.wait_for(serving.ready.wait(), READY_TIMEOUT_SECONDS)
    assert serving.certificate is not None
    return serving.certificate


def load_ca(control_plane: cluster.ClusterState) -> x509.Certificate:
    return x509.load_pem_x509_certificate(control_plane.ca_cert.read_bytes())


def csr_settings(control_plane: cluster.ClusterState, tmp_path: Path, node_name: str) -> dict[str, Any]:
    return {
        "node_name": node_name,
        "addresses": ["127.0.0.1"],
        "client_ca_file": control_plane.ca_cert,
        "state_dir": tmp_path / "state",
        "retry_initial_seconds": 0.2,
        "retry_max_seconds": 1.0,
    }


def assert_issued_for_the_node(
    leaf: x509.Certificate, ca: x509.Certificate, node_name: str, addresses: list[str]
) -> None:
    assert leaf.issuer == ca.subject
    leaf.verify_directly_issued_by(ca)
    assert [a.value for a in leaf.subject.get_attributes_for_oid(NameOID.COMMON_NAME)] == [
        f"system:node:{node_name}"
    ]
    assert [a.value for a in leaf.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == [
        "system:nodes"
    ]
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sorted(str(a) for a in names.get_values_for_type(x509.IPAddress)) == sorted(addresses)
    assert names.get_values_for_type(x509.DNSName) == [node_name]
    usages = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.SERVER_AUTH]


async def approve(admin: KubeApi, name: str, *, kind: str = "Approved", reason: str = "TestApproved") -> None:
    """What `kubectl certificate approve|deny` does: a condition through the approval subresource."""
    condition = {"type": kind, "status": "True", "reason": reason, "message": f"{kind} by the test"}
    await admin.patch(
        f"{CSR_PATH}/{name}/approval", {"status": {"conditions": [condition]}}, content_type=MERGE_PATCH
    )


async def next_hint(caplog: pytest.LogCaptureFixture, *, after: set[str] | None = None) -> str:
    """The name of the CSR the newest approval hint asks about (one not in `after`)."""

    async def hinted() -> str | None:
        for record in caplog.records:
            match = HINT.search(record.getMessage())
            if match and match.group(1) not in (after or set()):
                assert match.group(1) == match.group(2)
                return match.group(1)
        return None

    name = await wait_for(hinted, timeout_seconds=READY_TIMEOUT_SECONDS, what="the approval hint")
    assert name is not None
    return name


# --- the kubelet API stand-in: what the server module will do with the context ---


async def whoami(request: web.Request) -> web.Response:
    """Who the TLS layer says the client is (None without a client certificate)."""
    peer = request.transport.get_extra_info("peercert") if request.transport else None
    subject = dict(rdn[0] for rdn in peer["subject"]) if peer else {}
    return web.json_response({"commonName": subject.get("commonName")})


@contextlib.asynccontextmanager
async def https_server(serving: ServingCertificate) -> AsyncIterator[int]:
    app = web.Application()
    app.router.add_get("/{tail:.*}", whoami)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=serving.ssl_context)
        await site.start()
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()


def trusting_client(control_plane: cluster.ClusterState, *, with_admin_cert: bool = False) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(control_plane.ca_cert))
    if with_admin_cert:
        pki = control_plane.directory / "pki"
        context.load_cert_chain(pki / "admin.crt", pki / "admin.key")
    return context


def tls_11_context(ca_cert: Path | None = None, *, server: bool = False) -> ssl.SSLContext:
    """A context that speaks TLS 1.1 (at most, for a client) and accepts it (security level 0)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server else ssl.PROTOCOL_TLS_CLIENT)
    if ca_cert is not None:
        context.load_verify_locations(ca_cert)
    context.set_ciphers("DEFAULT:@SECLEVEL=0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # ssl deprecates TLS 1.0/1.1 itself
        context.minimum_version = ssl.TLSVersion.TLSv1
        if not server:
            context.maximum_version = ssl.TLSVersion.TLSv1_1
    return context


@contextlib.asynccontextmanager
async def permissive_server(bundle: Path) -> AsyncIterator[int]:
    """A TLS server with the same certificate that accepts TLS 1.1, to show the client really speaks it."""
    context = tls_11_context(server=True)
    context.load_cert_chain(bundle)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await reader.read()
        writer.close()
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await writer.wait_closed()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=context)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


class KeepAliveConnection:
    """One TLS connection carrying several HTTP/1.1 requests, to watch it survive a rotation."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, port: int, context: ssl.SSLContext) -> KeepAliveConnection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
        return cls(reader, writer)

    @property
    def peer_serial(self) -> int:
        der = self.writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        return x509.load_der_x509_certificate(der).serial_number

    @property
    def tls_version(self) -> str:
        version: str = self.writer.get_extra_info("ssl_object").version()
        return version

    async def get(self, path: str = "/") -> tuple[int, bytes]:
        self.writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        await self.writer.drain()
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
        body = await self.reader.readexactly(int(headers["Content-Length"]))
        return int(lines[0].split()[1]), body

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await self.writer.wait_closed()


# --- the tests ---


async def test_a_self_approved_csr_yields_a_certificate_of_the_cluster_ca_reused_after_a_restart(
    control_plane: cluster.ClusterState, admin: KubeApi, node_name: str, tmp_path: Path
) -> None:
    settings = {**csr_settings(control_plane, tmp_path, node_name), "addresses": ["127.0.0.1", "::1"]}
    serving = via_csr(admin, self_approve=True, expiration_seconds=3600, **settings)
    assert not serving.ready.is_set()

    async with running(serving):
        leaf = await until_ready(serving)

    assert_issued_for_the_node(leaf, load_ca(control_plane), node_name, ["127.0.0.1", "::1"])
    # The signer honoured the requested lifetime (it may backdate the start; the end is what counts).
    assert leaf.not_valid_after_utc <= datetime.now(UTC) + timedelta(seconds=3600)
    assert serving.renew_at is not None
    share = (serving.renew_at - leaf.not_valid_before_utc) / (
        leaf.not_valid_after_utc - leaf.not_valid_before_utc
    )
    assert 0.7 <= share <= 0.8

    [csr] = await csrs_of(admin, node_name)
    assert csr["spec"]["signerName"] == SIGNER_NAME
    assert csr["spec"]["usages"] == ["digital signature", "server auth"]
    assert csr["spec"]["expirationSeconds"] == 3600
    [condition] = csr["status"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "Approved",
        "True",
        APPROVAL_REASON,
    )

    stored = tmp_path / "state" / STORE_FILE_NAME
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    assert x509.load_pem_x509_certificates(stored.read_bytes())[0] == leaf
    serialization.load_pem_private_key(stored.read_bytes(), password=None)

    # A restart serves the stored certificate at once and asks the cluster for nothing.
    restarted = via_csr(admin, self_approve=True, expiration_seconds=3600, **settings)
    assert restarted.ready.is_set()
    assert restarted.certificate == leaf
    assert len(await csrs_of(admin, node_name)) == 1


async def test_the_context_serves_tls_12_up_only_and_the_apiserver_accepts_the_certificate(
    control_plane: cluster.ClusterState, admin: KubeApi, node_name: str, namespace: str, tmp_path: Path
) -> None:
    serving = via_csr(admin, self_approve=True, **csr_settings(control_plane, tmp_path, node_name))
    async with running(serving):
        leaf = await until_ready(serving)
        async with https_server(serving) as port:
            # A client that trusts the cluster CA, without a client certificate: allowed, anonymous.
            anonymous = await KeepAliveConnection.open(port, trusting_client(control_plane))
            try:
                assert anonymous.tls_version in ("TLSv1.2", "TLSv1.3")
                assert anonymous.peer_serial == leaf.serial_number
                assert await anonymous.get() == (200, b'{"commonName": null}')
            finally:
                await anonymous.close()

            # With a client certificate of the cluster CA, the handler can read who it is.
            admin_client = trusting_client(control_plane, with_admin_cert=True)
            identified = await KeepAliveConnection.open(port, admin_client)
            try:
                assert await identified.get() == (200, b'{"commonName": "vk-provider-admin"}')
            finally:
                await identified.close()

            # A client that speaks TLS 1.1 at most is refused: the handshake fails.
            old = tls_11_context(control_plane.ca_cert)
            with pytest.raises((ssl.SSLError, ConnectionResetError)):
                await KeepAliveConnection.open(port, old)
            # ... because of the server's minimum: a server that allows TLS 1.1 is reached by it.
            async with permissive_server(tmp_path / "state" / STORE_FILE_NAME) as permissive_port:
                control = await KeepAliveConnection.open(permissive_port, old)
                try:
                    assert control.tls_version == "TLSv1.1"
                finally:
                    await control.close()

            # The apiserver dials kubelets verifying them against the cluster CA
            # (--kubelet-certificate-authority) for the node's address: a pod log request reaches us.
            await admin.create(
                "/api/v1/nodes",
                {
                    "metadata": {"name": node_name},
                    "status": {
                        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
                    },
                },
            )
            try:
                pod = {
                    "metadata": {"name": "logs"},
                    "spec": {"nodeName": node_name, "containers": [{"name": "main", "image": "none"}]},
                }
                await admin.create(f"/api/v1/namespaces/{namespace}/pods", pod)
                answer = await admin.get(f"/api/v1/namespaces/{namespace}/pods/logs/log")
                assert answer == {"commonName": "kube-apiserver-kubelet-client"}
            finally:
                await admin.delete(f"/api/v1/nodes/{node_name}")


async def test_without_self_approval_it_asks_an_operator_and_finishes_once_approved(
    control_plane: cluster.ClusterState,
    admin: KubeApi,
    node_name: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    serving = via_csr(admin, self_approve=False, **csr_settings(control_plane, tmp_path, node_name))
    async with running(serving):
        name = await next_hint(caplog)
        [csr] = await csrs_of(admin, node_name)
        assert csr["metadata"]["name"] == name
        assert not csr.get("status", {}).get("conditions")  # we did not approve it ourselves
        assert not serving.ready.is_set()

        await approve(admin, name)
        leaf = await until_ready(serving)

    assert_issued_for_the_node(leaf, load_ca(control_plane), node_name, ["127.0.0.1"])
    [csr] = await csrs_of(admin, node_name)
    assert [c["reason"] for c in csr["status"]["conditions"]] == ["TestApproved"]


async def test_a_denied_csr_is_logged_and_replaced_by_a_new_one(
    control_plane: cluster.ClusterState,
    admin: KubeApi,
    node_name: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    serving = via_csr(admin, self_approve=False, **csr_settings(control_plane, tmp_path, node_name))
    async with running(serving):
        first = await next_hint(caplog)
        await approve(admin, first, kind="Denied", reason="TestDenied")
        second = await next_hint(caplog, after={first})
        assert f"CSR {first} denied: TestDenied" in caplog.text
        assert not serving.ready.is_set()

        await approve(admin, second)
        await until_ready(serving)
    assert len(await csrs_of(admin, node_name)) == 2


@contextlib.asynccontextmanager
async def node_identity(
    control_plane: cluster.ClusterState, admin: KubeApi, tmp_path: Path, *, rules: list[dict[str, Any]]
) -> AsyncIterator[KubeApi]:
    """A client of a fresh user holding exactly `rules` (a ClusterRole bound to it), removed afterwards."""
    user = f"vk-test-{uuid.uuid4().hex[:8]}"
    pki = control_plane.directory / "pki"
    ca = CertificateAuthority(
        x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes()),
        serialization.load_pem_private_key((pki / "ca.key").read_bytes(), password=None),  # type: ignore[arg-type]
        KeyPair(pki / "ca.crt", pki / "ca.key"),
    )
    pair = ca.issue_client(tmp_path, ClientIdentity(user, user))
    kubeconfig = write_kubeconfig(
        tmp_path / f"{user}.kubeconfig",
        server=control_plane.server,
        ca_cert=control_plane.ca_cert,
        client=pair,
        user=user,
    )
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    await admin.create(f"{rbac}/clusterroles", {"metadata": {"name": user}, "rules": rules})
    await admin.create(
        f"{rbac}/clusterrolebindings",
        {
            "metadata": {"name": user},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": user},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        },
    )
    api = await KubeApi.from_kubeconfig(str(kubeconfig))
    try:
        # The authorizer learns of new bindings through an informer: wait until it knows this one.
        async def bound() -> bool:
            review = await admin.create(
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                {
                    "spec": {
                        "user": user,
                        "resourceAttributes": {
                            "group": "certificates.k8s.io",
                            "resource": "certificatesigningrequests",
                            "verb": "create",
                        },
                    }
                },
            )
            return bool(review["status"].get("allowed"))

        await wait_for(bound, timeout_seconds=30, what=f"the RBAC of {user} to take effect")
        yield api
    finally:
        await api.close()
        await admin.delete(f"{rbac}/clusterrolebindings/{user}")
        await admin.delete(f"{rbac}/clusterroles/{user}")


async def test_the_documented_rbac_is_enough_to_self_approve(
    control_plane: cluster.ClusterState, admin: KubeApi, node_name: str, tmp_path: Path
) -> None:
    async with node_identity(control_plane, admin, tmp_path, rules=CSR_RULES + SELF_APPROVAL_RULES) as api:
        serving = via_csr(api, self_approve=True, **csr_settings(control_plane, tmp_path, node_name))
        async with running(serving):
            leaf = await until_ready(serving)
    assert_issued_for_the_node(leaf, load_ca(control_plane), node_name, ["127.0.0.1"])
    [csr] = await csrs_of(admin, node_name)
    assert csr["status"]["conditions"][0]["reason"] == APPROVAL_REASON


async def test_a_refused_self_approval_falls_back_to_asking_an_operator(
    control_plane: cluster.ClusterState,
    admin: KubeApi,
    node_name: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    async with node_identity(control_plane, admin, tmp_path, rules=CSR_RULES) as api:
        serving = via_csr(api, self_approve=True, **csr_settings(control_plane, tmp_path, node_name))
        async with running(serving):
            name = await next_hint(caplog)
            assert f"self-approval of CSR {name} was refused" in caplog.text
            await approve(admin, name)
            await until_ready(serving)


class FrozenClock:
    """A wall clock that stands still until the test moves it."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


async def test_rotation_gives_new_connections_a_new_certificate_and_keeps_open_ones(
    control_plane: cluster.ClusterState, admin: KubeApi, node_name: str, tmp_path: Path
) -> None:
    clock = FrozenClock()
    serving = via_csr(
        admin,
        self_approve=True,
        expiration_seconds=3600,
        renew_jitter=0.0,
        recheck_seconds=0.05,
        clock=clock,
        **csr_settings(control_plane, tmp_path, node_name),
    )
    client_context = trusting_client(control_plane)
    async with running(serving):
        first = await until_ready(serving)
        async with https_server(serving) as port:
            kept = await KeepAliveConnection.open(port, client_context)
            try:
                assert await kept.get() == (200, b'{"commonName": null}')
                assert kept.peer_serial == first.serial_number

                # Time passes up to the renewal point: the node asks for and loads a new certificate.
                assert serving.renew_at is not None
                clock.now = serving.renew_at

                async def rotated() -> bool:
                    return serving.certificate is not None and serving.certificate != first

                await wait_for(rotated, timeout_seconds=READY_TIMEOUT_SECONDS, what="a new certificate")

                # A certificate signed within the same second as the first has the same renewal point
                # and is renewed once more; wait until the current one is due later than the clock.
                async def settled() -> bool:
                    return serving.renew_at is not None and serving.renew_at > clock.now

                await wait_for(settled, timeout_seconds=READY_TIMEOUT_SECONDS, what="the rotation to settle")
                current = serving.certificate
                assert current is not None
                assert_issued_for_the_node(current, load_ca(control_plane), node_name, ["127.0.0.1"])

                fresh = await KeepAliveConnection.open(port, client_context)
                try:
                    assert fresh.peer_serial == current.serial_number != first.serial_number
                    assert await fresh.get() == (200, b'{"commonName": null}')
                finally:
                    await fresh.close()

                # The connection opened before the rotation still works, on the certificate it negotiated.
                assert await kept.get() == (200, b'{"commonName": null}')
                assert kept.peer_serial == first.serial_number
            finally:
                await kept.close()

    stored = x509.load_pem_x509_certificates((tmp_path / "state" / STORE_FILE_NAME).read_bytes())
    assert stored[0] == current
    assert len(await csrs_of(admin, node_name)) >= 2
