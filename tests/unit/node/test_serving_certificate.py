"""The node's `serving_certificate` setting, and the ServingCertificate condition, Events and metrics
the node daemon makes of the certificate's state."""

from __future__ import annotations

import asyncio
import json
import ssl
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest

from tests.unit.kubelet_certificates import SigningCa, cert_pem, key_pem
from tests.unit.kubelet_certificates.test_modes import FakeCsr
from vk_provider._kube.events import EventRecorder
from vk_provider.kit.kube import KubeApi
from vk_provider.kubelet.certificates import (
    AutoCertificate,
    CertificateState,
    CsrCertificate,
    FileCertificate,
    SelfSignedCertificate,
    serving_names,
)
from vk_provider.node import daemon, nodeobject
from vk_provider.node.keeper import NodeKeeper
from vk_provider.node.metrics import CertificateTimes, DaemonMetrics
from vk_provider.node.settings import NodeSettings, SettingsError, load_settings
from vk_provider.provider import ProviderContext
from vk_providers.mock import MockProvider


def settings_from(**flags: Any) -> NodeSettings:
    return load_settings(config_file=None, environ={}, flags=flags)


def test_auto_is_the_default_and_files_make_it_file() -> None:
    assert settings_from().serving_certificate_mode == "auto"
    assert settings_from().serving_certificate_wait_seconds == 60.0
    with_files = settings_from(kubelet_serving_cert_file="/c", kubelet_serving_key_file="/k")
    assert with_files.serving_certificate_mode == "file"
    assert settings_from(serving_certificate="self-signed").serving_certificate_mode == "self-signed"
    assert settings_from(serving_certificate_wait_seconds="5").serving_certificate_wait_seconds == 5.0


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"serving_certificate": "acme"}, "must be one of auto, csr, self-signed, file"),
        ({"serving_certificate": "file"}, "file needs kubelet_serving_cert_file"),
        (
            {
                "serving_certificate": "csr",
                "kubelet_serving_cert_file": "/c",
                "kubelet_serving_key_file": "/k",
            },
            "does not use",
        ),
        ({"kubelet_serving_cert_file": "/c"}, "go together"),
        ({"serving_certificate_wait_seconds": "0"}, "greater than zero"),
    ],
)
def test_settings_that_cannot_work_are_refused(flags: dict[str, Any], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        settings_from(**flags)


def kubeconfig(tmp_path: Path, ca: SigningCa) -> str:
    path = tmp_path / "kubeconfig"
    cluster = {"server": "https://127.0.0.1:1", "certificate-authority": str(ca.write(tmp_path / "ca.crt"))}
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "c",
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
        "clusters": [{"name": "k", "cluster": cluster}],
        "users": [{"name": "u", "user": {}}],
    }
    path.write_text(json.dumps(document))  # JSON is YAML
    return str(path)


def test_each_mode_gets_its_source(tmp_path: Path) -> None:
    ca = SigningCa.create()
    cert, key = ca.issue(node_name="n1", names=serving_names("n1", ["127.0.0.1"]))
    (tmp_path / "tls.crt").write_bytes(cert_pem(cert))
    (tmp_path / "tls.key").write_bytes(key_pem(key))
    api = cast(KubeApi, object())

    def source(**flags: Any) -> object:
        base = {"node_name": "n1", "kubeconfig": kubeconfig(tmp_path, ca), "state_dir": str(tmp_path / "s")}
        return daemon.serving_certificate(settings_from(**base, **flags), api)

    assert isinstance(source(), AutoCertificate)
    assert isinstance(source(serving_certificate="csr"), CsrCertificate)
    assert isinstance(source(serving_certificate="self-signed"), SelfSignedCertificate)
    files = {
        "kubelet_serving_cert_file": str(tmp_path / "tls.crt"),
        "kubelet_serving_key_file": str(tmp_path / "tls.key"),
    }
    assert isinstance(source(serving_certificate="file", **files), FileCertificate)


def test_the_condition_is_true_while_a_certificate_works() -> None:
    now = datetime.now(UTC)
    health = nodeobject.Health(ready=True)
    assert all(c["type"] != "ServingCertificate" for c in nodeobject.conditions(health, now))
    pending = CertificateState("Pending", "CSR x waits")
    [condition] = [
        c
        for c in nodeobject.conditions(health, now, certificate=pending)
        if c["type"] == "ServingCertificate"
    ]
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False",
        "Pending",
        "CSR x waits",
    )
    fallback = CertificateState("SelfSigned", "serving a self-signed certificate (CSR x ...)")
    [condition] = [
        c
        for c in nodeobject.conditions(health, now, certificate=fallback)
        if c["type"] == "ServingCertificate"
    ]
    assert (condition["status"], condition["reason"]) == ("True", "SelfSigned")


class StatusApi:
    """Answers the keeper's node reads; keeps every status patch."""

    def __init__(self) -> None:
        self.statuses: list[dict[str, Any]] = []
        self.patched = asyncio.Event()

    async def get(self, path: str, **_: Any) -> dict[str, Any]:
        return {"metadata": {"name": "n1", "uid": "u", "labels": {}}, "spec": {"taints": []}}

    async def patch(self, path: str, body: Any, **_: Any) -> dict[str, Any]:
        if path.endswith("/status"):
            self.statuses.append(body["status"])
            self.patched.set()
        return {}


class Events:
    def __init__(self) -> None:
        self.recorded: list[tuple[str, str, str]] = []

    def record(self, involved: object, type: str, reason: str, message: str) -> None:
        self.recorded.append((type, reason, message))


def certificate_condition(status: dict[str, Any]) -> dict[str, Any]:
    [condition] = [c for c in status["conditions"] if c["type"] == "ServingCertificate"]
    return condition


async def test_the_keeper_shows_each_change_as_the_condition_and_an_event(tmp_path: Path) -> None:
    ca = SigningCa.create()
    ca_file = ca.write(tmp_path / "ca.crt")
    made: list[FakeCsr] = []

    def csr(context: ssl.SSLContext) -> FakeCsr:
        made.append(FakeCsr(context, ca_file))
        return made[-1]

    certificate = AutoCertificate(
        csr,
        node_name="n1",
        addresses=["127.0.0.1"],
        client_ca_file=ca_file,
        wait_seconds=0.05,
    )
    api, events = StatusApi(), Events()
    keeper = NodeKeeper(
        cast(KubeApi, api),
        NodeSettings(node_name="n1", no_taint=True, node_status_interval_seconds=60),
        MockProvider(ProviderContext("n1", {}, "127.0.0.1", tmp_path)),
        cast(EventRecorder, events),
        metrics=DaemonMetrics(),
        certificate=certificate,
    )
    status_loop = asyncio.create_task(keeper.run_status())
    running = asyncio.create_task(certificate.run())
    try:
        await asyncio.sleep(0)
        made[0].pending("n1-serving-abc")

        async def condition_is(reason: str) -> dict[str, Any]:
            async with asyncio.timeout(5):
                while not api.statuses or certificate_condition(api.statuses[-1])["reason"] != reason:
                    api.patched.clear()
                    await api.patched.wait()
            return certificate_condition(api.statuses[-1])

        pending = await condition_is("Pending")
        assert pending["status"] == "False"
        assert "n1-serving-abc" in pending["message"]
        fallback = await condition_is("SelfSigned")
        assert fallback["status"] == "True"
        assert "n1-serving-abc" in fallback["message"]
        warnings = [e for e in events.recorded if e[0] == "Warning"]
        assert warnings
        assert warnings[-1][1] == "ServingCertificateSelfSigned"
        assert "n1-serving-abc" in warnings[-1][2]

        cert, key = ca.issue(node_name="n1", names=serving_names("n1", ["127.0.0.1"]))
        made[0].issue(cert, key)
        issued = await condition_is("Issued")
        assert issued["status"] == "True"
        assert events.recorded[-1][:2] == ("Normal", "ServingCertificateIssued")
    finally:
        for task in (status_loop, running):
            task.cancel()
        await asyncio.gather(status_loop, running, return_exceptions=True)
    assert not certificate._listeners  # the keeper listened for its term only


async def test_a_warning_from_before_the_node_ran_is_recorded_when_it_starts(tmp_path: Path) -> None:
    ca_file = SigningCa.create().write(tmp_path / "ca.crt")
    certificate = SelfSignedCertificate(
        node_name="n1", addresses=["127.0.0.1"], client_ca_file=ca_file, because="x"
    )
    api, events = StatusApi(), Events()
    keeper = NodeKeeper(
        cast(KubeApi, api),
        NodeSettings(node_name="n1", no_taint=True),
        MockProvider(ProviderContext("n1", {}, "127.0.0.1", tmp_path)),
        cast(EventRecorder, events),
        metrics=DaemonMetrics(),
        certificate=certificate,
    )
    loop = asyncio.create_task(keeper.run_status())
    async with asyncio.timeout(5):
        await api.patched.wait()
    loop.cancel()
    await asyncio.gather(loop, return_exceptions=True)
    assert events.recorded[0][:2] == ("Warning", "ServingCertificateSelfSigned")
    assert certificate_condition(api.statuses[0])["reason"] == "SelfSigned"
    assert not certificate._listeners  # the keeper's term is over: it listens no more


def test_the_metrics_say_the_reason_and_count_refusals() -> None:
    metrics = DaemonMetrics()
    metrics.set_serving_certificate_source(lambda: ("RejectedByClients", False), lambda: 3)
    text = metrics.exposition().decode()
    assert 'vk_provider_serving_certificate_working{reason="RejectedByClients"} 0.0' in text
    assert "vk_provider_serving_certificate_refused_handshakes_total 3.0" in text


def test_the_metrics_give_the_certificate_s_expiry_renewal_and_request_only_when_known() -> None:
    metrics = DaemonMetrics()
    times = CertificateTimes()
    metrics.set_serving_certificate_source(lambda: ("Pending", False), lambda: 0, lambda: times)
    # Nothing known: no series at all, rather than a timestamp of 0 that reads as expired in 1970.
    assert "_timestamp_seconds" not in metrics.exposition().decode()
    expires = datetime(2027, 12, 6, 12, 0, tzinfo=UTC)
    renews = datetime(2027, 9, 1, 0, 0, tzinfo=UTC)
    asking = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
    times = CertificateTimes(expires=expires, renews=renews, requesting_since=asking)
    registry = metrics.registry
    assert registry.get_sample_value("vk_provider_serving_certificate_expiry_timestamp_seconds") == (
        expires.timestamp()
    )
    assert registry.get_sample_value("vk_provider_serving_certificate_renewal_timestamp_seconds") == (
        renews.timestamp()
    )
    assert registry.get_sample_value(
        "vk_provider_serving_certificate_requesting_since_timestamp_seconds"
    ) == (asking.timestamp())


def test_the_daemon_reads_the_times_of_the_certificate_in_service(tmp_path: Path) -> None:
    ca_file = SigningCa.create().write(tmp_path / "ca.crt")
    certificate = SelfSignedCertificate(
        node_name="n1", addresses=["127.0.0.1"], client_ca_file=ca_file, because="x"
    )
    assert certificate.certificate is not None
    times = daemon.certificate_times(certificate)
    assert times.expires == certificate.certificate.not_valid_after_utc
    assert times.renews == certificate.renew_at
    assert times.renews is not None
    assert times.requesting_since is None  # a self-signed certificate asks nobody
