"""IRSA with no Secret at all: the router's signing and the SageMaker provider take AWS credentials from
botocore's default chain, which exchanges the projected web identity token (AWS_WEB_IDENTITY_TOKEN_FILE,
AWS_ROLE_ARN, as EKS's pod identity webhook injects them) at STS. STS is a stand-in on localhost
(AWS_ENDPOINT_URL_STS); everything between the environment and the signature is botocore's own."""

from __future__ import annotations

import os
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from vk_provider.router.signing import standard_chain
from vk_providers.sagemaker.config import parse_settings
from vk_providers.sagemaker.session import make_session

ROLE_ARN = "arn:aws:iam::123456789012:role/vk-provider-router"
STS_KEY = "ASIAWEBIDENTITYKEY01"
TOKEN = "eyJhbGciOiJSUzI1NiJ9.projected-service-account-token"

STS_ANSWER = f"""<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <Credentials>
      <AccessKeyId>{STS_KEY}</AccessKeyId>
      <SecretAccessKey>web-identity-secret</SecretAccessKey>
      <SessionToken>web-identity-session</SessionToken>
      <Expiration>2099-01-01T00:00:00Z</Expiration>
    </Credentials>
    <SubjectFromWebIdentityToken>system:serviceaccount:vk-provider-system:vk-provider-router</SubjectFromWebIdentityToken>
    <AssumedRoleUser>
      <Arn>arn:aws:sts::123456789012:assumed-role/vk-provider-router/s</Arn>
      <AssumedRoleId>AROAEXAMPLE:s</AssumedRoleId>
    </AssumedRoleUser>
  </AssumeRoleWithWebIdentityResult>
  <ResponseMetadata><RequestId>r-1</RequestId></ResponseMetadata>
</AssumeRoleWithWebIdentityResponse>"""


class StandInSts:
    """Answers AssumeRoleWithWebIdentity; keeps each request's form fields."""

    def __init__(self) -> None:
        self.requests: list[dict[str, list[str]]] = []
        requests = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                requests.append(urllib.parse.parse_qs(self.rfile.read(length).decode()))
                body = STS_ANSWER.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def irsa(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[StandInSts]:
    """A pod as IRSA leaves it: a token file and a role, no keys anywhere, nothing else of the host's."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    token = tmp_path / "token"
    token.write_text(TOKEN)
    sts = StandInSts()
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token))
    monkeypatch.setenv("AWS_ROLE_ARN", ROLE_ARN)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", sts.url)
    serving = threading.Thread(target=sts.server.serve_forever, daemon=True)
    serving.start()
    try:
        yield sts
    finally:
        sts.server.shutdown()
        sts.server.server_close()


def assert_exchanged_the_token(sts: StandInSts) -> None:
    assert sts.requests, "botocore never asked STS"
    form = sts.requests[0]
    assert form["Action"] == ["AssumeRoleWithWebIdentity"]
    assert form["RoleArn"] == [ROLE_ARN]
    assert form["WebIdentityToken"] == [TOKEN]


@pytest.mark.parametrize(
    "credentials_file",
    [None, "/etc/vk-provider/aws/credentials"],
    ids=["no-file", "optional-secret-absent"],
)
def test_the_router_signs_with_the_web_identity_without_a_secret(
    irsa: StandInSts, credentials_file: str | None
) -> None:
    resolve = standard_chain(credentials_file=Path(credentials_file) if credentials_file else None)
    found = resolve()
    assert found is not None
    assert found.credentials.get_frozen_credentials().access_key == STS_KEY
    assert found.source is None  # nothing to watch: botocore refreshes these before they expire
    assert_exchanged_the_token(irsa)


def test_the_sagemaker_provider_s_session_takes_the_web_identity(irsa: StandInSts) -> None:
    settings = parse_settings({"role_arn": "arn:aws:iam::123456789012:role/execution"})
    assert settings.credentials_file is None
    session = make_session(settings, on_values=lambda values: None)
    credentials = session.get_credentials()
    assert credentials is not None
    assert credentials.get_frozen_credentials().access_key == STS_KEY
    assert_exchanged_the_token(irsa)


def test_without_a_file_the_router_takes_keys_from_the_environment(
    irsa: StandInSts, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAENVIRONMENTKEY01")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "environment-secret")
    found = standard_chain()()
    assert found is not None
    assert found.credentials.access_key == "AKIAENVIRONMENTKEY01"  # first in the chain
    assert irsa.requests == []  # so STS is never asked
