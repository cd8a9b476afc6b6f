"""The kubernetes provider's pure translation: pods to remote objects, remote pods back to states."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.unit.environment_fakes import FakeReader, make_pod
from vk_provider.errors import InvalidPodError
from vk_provider.node.podrequest import build_pod_request
from vk_provider.provider import ContainerSpec, ContainerStateKind, LogOptions, PodRef, PodRequest
from vk_providers.kubernetes.config import KubernetesSettings
from vk_providers.kubernetes.states import (
    failed_containers_without_message,
    log_query,
    owner_ref,
    pod_state,
)
from vk_providers.kubernetes.translate import (
    NODE_LABEL,
    UID_LABEL,
    env_secret_name,
    node_label_value,
    object_name,
    remote_objects,
    secret_key,
)

NODE = "gpu-burst"
SETTINGS = KubernetesSettings(
    kubeconfig_file=Path("/etc/remote/kubeconfig"),
    namespace="remote-ns",
    node_selector={"pool": "gpu"},
    tolerations=({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},),
    image_pull_secrets=("registry",),
)
REF = PodRef("team", "web-0", "uid-1234")
SERVER = {
    "name": "server",
    "image": "example/llm:1",
    "command": ["serve", "--bind", "$(POD_IP)", "--model", "$(MODEL)"],
    "env": [
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "MODEL", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "model"}}},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "api", "key": "token"}}},
        {"name": "LITERAL", "value": "$$(NOT_EXPANDED)"},
    ],
    "envFrom": [{"prefix": "CFG_", "configMapRef": {"name": "settings"}}],
    "ports": [{"name": "metrics", "containerPort": 9090}, {"name": "http", "containerPort": 8080}],
    "resources": {"limits": {"nvidia.com/gpu": "1"}},
    "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http"}},
    "volumeMounts": [
        {"name": "scratch", "mountPath": "/scratch"},
        {"name": "kube-api-access-x1y2z", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"},
    ],
}
TOKEN_VOLUME = {
    "name": "kube-api-access-x1y2z",
    "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]},
}


def reader() -> FakeReader:
    return FakeReader(
        config_maps={("team", "settings"): {"model": "llama-70b"}},
        secrets={("team", "api"): {"token": b"s3cret"}},
    )


async def request_for(*containers: dict[str, Any], **spec: Any) -> PodRequest:
    spec.setdefault("volumes", [{"name": "scratch", "emptyDir": {}}, TOKEN_VOLUME])
    pod = make_pod(*containers, namespace="team", enableServiceLinks=False, nodeName=NODE, **spec)
    request, _ = await build_pod_request(
        pod, reader=reader(), pod_ip="", host_ip="10.0.0.1", node_allocatable={"cpu": "8"}
    )
    return request


async def test_the_environment_travels_in_a_secret_and_the_pod_reads_every_variable_from_it() -> None:
    objects = remote_objects(await request_for(SERVER), SETTINGS, NODE)
    secret_name = env_secret_name(SETTINGS, "uid-1234")
    assert objects.secret["metadata"]["name"] == secret_name == "vk-uid-1234-env"
    assert objects.secret["stringData"] == {
        "server.CFG_model": "llama-70b",
        "server.POD_NAME": "web-0",
        "server.MODEL": "llama-70b",
        "server.TOKEN": "s3cret",
        "server.LITERAL": "$(NOT_EXPANDED)",
    }
    env = objects.pod["spec"]["containers"][0]["env"]
    assert [variable["name"] for variable in env] == [
        "CFG_model",
        "POD_IP",
        "POD_NAME",
        "MODEL",
        "TOKEN",
        "LITERAL",
    ]
    by_name = {variable["name"]: variable["valueFrom"] for variable in env}
    assert by_name["POD_IP"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert by_name["TOKEN"] == {"secretKeyRef": {"name": secret_name, "key": "server.TOKEN"}}
    assert "s3cret" not in json.dumps(objects.pod)


async def test_command_and_args_are_sent_as_written_for_the_remote_kubelet_to_expand() -> None:
    objects = remote_objects(await request_for(SERVER), SETTINGS, NODE)
    assert objects.pod["spec"]["containers"][0]["command"] == SERVER["command"]


async def test_the_remote_pod_takes_the_providers_placement_and_no_credentials() -> None:
    objects = remote_objects(await request_for(SERVER, restartPolicy="OnFailure"), SETTINGS, NODE)
    spec = objects.pod["spec"]
    assert spec["nodeSelector"] == {"pool": "gpu"}
    assert spec["tolerations"] == [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert spec["imagePullSecrets"] == [{"name": "registry"}]
    assert spec["automountServiceAccountToken"] is False
    assert spec["enableServiceLinks"] is False  # the home links are in the environment already
    assert spec["restartPolicy"] == "OnFailure"
    container = spec["containers"][0]
    assert container["resources"] == {"limits": {"nvidia.com/gpu": "1"}}
    assert container["readinessProbe"] == SERVER["readinessProbe"]


async def test_emptydir_volumes_travel_as_they_are_and_the_home_token_volume_is_dropped() -> None:
    spec = remote_objects(await request_for(SERVER), SETTINGS, NODE).pod["spec"]
    assert spec["volumes"] == [{"name": "scratch", "emptyDir": {}}]
    assert spec["containers"][0]["volumeMounts"] == [{"name": "scratch", "mountPath": "/scratch"}]


@pytest.mark.parametrize(
    ("volume", "words"),
    [
        ({"name": "data", "persistentVolumeClaim": {"claimName": "data"}}, "data (persistentVolumeClaim)"),
        ({"name": "host", "hostPath": {"path": "/var"}}, "host (hostPath)"),
        ({"name": "info", "downwardAPI": {"items": []}}, "info (downwardAPI)"),
        (
            {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}},
            "token (projected with serviceAccountToken)",
        ),
    ],
)
async def test_other_volumes_are_refused_by_name(volume: dict[str, Any], words: str) -> None:
    request = await request_for(SERVER, volumes=[volume])
    with pytest.raises(InvalidPodError, match=r"only emptyDir, configMap, secret and projected") as refused:
        remote_objects(request, SETTINGS, NODE)
    assert words in str(refused.value)


async def test_host_network_is_refused() -> None:
    with pytest.raises(InvalidPodError, match="hostNetwork"):
        remote_objects(await request_for(SERVER, hostNetwork=True), SETTINGS, NODE)


async def test_every_object_is_named_after_the_uid_and_carries_the_pods_identity() -> None:
    objects = remote_objects(await request_for(SERVER), SETTINGS, NODE)
    assert objects.service is not None
    for remote in (objects.pod, objects.service, objects.secret):
        metadata = remote["metadata"]
        assert metadata["namespace"] == "remote-ns"
        assert metadata["labels"][UID_LABEL] == "uid-1234"
        assert metadata["labels"][NODE_LABEL] == NODE
        assert owner_ref(remote, NODE) == PodRef("team", "web-0", "uid-1234")
        assert owner_ref(remote, "another-node") is None
    assert (
        objects.pod["metadata"]["name"]
        == objects.service["metadata"]["name"]
        == object_name(SETTINGS, "uid-1234")
    )


async def test_the_service_exposes_every_container_port_to_the_pod_alone() -> None:
    service = remote_objects(await request_for(SERVER), SETTINGS, NODE).service
    assert service is not None
    assert service["spec"]["selector"] == {UID_LABEL: "uid-1234"}
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["ports"] == [
        {"name": "metrics", "port": 9090, "targetPort": 9090, "protocol": "TCP"},
        {"name": "http", "port": 8080, "targetPort": 8080, "protocol": "TCP"},
    ]


async def test_a_pod_without_ports_gets_no_service() -> None:
    quiet = {"name": "worker", "image": "example/batch:1", "command": ["work"]}
    assert remote_objects(await request_for(quiet), SETTINGS, NODE).service is None


def test_variables_with_names_no_secret_key_allows_are_keyed_by_position() -> None:
    assert secret_key("main", "MODEL", 3) == "main.MODEL"
    assert secret_key("main", "weird name!", 3) == "main.3"
    assert secret_key("main", "7", 3) == "main.3"  # a name of digits never takes another's key


def test_a_node_name_that_is_no_label_value_is_hashed_stably() -> None:
    long_name = "node." + "x" * 80
    assert node_label_value(NODE) == NODE
    assert node_label_value(long_name) == node_label_value(long_name)
    assert len(node_label_value(long_name)) <= 63


# -- states ----------------------------------------------------------------------------------------------


def remote_pod(status: dict[str, Any], *, deleting: bool = False, ports: bool = True) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "vk-uid-1234"}
    if deleting:
        metadata["deletionTimestamp"] = "2026-12-02T10:00:00Z"
    container: dict[str, Any] = {"name": "server", "image": "example/llm:1"}
    if ports:
        container["ports"] = [
            {"name": "metrics", "containerPort": 9090},
            {"name": "http", "containerPort": 8080},
        ]
    return {"metadata": metadata, "spec": {"containers": [container]}, "status": status}


RUNNING: dict[str, Any] = {
    "phase": "Running",
    "podIP": "198.19.40.7",
    "hostIP": "10.9.0.4",
    "startTime": "2026-12-02T09:00:00Z",
    "containerStatuses": [
        {
            "name": "server",
            "ready": True,
            "started": True,
            "restartCount": 2,
            "state": {"running": {"startedAt": "2026-12-02T09:05:00Z"}},
            "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}},
            "containerID": "containerd://abc",
        }
    ],
}


def test_a_running_remote_pod_is_running_with_its_restarts_and_traffic_address() -> None:
    state = pod_state(REF, remote_pod(RUNNING), settings=SETTINGS)
    assert state.phase == "Running"
    assert state.pod_ip == "198.19.40.7"
    assert state.traffic_address == "http://198.19.40.7:8080"  # the port named http
    assert state.started_at == datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
    (container,) = state.containers
    assert container.state is ContainerStateKind.RUNNING
    assert container.ready
    assert container.restart_count == 2
    assert container.last_termination is not None
    assert container.last_termination.reason == "OOMKilled"
    assert container.container_id == "containerd://abc"


def test_a_running_remote_container_not_ready_yet_is_running_and_says_what_it_waits_for() -> None:
    status = copy.deepcopy(RUNNING)
    status["containerStatuses"][0]["ready"] = False
    remote = remote_pod(status)
    remote["spec"]["containers"][0]["readinessProbe"] = {
        "httpGet": {"path": "/health", "port": 8080},
        "initialDelaySeconds": 20,
    }
    state = pod_state(REF, remote, settings=SETTINGS)
    assert state.phase == "Running"
    (container,) = state.containers
    assert (container.state, container.ready) == (ContainerStateKind.RUNNING, False)
    assert container.reason == "WaitingForReadiness"
    assert container.message == (
        "running in the remote cluster; its readiness probe has not passed yet, first tried 20s after the "
        "start"
    )

    ready = pod_state(REF, remote_pod(RUNNING), settings=SETTINGS).containers[0]
    assert (ready.ready, ready.reason, ready.message) == (True, None, None)


def test_an_unschedulable_remote_pod_is_pending_with_the_schedulers_message() -> None:
    status = {
        "phase": "Pending",
        "conditions": [
            {"type": "PodScheduled", "status": "False", "message": "0/3 nodes have enough nvidia.com/gpu"}
        ],
    }
    state = pod_state(REF, remote_pod(status), settings=SETTINGS)
    assert state.phase == "Pending"
    assert state.reason == "Unschedulable"
    assert state.message is not None
    assert "0/3 nodes have enough nvidia.com/gpu" in state.message
    assert state.containers[0].state is ContainerStateKind.WAITING
    assert state.containers[0].reason == "Unschedulable"
    assert state.traffic_address is None


def test_a_waiting_container_keeps_the_remote_reason() -> None:
    status = {
        "phase": "Pending",
        "containerStatuses": [
            {
                "name": "server",
                "state": {"waiting": {"reason": "ImagePullBackOff", "message": "no such image"}},
            }
        ],
    }
    (container,) = pod_state(REF, remote_pod(status), settings=SETTINGS).containers
    assert (container.reason, container.message) == ("ImagePullBackOff", "no such image")


FAILED = {
    "phase": "Failed",
    "containerStatuses": [
        {"name": "server", "state": {"terminated": {"exitCode": 1, "reason": "Error"}}, "restartCount": 0}
    ],
}


def test_a_failed_container_without_a_message_is_described_by_its_log() -> None:
    remote = remote_pod(FAILED)
    assert failed_containers_without_message(remote) == [("server", 0)]
    state = pod_state(REF, remote, settings=SETTINGS, log_messages={"server": "its log ends: CUDA error"})
    assert state.phase == "Failed"
    assert state.reason == "Error"
    assert state.message == "container 'server' exited with code 1: its log ends: CUDA error"
    assert state.containers[0].state is ContainerStateKind.TERMINATED
    assert state.containers[0].termination is not None
    assert state.containers[0].termination.exit_code == 1


def test_a_remote_pod_failure_reason_wins() -> None:
    status = {**FAILED, "reason": "Evicted", "message": "The node was low on resource: memory."}
    state = pod_state(REF, remote_pod(status), settings=SETTINGS)
    assert (state.reason, state.message) == ("Evicted", "The node was low on resource: memory.")


def test_a_deleted_pod_whose_containers_ended_is_terminated() -> None:
    assert pod_state(REF, remote_pod(FAILED, deleting=True), settings=SETTINGS).terminated
    assert not pod_state(REF, remote_pod(RUNNING, deleting=True), settings=SETTINGS).terminated


def test_node_port_traffic_goes_to_the_remote_node_and_its_port() -> None:
    settings = KubernetesSettings(kubeconfig_file=Path("k"), service_type="NodePort")
    service = {"spec": {"ports": [{"port": 8080, "targetPort": 8080, "nodePort": 31000}]}}
    state = pod_state(REF, remote_pod(RUNNING), settings=settings, service=service)
    assert state.traffic_address == "http://10.9.0.4:31000"
    assert state.pod_ip is None  # the remote pod network is not assumed reachable


def test_load_balancer_traffic_goes_to_its_address_once_assigned() -> None:
    settings = KubernetesSettings(kubeconfig_file=Path("k"), service_type="LoadBalancer")
    service: dict[str, Any] = {"spec": {"ports": [{"port": 8080, "targetPort": 8080}]}}
    assert pod_state(REF, remote_pod(RUNNING), settings=settings, service=service).traffic_address is None
    service["status"] = {"loadBalancer": {"ingress": [{"hostname": "lb.example.com"}]}}
    state = pod_state(REF, remote_pod(RUNNING), settings=settings, service=service)
    assert state.traffic_address == "http://lb.example.com:8080"


def test_a_pod_without_ports_has_no_traffic_address() -> None:
    assert pod_state(REF, remote_pod(RUNNING, ports=False), settings=SETTINGS).traffic_address is None


def test_log_options_become_the_remote_log_query() -> None:
    options = LogOptions(
        follow=True,
        tail_lines=10,
        limit_bytes=4096,
        previous=True,
        since_time=datetime(2026, 12, 2, 9, 0, 5, 500, tzinfo=UTC),
        timestamps=True,
    )
    assert log_query("server", options) == {
        "container": "server",
        "follow": True,
        "previous": True,
        "timestamps": True,
        "tailLines": 10,
        "limitBytes": 4096,
        "sinceTime": "2026-12-02T09:00:05Z",
    }
    assert log_query("server", LogOptions()) == {"container": "server"}


def test_a_request_without_a_pod_object_keeps_its_command_and_arguments() -> None:
    """As the conformance kit and plugin hosts send them: resolved values only, no raw pod."""
    container = ContainerSpec(name="server", image="example/llm:1", command=("sleep",), args=("600",))
    request = PodRequest(ref=REF, node_name=NODE, containers=(container,))
    (remote,) = remote_objects(request, SETTINGS, NODE).pod["spec"]["containers"]
    assert (remote["command"], remote["args"]) == (["sleep"], ["600"])
