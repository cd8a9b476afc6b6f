"""The API key is sent, and nowhere else: not in logs, errors, states or reprs, even when echoed back."""

from __future__ import annotations

import logging
import pickle
from pathlib import Path

import aiohttp
import pytest

from vk_devtools.standins.runpod.standin import FakeRunPod
from vk_provider.errors import ProviderError
from vk_provider.kit.credentials import MissingSecretError, Secret, SecretSource
from vk_provider.provider import LogOptions
from vk_provider.testing.contract import wait_running
from vk_providers.runpod import RunPodProvider

from .support import ManualClock, pod_request, runpod_pod_of


async def test_the_key_never_shows(
    fake: FakeRunPod, provider: RunPodProvider, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, aiohttp's and tenacity's included
    key = fake.api_key
    errors: list[ProviderError] = []
    request = pod_request("secretive")
    await provider.create_pod(request)
    running = await wait_running(provider, request.ref)
    assert running.traffic_address is not None
    async with (
        aiohttp.ClientSession() as session,
        session.get(running.traffic_address + "/ready") as response,
    ):
        assert response.status == 200
    chunks = [chunk async for chunk in provider.stream_logs(request.ref, "server", LogOptions())]
    assert chunks == [b"GET /ready\n"]

    # RunPod (or a proxy in front of it) echoing the key back, in errors of every kind.
    await fake.control.fail(status=503, times=None, detail=f"bad gateway for Bearer {key}")
    for call in (provider.list_pods, provider.check_health):
        try:
            await call()
        except ProviderError as error:
            errors.append(error)
    await fake.control.clear_faults()
    await fake.control.fail(status=401, detail=f"key {key} revoked")
    try:
        await provider.get_pod_state(request.ref)
    except ProviderError as error:
        errors.append(error)
    await fake.control.fail(status=429, retry_after=60, detail=f"too many requests by {key}")
    try:
        await provider.list_pods()
    except ProviderError as error:
        errors.append(error)
    pod = await runpod_pod_of(fake, request.ref.uid)
    await fake.control.set_status(pod["id"], "ERROR", f"registry login failed with {key}")
    clock.advance(60)
    state = await provider.get_pod_state(request.ref)
    await provider.delete_pod(request.ref, grace_period_seconds=0)

    assert len(errors) == 3  # the health probe failed once: logged, not raised
    assert state is not None
    assert state.message is not None
    assert "registry login failed with ***" in state.message
    texts = [caplog.text, repr(provider), repr(provider.settings), state.message, repr(state)]
    texts += [str(error) for error in errors] + [repr(error) for error in errors]
    texts += [str(error.__context__) for error in errors if error.__context__ is not None]
    for text in texts:
        assert key not in text
    assert any("***" in str(error) for error in errors)
    assert all(record["authorization"] == "ok" for record in await fake.control.requests())


def test_secret_values_hide_in_every_printed_form() -> None:
    secret = Secret("rp_hidden")
    assert str(secret) == "***"
    assert repr(secret) == "Secret('***')"
    assert f"{secret}" == "***"
    assert secret.reveal() == "rp_hidden"
    with pytest.raises(TypeError):
        pickle.dumps(secret)


def test_redaction_covers_every_key_the_source_has_handed_out() -> None:
    environ = {"KEY": "rp_first"}
    source = SecretSource(env_var="KEY", environ=environ)
    assert source.current().reveal() == "rp_first"
    environ["KEY"] = "rp_second"
    assert source.current().reveal() == "rp_second"
    assert source.redact("old rp_first, new rp_second") == "old ***, new ***"
    assert "rp_" not in repr(source)


def test_a_key_file_is_read_stripped_and_again_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "key"
    path.write_text("rp_one\n")
    source = SecretSource(file=path, env_var="IGNORED", environ={"IGNORED": "rp_env"})
    assert source.current().reveal() == "rp_one"
    path.write_text("rp_second_key\n")  # a different size: seen as a change even within one mtime tick
    assert source.current().reveal() == "rp_second_key"
    assert source.describe() == f"the file {path}"


def test_an_empty_or_missing_key_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "key"
    path.write_text("\n")
    with pytest.raises(MissingSecretError, match=f"no API key: the file {path} is empty"):
        SecretSource(file=path).current()
    with pytest.raises(MissingSecretError, match=r"cannot read .*absent"):
        SecretSource(file=tmp_path / "absent").current()
