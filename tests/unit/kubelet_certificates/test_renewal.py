"""When to renew, and whether a certificate persisted by an earlier run may be served again."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import cast

import pytest
from cryptography import x509

from tests.unit.kubelet_certificates import SigningCa, cert_pem, key_pem
from vk_provider.kit.kube import KubeApi
from vk_provider.kubelet.certificates import (
    STORE_FILE_NAME,
    backoff_delay,
    new_private_key,
    renewal_deadline,
    serving_names,
    stored_certificate_problem,
    via_csr,
)

START = datetime(2030, 1, 1, tzinfo=UTC)
NAMES = serving_names("n1", ["10.0.0.5"])


def test_renewal_comes_after_70_to_80_percent_of_the_validity(ca: SigningCa) -> None:
    cert, _ = ca.issue(node_name="n1", names=NAMES, not_before=START, lifetime=timedelta(hours=100))

    assert renewal_deadline(cert, rng=lambda: 0.0) == START + timedelta(hours=70)
    assert renewal_deadline(cert, rng=lambda: 1.0) == START + timedelta(hours=80)
    assert renewal_deadline(cert, fraction=0.5, jitter=0.0) == START + timedelta(hours=50)
    samples = {renewal_deadline(cert) for _ in range(200)}
    assert all(START + timedelta(hours=70) <= s <= START + timedelta(hours=80) for s in samples)
    assert len(samples) > 100  # jittered, so a fleet of nodes does not renew at one instant


def test_backoff_grows_to_its_cap_and_is_jittered() -> None:
    assert 0.5 <= backoff_delay(0, initial=1.0, cap=60.0) <= 1.0
    assert 4.0 <= backoff_delay(3, initial=1.0, cap=60.0) <= 8.0
    assert 30.0 <= backoff_delay(50, initial=1.0, cap=60.0) <= 60.0
    assert len({backoff_delay(10, initial=1.0, cap=60.0) for _ in range(20)}) > 1


def problem(
    cert: x509.Certificate, key: object, *, now: datetime, names: frozenset[x509.GeneralName] = NAMES
) -> str | None:
    return stored_certificate_problem(
        cert,
        key,  # type: ignore[arg-type]
        node_name="n1",
        names=names,
        now=now,
        renew_at=renewal_deadline(cert, jitter=0.0),
    )


def test_a_current_certificate_for_the_same_node_and_addresses_is_reused(ca: SigningCa) -> None:
    cert, key = ca.issue(node_name="n1", names=NAMES, not_before=START, lifetime=timedelta(days=10))
    assert problem(cert, key, now=START + timedelta(days=1)) is None


def test_a_certificate_past_its_renewal_point_or_expired_is_renewed(ca: SigningCa) -> None:
    cert, key = ca.issue(node_name="n1", names=NAMES, not_before=START, lifetime=timedelta(days=10))
    assert "past its renewal point" in (problem(cert, key, now=START + timedelta(days=7, seconds=1)) or "")
    assert "past its renewal point" in (problem(cert, key, now=START + timedelta(days=11)) or "")
    assert "not valid before" in (problem(cert, key, now=START - timedelta(days=1)) or "")


def test_a_certificate_for_other_addresses_or_another_node_is_renewed(ca: SigningCa) -> None:
    cert, key = ca.issue(node_name="n1", names=NAMES, not_before=START, lifetime=timedelta(days=10))
    now = START + timedelta(days=1)
    moved = serving_names("n1", ["10.0.0.6"])
    assert "differ from the node's addresses" in (problem(cert, key, now=now, names=moved) or "")
    more = serving_names("n1", ["10.0.0.5", "10.0.0.6"])
    assert "differ" in (problem(cert, key, now=now, names=more) or "")

    other, other_key = ca.issue(node_name="n2", names=NAMES, not_before=START, lifetime=timedelta(days=10))
    assert "not for node n1" in (problem(other, other_key, now=now) or "")
    assert "key does not match" in (problem(cert, new_private_key(), now=now) or "")


def write_store(state_dir: Path, cert: x509.Certificate, key: object) -> None:
    state_dir.mkdir(exist_ok=True)
    (state_dir / STORE_FILE_NAME).write_bytes(cert_pem(cert) + key_pem(key))  # type: ignore[arg-type]


def test_a_stored_certificate_is_loaded_at_once_without_asking_the_cluster(
    tmp_path: Path, ca: SigningCa
) -> None:
    cert, key = ca.issue(node_name="n1", names=NAMES)
    write_store(tmp_path / "state", cert, key)

    # The API is never touched: any use of this stand-in would fail.
    serving = via_csr(
        cast(KubeApi, object()),
        node_name="n1",
        addresses=["10.0.0.5"],
        client_ca_file=ca.write(tmp_path / "ca.crt"),
        state_dir=tmp_path / "state",
        self_approve=False,
    )

    assert serving.ready.is_set()
    assert serving.certificate is not None
    assert serving.certificate.serial_number == cert.serial_number
    assert serving.renew_at is not None
    assert serving.renew_at > datetime.now(UTC)


def test_a_stored_certificate_for_old_addresses_is_not_served(
    tmp_path: Path, ca: SigningCa, caplog: pytest.LogCaptureFixture
) -> None:
    cert, key = ca.issue(node_name="n1", names=NAMES)
    write_store(tmp_path / "state", cert, key)
    caplog.set_level(logging.INFO, logger="vk_provider.kubelet.certificates")

    serving = via_csr(
        cast(KubeApi, object()),
        node_name="n1",
        addresses=["10.0.0.6"],
        client_ca_file=ca.write(tmp_path / "ca.crt"),
        state_dir=tmp_path / "state",
        self_approve=False,
    )

    assert not serving.ready.is_set()
    assert serving.certificate is None
    assert "not reusing the stored serving certificate" in caplog.text


def test_a_garbled_store_is_ignored(tmp_path: Path, ca: SigningCa) -> None:
    (tmp_path / STORE_FILE_NAME).write_text("not a certificate")
    serving = via_csr(
        cast(KubeApi, object()),
        node_name="n1",
        addresses=["10.0.0.5"],
        client_ca_file=ca.write(tmp_path / "ca.crt"),
        state_dir=tmp_path,
        self_approve=False,
    )
    assert not serving.ready.is_set()


def test_a_stored_certificate_due_for_renewal_is_served_until_its_successor_arrives(
    tmp_path: Path, ca: SigningCa
) -> None:
    # 90 % of its lifetime has passed: past the renewal point, still valid.
    lifetime = timedelta(hours=10)
    cert, key = ca.issue(
        node_name="n1", names=NAMES, not_before=datetime.now(UTC) - lifetime * 0.9, lifetime=lifetime
    )
    write_store(tmp_path, cert, key)

    serving = via_csr(
        cast(KubeApi, object()),
        node_name="n1",
        addresses=["10.0.0.5"],
        client_ca_file=ca.write(tmp_path / "ca.crt"),
        state_dir=tmp_path,
        self_approve=False,
    )

    assert serving.ready.is_set()
    assert serving.certificate == cert
    assert serving.renew_at is not None
    assert serving.renew_at <= datetime.now(UTC)  # so run() asks for a new one at once


def test_an_expired_stored_certificate_is_not_served(tmp_path: Path, ca: SigningCa) -> None:
    lifetime = timedelta(hours=10)
    cert, key = ca.issue(
        node_name="n1", names=NAMES, not_before=datetime.now(UTC) - lifetime * 1.1, lifetime=lifetime
    )
    write_store(tmp_path, cert, key)

    serving = via_csr(
        cast(KubeApi, object()),
        node_name="n1",
        addresses=["10.0.0.5"],
        client_ca_file=ca.write(tmp_path / "ca.crt"),
        state_dir=tmp_path,
        self_approve=False,
    )

    assert not serving.ready.is_set()
