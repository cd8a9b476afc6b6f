"""Every contract value survives the trip to a plugin API message (on the wire) and back."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TypeVar

import pytest
from google.protobuf.message import Message

from vk_provider.plugin import convert
from vk_provider.plugin.convert import MessageError
from vk_provider.plugin.v1 import provider_pb2 as pb
from vk_provider.provider import (
    ContainerPort,
    ContainerSpec,
    ContainerState,
    ContainerStateKind,
    ContainerTermination,
    ContainerUsage,
    ExecAction,
    GpuOffer,
    HttpGetAction,
    LocationAvailability,
    LogOptions,
    Placement,
    PodRef,
    PodRequest,
    PodState,
    Probe,
    TcpSocketAction,
    VolumeFile,
)

M = TypeVar("M", bound=Message)
REF = PodRef("ml", "chat-0", "0b7e4c1e-6a55-4f0c-9a0a-2f6f1a0e9c11")
T0 = datetime(2026, 12, 5, 7, 0, 1, 250_000, tzinfo=UTC)
T1 = datetime(2026, 12, 5, 7, 3, 9, tzinfo=UTC)


def wire(
    message: pb.PodRequest | pb.PodState | pb.GpuOffer | pb.StreamLogsRequest | pb.ContainerUsage,
) -> object:
    """The message as the other side parses it from its bytes."""
    return type(message).FromString(message.SerializeToString())


def full_request() -> PodRequest:
    server = ContainerSpec(
        name="server",
        image="ghcr.io/example/vllm:0.9",
        command=("python", "-m", "vllm.entrypoints.openai.api_server"),
        args=("--model", "llama"),
        env=(("MODEL", "llama"), ("MODEL", "llama-3"), ("EMPTY", "")),
        working_dir="/srv",
        ports=(ContainerPort(8000, name="http"), ContainerPort(9000, protocol="UDP")),
        requests={"cpu": "4", "nvidia.com/gpu": "1"},
        limits={"nvidia.com/gpu": "1"},
        readiness_probe=Probe(
            HttpGetAction(8000, "/health", "HTTPS", host="10.0.0.1", headers=(("X-A", "1"), ("X-A", "2"))),
            initial_delay_seconds=5,
            period_seconds=2.5,
            timeout_seconds=1,
            success_threshold=2,
            failure_threshold=4,
        ),
        liveness_probe=Probe(TcpSocketAction(8000)),
        startup_probe=Probe(ExecAction(("cat", "/srv/ready"))),
    )
    return PodRequest(
        ref=REF,
        node_name="vk-runpod",
        containers=(server,),
        init_containers=(ContainerSpec(name="fetch", image="busybox"),),
        restart_policy="OnFailure",
        termination_grace_period_seconds=12.5,
        labels={"app": "chat"},
        annotations={"note": "ü"},
        volume_files={
            "config": (VolumeFile("conf/app.yaml", b"a: 1\n", 0o600), VolumeFile("empty", b"")),
            "optional-missing": (),
        },
    )


def test_a_pod_request_with_every_field_set_comes_back_equal() -> None:
    request = full_request()
    assert convert.pod_request_value(wire(convert.pod_request_message(request))) == request


def test_a_minimal_pod_request_keeps_its_defaults() -> None:
    request = PodRequest(ref=REF, node_name="n", containers=(ContainerSpec(name="c", image="i"),))
    back = convert.pod_request_value(wire(convert.pod_request_message(request)))
    assert back == request
    assert back.containers[0].readiness_probe is None
    assert back.containers[0].working_dir is None


def full_state() -> PodState:
    ended = ContainerTermination(137, "OOMKilled", "out of memory", T0, T1)
    return PodState(
        ref=REF,
        phase="Running",
        containers=(
            ContainerState(
                "server",
                "img",
                ContainerStateKind.RUNNING,
                ready=True,
                started=True,
                restart_count=3,
                started_at=T1,
                last_termination=ended,
                container_id="runpod://abc",
            ),
            ContainerState(
                "sidecar", "img2", ContainerStateKind.WAITING, reason="CrashLoopBackOff", message="x"
            ),
        ),
        init_containers=(
            ContainerState(
                "fetch", "busybox", ContainerStateKind.TERMINATED, termination=ContainerTermination(0)
            ),
        ),
        pod_ip="10.1.2.3",
        started_at=T0,
        reason="Provisioning",
        message="waiting for a GPU",
        traffic_address="https://abc-8000.proxy.runpod.net",
        traffic_auth='AwsSigV4(region="us-west-2")',
        terminated=False,
        placement=Placement("runpod", 2.49, "NVIDIA H100", 1, "SECURE", ("EU-RO-1", "US-TX-3")),
    )


def test_a_pod_state_with_every_field_set_comes_back_equal() -> None:
    state = full_state()
    assert convert.pod_state_value(wire(convert.pod_state_message(state))) == state


def test_a_bare_pod_state_reads_its_unset_fields_as_none() -> None:
    state = PodState(ref=REF, phase="Pending", placement=Placement("mock"))
    back = convert.pod_state_value(wire(convert.pod_state_message(state)))
    assert back == state
    assert (back.pod_ip, back.traffic_address, back.started_at) == (None, None, None)
    assert back.placement is not None
    assert back.placement.price_per_hour is None


def test_log_options_usage_and_offers_come_back_equal() -> None:
    options = LogOptions(
        follow=True, tail_lines=0, limit_bytes=1024, previous=True, since_time=T0, timestamps=True
    )
    request = wire(convert.logs_request_message(REF, "server", options))
    assert convert.log_options_value(request) == options
    assert convert.log_options_value(pb.StreamLogsRequest()) == LogOptions()

    usage = ContainerUsage("server", 12_000_000_000, 2**33, T1)
    assert convert.usage_value(wire(convert.usage_message(usage))) == usage

    offer = GpuOffer(
        "NVIDIA H100",
        2,
        4.98,
        display_name="H100 80GB",
        memory_gb=80,
        tier="COMMUNITY",
        availability="low",
        locations=(LocationAvailability("EU-RO-1", "high", "Romania"),),
        max_count=8,
    )
    assert convert.offer_value(wire(convert.offer_message(offer))) == offer
    bare = GpuOffer("A10", 1, 0.5)
    assert convert.offer_value(wire(convert.offer_message(bare))) == bare


@pytest.mark.parametrize(
    ("message", "words"),
    [
        (
            pb.PodState(ref=pb.PodRef(namespace="ml", name="a", uid="u"), phase="Sleeping"),
            "phase of pod ml/a",
        ),
        (pb.PodState(ref=pb.PodRef(namespace="ml", name="a"), phase="Running"), "no uid"),
        (
            pb.PodState(
                ref=pb.PodRef(namespace="ml", name="a", uid="u"),
                phase="Running",
                containers=[pb.ContainerState(name="server")],
            ),
            "container 'server' has no state kind",
        ),
    ],
)
def test_a_state_no_contract_value_matches_is_refused_by_name(message: pb.PodState, words: str) -> None:
    with pytest.raises(MessageError, match=words):
        convert.pod_state_value(message)


def test_a_request_with_an_unknown_restart_policy_or_a_probe_without_action_is_refused() -> None:
    message = convert.pod_request_message(full_request())
    message.restart_policy = "Sometimes"
    with pytest.raises(MessageError, match="restart_policy is 'Sometimes'"):
        convert.pod_request_value(message)
    message = convert.pod_request_message(full_request())
    message.containers[0].readiness_probe.ClearField("http_get")
    with pytest.raises(MessageError, match="a probe has no action"):
        convert.pod_request_value(message)
