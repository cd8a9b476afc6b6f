"""SigV4 signing of the router's requests to SageMaker endpoints, checked against known answers."""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from botocore.credentials import Credentials, ReadOnlyCredentials

from vk_devtools.standins.sagemaker import MotoSageMaker
from vk_provider.provider import PodRef
from vk_providers.sagemaker import sign_request

from .support import ACCESS_KEY, SECRET_KEY, SESSION_TOKEN, make_provider, write_credentials

# The credentials and time of AWS's Signature Version 4 test suite.
SUITE = ReadOnlyCredentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", None)
SUITE_TIME = datetime(2015, 8, 30, 12, 36, tzinfo=UTC)


@pytest.mark.parametrize(
    ("method", "signature"),
    [
        ("GET", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),  # get-vanilla
        ("POST", "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"),  # post-vanilla
    ],
)
def test_the_aws_test_suites_vanilla_requests(method: str, signature: str) -> None:
    headers = sign_request(
        method,
        "https://example.amazonaws.com/",
        {},
        b"",
        credentials=SUITE,
        region="us-east-1",
        service="service",
        timestamp=SUITE_TIME,
    )
    assert headers == {
        "X-Amz-Date": "20150830T123600Z",
        "Authorization": "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
        f"SignedHeaders=host;x-amz-date, Signature={signature}",
    }


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def expected_signature(
    *, body: bytes, content_type: str, date: str, token: str, host: str, path: str, region: str
) -> str:
    """SigV4 by hand, from the specification, for a POST with a content type and a session token."""
    canonical_request = "\n".join(
        [
            "POST",
            path,
            "",
            f"content-type:{content_type}",
            f"host:{host}",
            f"x-amz-date:{date}",
            f"x-amz-security-token:{token}",
            "",
            "content-type;host;x-amz-date;x-amz-security-token",
            hashlib.sha256(body).hexdigest(),
        ]
    )
    scope = f"{date[:8]}/{region}/sagemaker/aws4_request"
    string_to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", date, scope, hashlib.sha256(canonical_request.encode()).hexdigest()]
    )
    key = _hmac(f"AWS4{SECRET_KEY}".encode(), date[:8])
    for part in (region, "sagemaker", "aws4_request"):
        key = _hmac(key, part)
    return hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()


def test_an_invocation_is_signed_for_sagemaker_with_the_session_token() -> None:
    host = "runtime.sagemaker.eu-west-1.amazonaws.com"
    path = "/endpoints/vk-0b6f2c8e-5d7a-4d0e-9c1b-6a2f1e3d4c5b/invocations"
    body = b'{"inputs": "Hello", "parameters": {"max_new_tokens": 8}}'
    credentials = Credentials(ACCESS_KEY, SECRET_KEY, SESSION_TOKEN)
    headers = sign_request(
        "POST",
        f"https://{host}{path}",
        {"Content-Type": "application/json"},
        body,
        credentials=credentials,
        region="eu-west-1",
        timestamp=datetime(2026, 12, 2, 9, 30, 5, tzinfo=UTC),
    )
    signature = expected_signature(
        body=body,
        content_type="application/json",
        date="20261202T093005Z",
        token=SESSION_TOKEN,
        host=host,
        path=path,
        region="eu-west-1",
    )
    assert headers == {
        "Content-Type": "application/json",
        "X-Amz-Date": "20261202T093005Z",
        "X-Amz-Security-Token": SESSION_TOKEN,
        "Authorization": "AWS4-HMAC-SHA256 "
        f"Credential={ACCESS_KEY}/20261202/eu-west-1/sagemaker/aws4_request, "
        f"SignedHeaders=content-type;host;x-amz-date;x-amz-security-token, Signature={signature}",
    }


def test_the_signature_covers_the_body() -> None:
    def sign(body: bytes) -> str:
        return sign_request(
            "POST",
            "https://example.amazonaws.com/",
            {},
            body,
            credentials=SUITE,
            region="us-east-1",
            timestamp=SUITE_TIME,
        )["Authorization"]

    assert sign(b"{}") != sign(b"{ }")


def test_signing_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    sign_request(
        "POST",
        "https://runtime.sagemaker.us-east-1.amazonaws.com/endpoints/e/invocations",
        {},
        b"{}",
        credentials=Credentials(ACCESS_KEY, SECRET_KEY, SESSION_TOKEN),
        region="us-east-1",
    )
    assert caplog.records == []  # botocore's own add_auth logs the canonical request, token included


async def test_the_providers_signer_uses_its_credentials_and_follows_the_file(
    moto: MotoSageMaker, tmp_path: Path
) -> None:
    credentials_file = write_credentials(tmp_path / "aws-credentials")
    provider = make_provider(moto, tmp_path, credentials_file=credentials_file)
    try:
        signer = await provider.request_signer()
        ref = PodRef("default", "signed", "0b6f2c8e-5d7a-4d0e-9c1b-6a2f1e3d4c5b")
        url = provider.traffic_address(ref)
        assert url == f"https://runtime.sagemaker.us-east-1.amazonaws.com/endpoints/vk-{ref.uid}/invocations"
        headers = signer.sign("POST", url, {"Content-Type": "application/json"}, b"{}")
        assert headers["Authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/")
        assert "/us-east-1/sagemaker/aws4_request" in headers["Authorization"]
        assert headers["X-Amz-Security-Token"] == SESSION_TOKEN
        # The Secret is rewritten with new keys: the next signature uses them, no restart needed.
        write_credentials(
            credentials_file, access_key="AKIAVKPROVIDERTEST02", secret_key="rotated", token=None
        )
        stat = credentials_file.stat()
        os.utime(credentials_file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
        rotated = signer.sign("POST", url, {}, b"{}")
        assert rotated["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIAVKPROVIDERTEST02/")
        assert "X-Amz-Security-Token" not in rotated
    finally:
        await provider.aclose()
