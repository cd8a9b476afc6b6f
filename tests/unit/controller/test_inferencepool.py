"""The `inferencepool` plane's own checks: the pool's picker must answer before a step moves weight."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.unit.controller.offload_plane import NAME, NAMESPACE, MemoryApi
from vk_devtools.devcluster.pki import CertificateAuthority
from vk_provider.controller import inferencepool
from vk_provider.controller.dataplanes import DataPlanes
from vk_provider.controller.httproutes import RouteProblem
from vk_provider.controller.inferencepool import InferencePools
from vk_provider.controller.routers import RouterDirectory, RouterUnreachable
from vk_provider.offload.inferencepools import inference_pool_path
from vk_provider.offload.spec import OffloadSpec, PoolRef, parse_offload
from vk_provider.routetable.table import Endpoint, EndpointPicker, Route, RouteMatch, RouteTable
from vk_provider.xds.server import XdsServer
from vk_provider.xds.status import status_document

POOL = PoolRef("chat-pool", "ml")


@pytest.fixture
async def answering_picker(tmp_path: Path) -> AsyncIterator[str]:
    """A TLS server at 127.0.0.1:PORT, as a live picker answers a handshake."""
    authority = CertificateAuthority.create(tmp_path / "ca")
    pair = authority.issue_serving(tmp_path, "picker", common_name="picker")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pair.cert, pair.key)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=context)
    async with server:
        yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}"


@pytest.fixture
def silent_picker() -> Iterator[str]:
    """A socket that listens and never accepts: the kernel completes the TCP handshake, nobody answers
    the TLS one, as with a picker stopped by SIGSTOP."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    yield f"127.0.0.1:{listener.getsockname()[1]}"
    listener.close()


def picker(*addresses: str, problem: str = "") -> dict[str, object]:
    return {"pool": "ml/chat-pool", "addresses": list(addresses), "fail_open": False, "problem": problem}


async def test_a_picker_that_answers_lets_the_step_go_on(answering_picker: str) -> None:
    await inferencepool._picker_answers(POOL, picker(answering_picker))


async def test_a_silent_picker_holds_the_step_and_is_named(
    silent_picker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inferencepool, "PICKER_ANSWER_SECONDS", 0.5)
    with pytest.raises(RouterUnreachable) as raised:
        await inferencepool._picker_answers(POOL, picker(silent_picker))
    message = str(raised.value)
    assert raised.value.waiting_reason == "WaitingForEndpointPicker"  # Progressing's reason
    assert "the endpoint picker of InferencePool ml/chat-pool does not answer" in message
    assert f"{silent_picker}: no answer within 0.5 s" in message
    assert "the step waits until it answers" in message


async def test_one_answering_replica_is_enough(answering_picker: str, silent_picker: str) -> None:
    await inferencepool._picker_answers(POOL, picker(silent_picker, answering_picker))


@pytest.mark.parametrize(
    ("found", "words"),
    [
        (None, "gives the Envoys no endpoint picker for InferencePool ml/chat-pool yet"),
        (picker(problem="InferencePool ml/chat-pool not found"), "no endpoint picker to ask: InferencePool"),
        (picker(), "has no ready endpoint"),
    ],
)
async def test_a_pool_without_a_picker_to_ask_holds_the_step_and_says_why(
    found: dict[str, object] | None, words: str
) -> None:
    with pytest.raises(RouterUnreachable, match=words):
        await inferencepool._picker_answers(POOL, found)


def test_the_xds_status_says_which_picker_the_envoys_ask() -> None:
    server = XdsServer()
    chosen = EndpointPicker("ml/chat-pool", ("10.0.0.9:9002",), fail_open=True)
    home = (Endpoint("http://10.0.0.1:8080"),)
    server.update(RouteTable.of([Route("ml", "chat", 1, RouteMatch(("chat.test",)), 0, home, picker=chosen)]))
    (route,) = status_document(server)["routes"]
    assert route["picker"] == {
        "pool": "ml/chat-pool",
        "addresses": ["10.0.0.9:9002"],
        "fail_open": True,
        "problem": "",
    }


def test_an_inferencepool_offload_is_driven_by_the_pools_plane() -> None:
    envoys = RouterDirectory(None, urls=["http://127.0.0.1:9"])
    pools = InferencePools(None, "http://127.0.0.1:9", envoys)  # type: ignore[arg-type]  # never asked
    offload = {
        "metadata": {"namespace": "ml", "name": "chat"},
        "spec": {
            "home": {"deployment": "chat", "service": "chat"},
            "placement": "home",
            "route": {"hosts": ["chat.test"]},
            "traffic": {"dataPlane": "inferencepool", "inferencePool": {"name": "chat-pool"}},
        },
    }
    assert DataPlanes(pools).of(parse_offload(offload)) is pools


def _pool(labels: dict[str, str], ports: list[int], picker: str | None = "chat-pool-epp") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "selector": {"matchLabels": labels},
        "targetPorts": [{"number": p} for p in ports],
    }
    if picker is not None:
        spec["endpointPickerRef"] = {"name": picker, "port": {"number": 9002}}
    return {"metadata": {"name": "chat-pool", "namespace": "team"}, "spec": spec}


SERVICE = {"spec": {"selector": {"app": "chat"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}


@pytest.mark.parametrize(
    ("pool", "words"),
    [
        (_pool({"app": "chat"}, [8080]), ""),
        (_pool({"app": "chat", "tier": "gpu"}, [8080]), ""),  # a subset of the Service's pods
        (
            _pool({"app": "other"}, [8080]),
            "selects pods the home Service does not (its selector lacks app=chat)",
        ),
        (_pool({"app": "chat"}, [9000]), "targets port(s) [9000], not the home Service's [8080]"),
    ],
)
def test_a_pool_must_be_the_home_services_pods_at_its_port(pool: dict[str, Any], words: str) -> None:
    assert inferencepool.pool_mismatch(pool, SERVICE) == words


def test_a_service_naming_its_target_port_is_not_compared_by_number() -> None:
    named = {"spec": {"selector": {"app": "chat"}, "ports": [{"port": 80, "targetPort": "http"}]}}
    assert inferencepool.pool_mismatch(_pool({"app": "chat"}, [9000]), named) == ""


def _offload(pool: dict[str, str]) -> OffloadSpec:
    return parse_offload(
        {
            "metadata": {"namespace": NAMESPACE, "name": NAME},
            "spec": {
                "home": {"deployment": NAME, "service": NAME},
                "placement": "home",
                "route": {"hosts": ["chat.test"]},
                "traffic": {"dataPlane": "inferencepool", "inferencePool": pool},
            },
        }
    )


@pytest.mark.parametrize(
    ("pool", "stored", "reason"),
    [
        ({"name": "chat-pool"}, None, "InferencePoolNotFound"),
        (
            {"name": "chat-pool", "namespace": "elsewhere"},
            _pool({"app": "chat"}, [8080]),
            "InferencePoolInOtherNamespace",
        ),
        ({"name": "chat-pool"}, _pool({"app": "chat"}, [8080], picker=None), "EndpointPickerRefMissing"),
        ({"name": "chat-pool"}, _pool({"app": "else"}, [8080]), "InferencePoolNotHomeService"),
    ],
)
async def test_an_offload_the_pool_cannot_carry_is_refused_with_the_reason(
    pool: dict[str, str], stored: dict[str, Any] | None, reason: str
) -> None:
    api = MemoryApi()
    api.objects[f"/api/v1/namespaces/{NAMESPACE}/services/{NAME}"] = SERVICE
    if stored is not None:
        api.objects[inference_pool_path(NAMESPACE, "chat-pool")] = stored
    plane = InferencePools(api, "http://127.0.0.1:9", RouterDirectory(None, urls=["http://127.0.0.1:9"]))  # type: ignore[arg-type]
    with pytest.raises(RouteProblem) as raised:
        await plane.check(_offload(pool))
    assert raised.value.reason == reason


async def test_a_pool_of_the_home_services_pods_with_a_picker_is_carried() -> None:
    api = MemoryApi()
    api.objects[f"/api/v1/namespaces/{NAMESPACE}/services/{NAME}"] = SERVICE
    api.objects[inference_pool_path(NAMESPACE, "chat-pool")] = _pool({"app": "chat"}, [8080])
    plane = InferencePools(api, "http://127.0.0.1:9", RouterDirectory(None, urls=["http://127.0.0.1:9"]))  # type: ignore[arg-type]
    await plane.check(_offload({"name": "chat-pool"}))
