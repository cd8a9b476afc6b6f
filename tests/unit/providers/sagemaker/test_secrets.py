"""AWS credentials (and a model's environment) never show up in logs, errors, states or reprs."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from vk_devtools.standins.sagemaker import MotoSageMaker, SageMakerLayer
from vk_provider.errors import ProviderError
from vk_provider.provider import ProviderContext
from vk_provider.testing.contract import eventually
from vk_providers.sagemaker import SageMakerProvider
from vk_providers.sagemaker.redaction import Redactor

from .support import (
    ACCESS_KEY,
    IMAGE,
    SECRET_KEY,
    SESSION_TOKEN,
    ManualClock,
    make_provider,
    pod_request,
    provider_config,
)

POD_SECRET = "hf_pod_secret_value_0123456789"
AWKWARD_POD_SECRET = "pa\"ss}w{o\\rd's"
"""A value that looks like the syntax around it."""
SECRETS = (ACCESS_KEY, SECRET_KEY, SESSION_TOKEN, POD_SECRET, "ss}w{o", "DB_PASSWORD")


async def test_credentials_never_reach_the_logs(
    moto: MotoSageMaker,
    layer: SageMakerLayer,
    tmp_path: Path,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, botocore's and urllib3's included
    provider = make_provider(moto, tmp_path, layer=layer, clock=clock)
    texts: list[str] = [repr(provider), repr(provider.settings)]

    async def models_now() -> list[str]:
        return [model["ModelName"] for model in moto.client().list_models()["Models"]]

    try:
        request = pod_request(
            "secretive",
            env=(("MODEL", "llama"), ("HF_TOKEN", POD_SECRET), ("DB_PASSWORD", AWKWARD_POD_SECRET)),
        )
        await provider.create_pod(request)
        # An update reads the model's environment back (DescribeModel) and makes a new model with it.
        await provider.update_pod(
            pod_request("secretive", uid=request.ref.uid, image=IMAGE + "-2", env=request.containers[0].env)
        )
        await eventually(
            models_now,
            lambda models: len(models) == 1,  # the old one removed: no call is left to make
            what="the update to be done, before the faults below",
        )
        state = await provider.get_pod_state(request.ref)
        texts.append(repr(state))
        texts.extend(repr(state) for state in await provider.list_pods())
        # SageMaker quotes the canonical request it expected when a signature does not match; the
        # session token is in it.
        layer.fail(
            None,
            code="InvalidSignatureException",
            message="The request signature we calculated does not match the signature you provided. The "
            "Canonical String for this request should have been\n'POST\n/\n\ncontent-type:application/"
            f"x-amz-json-1.1\nhost:api.sagemaker.us-east-1.amazonaws.com\nx-amz-date:20261202T093005Z\n"
            f"x-amz-security-token:{SESSION_TOKEN}\nx-amz-target:SageMaker.DescribeEndpoint\n'",
            times=2,
        )
        for call in (provider.get_pod_state(request.ref), provider.check_health()):
            with pytest.raises(ProviderError) as raised:
                await call
            texts.append(str(raised.value))
        signer = await provider.request_signer()
        texts.append(repr(signer))
        signer.sign("POST", provider.traffic_address(request.ref), {}, b"{}")
        await provider.delete_pod(request.ref, grace_period_seconds=0)
    finally:
        await provider.aclose()
    texts.append(caplog.text)
    everything = "\n".join(texts)
    # Not vacuous: botocore did log its requests, and SageMaker's message did reach the error.
    assert "Sending http request" in caplog.text
    assert "X-Amz-Security-Token': b'***'" in caplog.text
    assert "x-amz-security-token:***" in everything
    for secret in SECRETS:
        assert secret not in everything


def test_the_redactor_scrubs_the_forms_credentials_take() -> None:
    redactor = Redactor()
    redactor.remember(["wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", None, ""])
    headers = {
        "X-Amz-Security-Token": b"IQoJb3JpZ2luX2VjEJr",
        "Authorization": b"AWS4-HMAC-SHA256 Credential=ASIAEXAMPLEEXAMPLE12/20261202/us-east-1/sagemaker/"
        b"aws4_request, SignedHeaders=host;x-amz-date;x-amz-security-token, Signature=0123456789abcdef",
    }
    # A body as botocore logs it: the repr of the JSON bytes, with values that look like the syntax.
    environment = {"TOKEN": "p@ss\"w}r{d\\x'q", "NAME": "caf\u00e9"}
    body = json.dumps({"ModelName": "m", "PrimaryContainer": {"Image": "i", "Environment": environment}})
    parsed = {"PrimaryContainer": {"Image": "i", "Environment": environment}}
    text = "\n".join(
        [
            f"headers={headers}",
            "x-amz-security-token:IQoJb3JpZ2luX2VjEJr",
            "key AKIAIOSFODNN7EXAMPLE, secret wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            f"body: {body.encode()!r}",
            f"parsed: {parsed!r}",
        ]
    )
    scrubbed = redactor.redact(text)
    for secret in ("IQoJb3JpZ2luX2VjEJr", "ASIAEXAMPLEEXAMPLE12", "AKIAIOSFODNN7EXAMPLE", "EXAMPLEKEY"):
        assert secret not in scrubbed
    assert "0123456789abcdef" not in scrubbed
    assert "TOKEN" not in scrubbed
    assert "caf" not in scrubbed
    assert "SignedHeaders=host;x-amz-date;x-amz-security-token" in scrubbed  # names are not secrets
    assert scrubbed.count('Environment": {***}') == 1
    assert scrubbed.count("'Environment': {***}") == 1
    assert scrubbed.count('"Image": "i"') == 1


def test_a_bad_credentials_file_is_refused_without_quoting_it(moto: MotoSageMaker, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.write_text(f"aws_access_key_id = {ACCESS_KEY}\n[default\n")
    with pytest.raises(ValueError, match="is not an INI file") as raised:
        make_provider(moto, tmp_path, credentials_file=broken)
    assert ACCESS_KEY not in str(raised.value)
    half = tmp_path / "half"
    half.write_text(f"[default]\naws_access_key_id = {ACCESS_KEY}\n")
    with pytest.raises(ValueError, match="needs aws_access_key_id and aws_secret_access_key") as raised:
        make_provider(moto, tmp_path, credentials_file=half)
    assert ACCESS_KEY not in str(raised.value)
    missing = provider_config(moto, tmp_path / "missing")
    with pytest.raises(ValueError, match=r"cannot read the AWS credentials file .*missing"):
        SageMakerProvider(ProviderContext("n", missing, "10.0.0.1", tmp_path))


async def test_a_profile_picks_the_section_of_the_credentials_file(
    moto: MotoSageMaker, layer: SageMakerLayer, tmp_path: Path
) -> None:
    credentials_file = tmp_path / "aws-credentials"
    credentials_file.write_text(
        "[default]\naws_access_key_id = AKIAWRONGWRONGWRONG1\naws_secret_access_key = wrong\n"
        f"[inference]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n"
    )
    provider = make_provider(
        moto, tmp_path, layer=layer, credentials_file=credentials_file, profile="inference"
    )
    try:
        headers = (await provider.request_signer()).sign("GET", "https://example.com/", {}, b"")
        assert f"Credential={ACCESS_KEY}/" in headers["Authorization"]
    finally:
        await provider.aclose()


async def test_the_standard_chain_is_used_without_a_credentials_file(
    moto: MotoSageMaker, layer: SageMakerLayer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    config = provider_config(moto, tmp_path / "unused")
    del config["credentials_file"], config["region"]
    provider = SageMakerProvider(
        ProviderContext("n", config, "10.0.0.1", tmp_path), client_hook=layer.install
    )
    try:
        assert provider.region == "eu-west-1"
        assert await provider.list_pods() == []
        headers = (await provider.request_signer()).sign("GET", "https://example.com/", {}, b"")
        assert f"Credential={ACCESS_KEY}/" in headers["Authorization"]
        assert "/eu-west-1/sagemaker/" in headers["Authorization"]
    finally:
        await provider.aclose()
