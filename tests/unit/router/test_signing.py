"""Requests to SigV4 endpoints go out signed: checked by a local stand-in for the SageMaker runtime.

The stand-in recomputes each request's signature with botocore's SigV4 primitives from what it
received and a known secret, and answers 403 when it does not match, as AWS would. Its address is
local, so the endpoints name region and service in their marker instead of in their host.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import os
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials, ReadOnlyCredentials
from multidict import CIMultiDict

from tests.unit.local import closed_port_url
from vk_provider.kit.traffic_auth import AwsSigV4
from vk_provider.router import Endpoint, ProxySettings, Router
from vk_provider.router import signing as signing_module
from vk_provider.router.signing import RequestSigning, ResolvedCredentials, split_headers, standard_chain

from . import backends, route, router_client, table

ACCESS_KEY = "AKIAVKROUTERTEST0001"
SECRET_KEY = "router-test-secret"
SESSION_TOKEN = "router-session-token"
REGION = "us-west-2"
AUTH = AwsSigV4(region=REGION)
INVOCATIONS = "/endpoints/vk-x/invocations"

_AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/(?P<service>[^/]+)"
    r"/aws4_request, SignedHeaders=(?P<signed>[a-z0-9;-]+), Signature=(?P<signature>[0-9a-f]{64})"
)


def verify(method: str, url: str, headers: dict[str, str], body: bytes) -> str | None:
    """Why the request's signature is wrong for the known secret, or None when it is right."""
    found = _AUTHORIZATION.fullmatch(headers.get("authorization", ""))
    if found is None:
        return "no SigV4 Authorization header"
    if (found["key"], found["region"], found["service"]) != (ACCESS_KEY, REGION, "sagemaker"):
        return f"wrong credential scope {found.group(0)!r}"
    stamp = headers.get("x-amz-date", "")
    sent = datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    if abs(datetime.now(UTC) - sent) > timedelta(minutes=5) or stamp[:8] != found["date"]:
        return "stale or inconsistent X-Amz-Date"
    signed = found["signed"].split(";")
    if not {"host", "x-amz-date"} <= set(signed):
        return f"host and x-amz-date must be signed, not only {signed}"
    request = AWSRequest(method=method, url=url, headers={name: headers[name] for name in signed}, data=body)
    request.context["timestamp"] = stamp
    auth = SigV4Auth(ReadOnlyCredentials(ACCESS_KEY, SECRET_KEY, SESSION_TOKEN), "sagemaker", REGION)
    expected = auth.signature(auth.string_to_sign(request, auth.canonical_request(request)), request)
    return None if hmac.compare_digest(expected, found["signature"]) else "signature mismatch"


class Runtime:
    """A stand-in for runtime.sagemaker.<region>.amazonaws.com: checks signatures, streams answers."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, str], bytes]] = []
        self.verdicts: list[str | None] = []
        self.first_chunk_read = asyncio.Event()
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._invoke)
        self.server = TestServer(app, host="127.0.0.1")

    def endpoint(self) -> Endpoint:
        return Endpoint(f"http://127.0.0.1:{self.server.port}{INVOCATIONS}", auth=AUTH)

    async def _invoke(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {name.lower(): value for name, value in request.headers.items()}
        self.received.append((request.path_qs, headers, body))
        verdict = verify(request.method, f"http://{request.host}{request.path_qs}", headers, body)
        self.verdicts.append(verdict)
        if verdict is not None:
            return web.json_response({"message": verdict}, status=403)
        # Two chunks, the second only once the client has read the first: the answer must stream.
        response = web.StreamResponse(headers={"Content-Type": "application/vnd.amazon.eventstream"})
        await response.prepare(request)
        await response.write(b"event-1:" + body[:16])
        await self.first_chunk_read.wait()
        await response.write(b"|event-2")
        await response.write_eof()
        return response


@contextlib.asynccontextmanager
async def runtime() -> AsyncIterator[Runtime]:
    stand_in = Runtime()
    async with stand_in.server:
        yield stand_in


def resolved(credentials: Credentials | None) -> ResolvedCredentials | None:
    return None if credentials is None else ResolvedCredentials(credentials)


def signing(credentials: Credentials | None) -> RequestSigning:
    return RequestSigning(lambda: resolved(credentials))


GOOD = Credentials(ACCESS_KEY, SECRET_KEY, SESSION_TOKEN)
BODY = b'{"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 8}'


async def chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part
        await asyncio.sleep(0)


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked-upload"])
async def test_a_request_to_a_sigv4_endpoint_arrives_signed_and_its_answer_streams_back(
    chunked: bool,
) -> None:
    async with runtime() as stand_in:
        router = Router(table(route(weight=100, away=(stand_in.endpoint(),))), signing=signing(GOOD))
        async with (
            router_client(router) as client,
            client.post(
                "/v1/chat/completions?stream=true",
                data=chunks(BODY[:10], BODY[10:]) if chunked else BODY,
                headers={
                    "Content-Type": "application/json",
                    "X-Amzn-SageMaker-Custom-Attributes": "accept_eula=true",
                    "Authorization": "Bearer meant-for-the-home-side",
                    "X-Amz-Content-SHA256": "UNSIGNED-PAYLOAD",
                    "Host": "chat.example.com",
                },
            ) as response,
        ):
            assert response.status == 200, await response.text()
            assert response.headers["Content-Type"] == "application/vnd.amazon.eventstream"
            async with asyncio.timeout(5):  # a router that buffered the answer would wait here forever
                first = await response.content.readany()
            stand_in.first_chunk_read.set()
            rest = await response.read()
        assert first + rest == b"event-1:" + BODY[:16] + b"|event-2"
        assert stand_in.verdicts == [None]
        ((path, headers, body),) = stand_in.received
        # The invocation URL is the whole target: the client's path and query are not appended.
        assert path == INVOCATIONS
        assert body == BODY
        assert headers["host"] == f"127.0.0.1:{stand_in.server.port}"
        assert headers["x-forwarded-host"] == "chat.example.com"
        assert headers["x-amz-security-token"] == SESSION_TOKEN
        assert "x-amz-content-sha256" not in headers  # the client's could replace the body's hash
        signed = headers["authorization"].split("SignedHeaders=")[1].split(",")[0].split(";")
        assert {"content-type", "x-amzn-sagemaker-custom-attributes"} <= set(signed)


async def test_the_stand_in_refuses_a_signature_made_with_another_secret() -> None:
    async with runtime() as stand_in:
        wrong = Credentials(ACCESS_KEY, "not-the-secret", SESSION_TOKEN)
        router = Router(table(route(weight=100, away=(stand_in.endpoint(),))), signing=signing(wrong))
        async with router_client(router) as client, client.post("/", data=BODY) as response:
            assert response.status == 403
            assert "signature mismatch" in await response.text()


async def test_without_credentials_the_request_gets_502_and_one_error_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with runtime() as stand_in:
        router = Router(table(route(weight=100, away=(stand_in.endpoint(),))), signing=signing(None))
        with caplog.at_level(logging.ERROR, logger="vk_provider.router.signing"):
            async with router_client(router) as client:
                for _ in range(3):
                    async with client.post("/v1/chat", data=BODY) as response:
                        assert response.status == 502
                        text = await response.text()
                        assert "cannot sign the request" in text
                        assert "the router has no AWS credentials" in text
        assert stand_in.received == []
        assert len(caplog.records) == 1  # once, not once per request
        exposition = router.metrics.exposition().decode()
        assert (
            'vk_provider_router_errors_total{name="web",namespace="ml",reason="signing",side="away"} 3.0'
            in exposition
        )


async def test_credentials_that_appear_later_are_found_and_the_recovery_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    found: list[Credentials | None] = [None, GOOD]
    async with runtime() as stand_in:
        router = Router(
            table(route(weight=100, away=(stand_in.endpoint(),))),
            signing=RequestSigning(lambda: resolved(found.pop(0)), retry_seconds=0.0),
        )
        stand_in.first_chunk_read.set()
        with caplog.at_level(logging.INFO, logger="vk_provider.router.signing"):
            async with router_client(router) as client:
                statuses = []
                for _ in range(3):
                    async with client.post("/", data=BODY) as response:
                        statuses.append(response.status)
                        await response.read()
        assert statuses == [502, 200, 200]
        assert [record.levelname for record in caplog.records] == ["ERROR", "INFO"]


async def test_a_body_too_large_to_sign_gets_413_and_nothing_is_sent() -> None:
    async with runtime() as stand_in:
        router = Router(
            table(route(weight=100, away=(stand_in.endpoint(),))),
            settings=ProxySettings(signed_body_limit=64),
            signing=signing(GOOD),
        )
        async with router_client(router) as client:
            for data in (b"x" * 65, chunks(b"x" * 40, b"x" * 40)):
                async with client.post("/", data=data) as response:
                    assert response.status == 413
                    assert "larger than the 64 bytes" in await response.text()
        assert stand_in.received == []
        assert (
            'vk_provider_router_rejected_total{name="web",namespace="ml",reason="body_too_large",'
            'side="away"} 2.0' in router.metrics.exposition().decode()
        )


async def test_a_streamed_body_read_for_signing_also_serves_the_retry_elsewhere() -> None:
    """The signed endpoint refuses the connection; the home retry gets the bytes already read."""
    async with backends("home", handler=echo) as (home,):
        dead = Endpoint(f"{closed_port_url()}{INVOCATIONS}", auth=AUTH)
        router = Router(
            table(route(weight=100, home=(home.endpoint(),), away=(dead,))), signing=signing(GOOD)
        )
        async with (
            router_client(router) as client,
            client.post("/v1/chat", data=chunks(b"part one, ", b"part two")) as response,
        ):
            assert response.status == 200
            assert await response.text() == "home got part one, part two at /v1/chat"


async def test_a_plain_attempt_that_could_not_connect_leaves_the_body_for_the_signed_one() -> None:
    async with runtime() as stand_in:
        stand_in.first_chunk_read.set()
        router = Router(
            table(route(weight=0, home=(Endpoint(closed_port_url()),), away=(stand_in.endpoint(),))),
            signing=signing(GOOD),
        )
        async with (
            router_client(router) as client,
            client.post("/v1/chat", data=chunks(BODY[:5], BODY[5:])) as response,
        ):
            assert response.status == 200
            await response.read()
        assert stand_in.verdicts == [None]
        assert stand_in.received[0][2] == BODY


async def echo(request: web.Request) -> web.StreamResponse:
    return web.Response(text=f"home got {(await request.read()).decode()} at {request.path}")


def test_headers_are_split_into_signed_unsigned_and_dropped() -> None:
    forwarded = CIMultiDict(
        [
            ("Accept", "text/event-stream"),
            ("accept", "application/json"),
            ("X-Amzn-SageMaker-Target-Model", "m.tar.gz"),
            ("X-Forwarded-For", "10.0.0.1"),
            ("User-Agent", "curl"),
            ("Host", "chat.example.com"),
            ("Content-Length", "3"),
            ("Authorization", "Bearer x"),
            ("X-Amz-Security-Token", "the client's"),
        ]
    )
    signed, unsigned = split_headers(forwarded)
    # Sent twice, signed (and then sent) once as the comma-joined value the signature covers.
    assert signed == {
        "Accept": "text/event-stream,application/json",
        "X-Amzn-SageMaker-Target-Model": "m.tar.gz",
    }
    assert list(unsigned.items()) == [("X-Forwarded-For", "10.0.0.1"), ("User-Agent", "curl")]


# --- Credentials read from a file follow the file ---------------------------------------------------

ROTATED_KEY = "AKIAVKROUTERTEST0002"
URL = f"https://runtime.sagemaker.{REGION}.amazonaws.com{INVOCATIONS}"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def no_ambient_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The machine's AWS settings stay out: no AWS_* variables, no shared files, no instance metadata."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def write_keys(path: Path, access_key: str, *, profile: str = "default") -> None:
    """Write a credentials file and move its mtime on, so a rewrite within the file system's timestamp
    resolution (same size, same inode) still shows."""
    previous = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(f"[{profile}]\naws_access_key_id = {access_key}\naws_secret_access_key = {SECRET_KEY}\n")
    os.utime(path, ns=(previous + 1_000_000_000, previous + 1_000_000_000))


async def signing_key(signer: RequestSigning) -> str:
    """The access key the next signed request names in its Authorization header."""
    headers = await signer.signed_headers("POST", URL, CIMultiDict(), BODY, AUTH)
    found = _AUTHORIZATION.fullmatch(headers["Authorization"])
    assert found is not None
    return found["key"]


@pytest.mark.usefixtures("no_ambient_aws")
async def test_a_rotated_credentials_file_signs_the_next_request_after_the_check_interval(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "credentials"
    write_keys(path, ACCESS_KEY)
    clock = FakeClock()
    signer = RequestSigning(standard_chain(credentials_file=path), clock=clock)
    assert await signing_key(signer) == ACCESS_KEY
    write_keys(path, ROTATED_KEY)
    clock.now += 0.9
    assert await signing_key(signer) == ACCESS_KEY  # not looked at before the interval is over
    clock.now += 0.1
    with caplog.at_level(logging.INFO, logger="vk_provider.router.signing"):
        assert await signing_key(signer) == ROTATED_KEY
    assert [record.getMessage() for record in caplog.records] == [
        f"the AWS credentials file {path} changed; signing with its new credentials"
    ]


@pytest.mark.usefixtures("no_ambient_aws")
async def test_the_file_is_stat_at_most_once_per_interval_and_reread_only_when_it_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "credentials"
    write_keys(path, ACCESS_KEY)
    chain = standard_chain(credentials_file=path)
    resolutions = 0

    def counting_chain() -> ResolvedCredentials | None:
        nonlocal resolutions
        resolutions += 1
        return chain()

    clock = FakeClock()
    signer = RequestSigning(counting_chain, clock=clock, check_seconds=5.0)
    assert await signing_key(signer) == ACCESS_KEY
    stats: list[Path] = []
    real_stamp = signing_module.file_stamp

    def counting_stamp(path: Path) -> signing_module.FileStamp | None:
        stats.append(path)
        return real_stamp(path)

    monkeypatch.setattr(signing_module, "file_stamp", counting_stamp)
    for _ in range(10):
        await signing_key(signer)
    assert stats == []
    clock.now += 5.0
    for _ in range(10):
        await signing_key(signer)
    assert stats == [path]
    assert resolutions == 1  # the file did not change: stat, not re-read


@pytest.mark.usefixtures("no_ambient_aws")
async def test_a_secret_volume_update_swapping_a_symlink_is_followed(tmp_path: Path) -> None:
    """The kubelet writes a Secret's new version into a new folder and swaps the `..data` link to it;
    the file keeps its path (a link through `..data`), and may keep its size and mtime."""
    volume = tmp_path / "secret"
    volume.mkdir()

    def publish(version: str, access_key: str) -> None:
        folder = volume / f"..{version}"
        folder.mkdir()
        write_keys(folder / "credentials", access_key)
        (volume / "..data_tmp").symlink_to(folder.name)
        os.replace(volume / "..data_tmp", volume / "..data")

    publish("2026_01_01_00_00_00.1", ACCESS_KEY)
    (volume / "credentials").symlink_to("..data/credentials")
    clock = FakeClock()
    signer = RequestSigning(standard_chain(credentials_file=volume / "credentials"), clock=clock)
    assert await signing_key(signer) == ACCESS_KEY
    publish("2026_01_02_00_00_00.2", ROTATED_KEY)
    clock.now += 1.0
    assert await signing_key(signer) == ROTATED_KEY


@pytest.mark.usefixtures("no_ambient_aws")
@pytest.mark.parametrize(
    ("broken", "problem"),
    [
        (f"[default\naws_access_key_id = {ROTATED_KEY}\n", "Unable to parse config file"),
        (f"[another]\naws_access_key_id = {ROTATED_KEY}\naws_secret_access_key = x\n", "no usable keys"),
    ],
    ids=["not-ini", "profile-missing"],
)
async def test_a_changed_file_without_usable_keys_keeps_the_keys_read_before_until_fixed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, broken: str, problem: str
) -> None:
    path = tmp_path / "credentials"
    write_keys(path, ACCESS_KEY)
    clock = FakeClock()
    signer = RequestSigning(standard_chain(credentials_file=path), clock=clock)
    assert await signing_key(signer) == ACCESS_KEY
    path.write_text(broken)
    clock.now += 1.0
    with caplog.at_level(logging.WARNING, logger="vk_provider.router.signing"):
        assert await signing_key(signer) == ACCESS_KEY
        clock.now += 1.0
        assert await signing_key(signer) == ACCESS_KEY  # unchanged since: not tried again
    (warning,) = caplog.records
    assert f"the AWS credentials file {path} changed but cannot be used" in warning.getMessage()
    assert problem in warning.getMessage()
    assert ROTATED_KEY not in caplog.text
    write_keys(path, ROTATED_KEY)
    clock.now += 1.0
    assert await signing_key(signer) == ROTATED_KEY


@pytest.mark.usefixtures("no_ambient_aws")
async def test_the_default_credentials_file_is_watched_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "from-environment"
    write_keys(path, ACCESS_KEY, profile="router")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(path))
    clock = FakeClock()
    signer = RequestSigning(standard_chain(profile="router"), clock=clock)
    assert await signing_key(signer) == ACCESS_KEY
    write_keys(path, ROTATED_KEY, profile="router")
    clock.now += 1.0
    assert await signing_key(signer) == ROTATED_KEY


@pytest.mark.usefixtures("no_ambient_aws")
def test_credentials_from_elsewhere_than_the_file_are_not_watched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "credentials"
    write_keys(path, ROTATED_KEY)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    found = standard_chain(credentials_file=path)()
    assert found is not None
    assert found.credentials.access_key == ACCESS_KEY  # the environment comes first in the chain
    assert found.source is None
