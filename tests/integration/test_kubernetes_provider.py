"""The `kubernetes` provider against a second real control plane (`remote_plane`), whose `local` node
runs the remote pods as processes on this host.

- The provider contract, with the provider in this process: a namespace of its own per test, outages
  made by pointing the kubeconfig at a closed port (the provider follows the file), errors made by
  the remote container exiting with a message, lost pods by force-deleting the remote pod. Then what
  the contract does not cover: log options, image updates, the cleanup of Service, env and volume
  Secrets, and a volume Secret left by an earlier attempt.
- End to end: a `vk-provider node` with the provider on the main plane; a pod with variables from a
  ConfigMap and a Secret, and volumes of both, runs remotely (the volumes copied into Secrets of the
  remote namespace), its log reads through the main plane, its traffic address answers, and its
  deletion leaves nothing in the remote namespace.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import dataclasses
import json
import os
import re
import sys
import urllib.request
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from tests.integration.conftest import REMOTE_PLANE_GROUP, Kubectl
from tests.integration.daemons import NodeDaemon
from tests.integration.remote_plane import RemotePlane
from tests.integration.waiting import wait_for
from vk_provider.errors import NotFoundError
from vk_provider.offload.names import OFFLOAD_LABEL
from vk_provider.provider import (
    ContainerPort,
    ContainerSpec,
    LogOptions,
    PodLifecycle,
    PodRef,
    PodRequest,
    PodState,
    ProviderContext,
    VolumeFile,
)
from vk_provider.testing.contract import ProviderContract, eventually, wait_running
from vk_providers.kubernetes import KubernetesProvider, KubernetesSettings, parse_settings
from vk_providers.kubernetes.translate import TRAFFIC_PORT_NAME, object_name

pytestmark = REMOTE_PLANE_GROUP

StartNode = Callable[..., Awaitable[NodeDaemon]]
TRAFFIC_ADDRESS = "vk-provider.dev/TrafficAddress"
UNREACHABLE_SERVER = "https://127.0.0.1:9"
"""The discard port: nothing listens, so every connection is refused at once."""

SERVER_SCRIPT = """
import http.server, os, sys, threading, time
host, port, crash_file = sys.argv[1], int(sys.argv[2]), sys.argv[3]
server = http.server.ThreadingHTTPServer((host, port), http.server.SimpleHTTPRequestHandler)
threading.Thread(target=server.serve_forever, daemon=True).start()
print(f"serving on {host}:{port}", flush=True)
while not os.path.exists(crash_file):
    time.sleep(0.1)  # the workload polls for its crash file (noqa: sleep-ok)
print(open(crash_file).read(), file=sys.stderr, flush=True)
os._exit(1)
"""
"""An HTTP server that exits with code 1 and the crash file's text on stderr once that file exists."""


class ManualClock:
    """The breaker's clock: moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


async def no_wait(_seconds: float) -> None:
    """Retries go at once: the remote plane answers or refuses in milliseconds."""


class KubernetesHarness:
    outage_fails_calls = True

    def __init__(self, plane: RemotePlane, folder: Path) -> None:
        self.plane = plane
        self.node_name = "kubernetes-contract"
        self.namespace = f"vk-contract-{uuid.uuid4().hex[:8]}"
        self.folder = folder
        self.kubeconfig = folder / "remote-kubeconfig"
        self.original_kubeconfig = plane.kubeconfig.read_text()
        self._write_kubeconfig(self.original_kubeconfig)
        self.clock = ManualClock()
        self._extra: list[KubernetesProvider] = []
        self.provider = self._new(self.node_name)

    @property
    def settings(self) -> KubernetesSettings:
        return parse_settings(
            self.plane.provider_settings(
                kubeconfig_file=str(self.kubeconfig), namespace=self.namespace, backoff_initial_seconds=0
            )
        )

    def _new(self, node_name: str) -> KubernetesProvider:
        settings = self.settings
        context = ProviderContext(
            node_name=node_name, config={}, host_ip="127.0.0.1", state_dir=self.folder / node_name
        )
        return KubernetesProvider(context, settings=settings, sleep=no_wait, clock=self.clock)

    def _write_kubeconfig(self, text: str) -> None:
        # Replaced, not rewritten in place, as the kubelet updates a mounted Secret.
        staged = self.kubeconfig.with_suffix(".new")
        staged.write_text(text)
        os.replace(staged, self.kubeconfig)

    def crash_file(self, uid: str) -> Path:
        return self.folder / f"{uid}.crash"

    def raw_pod(self, name: str, uid: str, *, cpu: str | None = None, port: int = 8080) -> dict[str, Any]:
        container: dict[str, Any] = {
            "name": "server",
            "image": "python:3",  # informational: the remote local node runs the command
            "command": [
                sys.executable,
                "-c",
                SERVER_SCRIPT,
                "$(POD_IP)",
                str(port),
                str(self.crash_file(uid)),
            ],
            "env": [
                {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "GREETING", "value": "hello"},
            ],
            "ports": [{"name": TRAFFIC_PORT_NAME, "containerPort": port}],
        }
        if cpu is not None:
            container["resources"] = {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}
        return {
            "metadata": {"name": name, "namespace": "default", "uid": uid},
            "spec": {
                "nodeName": self.node_name,
                "restartPolicy": "Never",  # a crash is then a failed pod, as the contract asks
                "terminationGracePeriodSeconds": 2,
                "containers": [container],
            },
        }

    def pod(
        self, name: str, *, uid: str | None = None, cpu: str | None = None, port: int = 8080
    ) -> PodRequest:
        """The request the node would build for `raw_pod` (the home pod has no IP yet: POD_IP is empty)."""
        raw = self.raw_pod(name, uid or str(uuid.uuid4()), cpu=cpu, port=port)
        container = raw["spec"]["containers"][0]
        resources = {"cpu": cpu} if cpu else {}
        spec = ContainerSpec(
            name=container["name"],
            image=container["image"],
            # As the node expands it at home, where POD_IP is still empty.
            command=(*container["command"][:-3], "", str(port), container["command"][-1]),
            env=(("POD_IP", ""), ("GREETING", "hello")),
            ports=(ContainerPort(port, TRAFFIC_PORT_NAME),),
            requests=resources,
            limits=resources,
        )
        return PodRequest(
            ref=PodRef("default", name, raw["metadata"]["uid"]),
            node_name=self.node_name,
            containers=(spec,),
            restart_policy="Never",
            termination_grace_period_seconds=2,
            raw=raw,
        )

    async def running_pod(self, name: str) -> PodRequest:
        """The request of `pod(name)`, created through the provider and running on the remote cluster."""
        request = self.pod(name)
        await self.provider.create_pod(request)
        await wait_running(self.provider, request.ref)
        return request

    async def rejected_pod(self) -> tuple[PodRequest, str]:
        # The remote apiserver's own validation refuses the port.
        return self.pod("rejected", port=70000), "must be between 1 and 65535"

    async def temporarily_failing_pod(self) -> tuple[PodRequest, PodRequest]:
        # A quota the first pod exceeds (as if other pods used it up) and the same pod, smaller, fits.
        self.plane.kubectl("create", "namespace", self.namespace)
        self.plane.kubectl(
            "create", "quota", "cpu", "-n", self.namespace, "--hard=requests.cpu=1,limits.cpu=1"
        )
        uid = str(uuid.uuid4())
        return self.pod("flaky", uid=uid, cpu="2"), self.pod("flaky", uid=uid, cpu="100m")

    def _track(self, provider: KubernetesProvider) -> KubernetesProvider:
        self._extra.append(provider)
        return provider

    def other_node(self) -> PodLifecycle:
        return self._track(self._new("another-node"))

    def restarted(self) -> PodLifecycle | None:
        return self._track(self._new(self.node_name))

    async def start_outage(self) -> None:
        server = self.plane.state.server
        self._write_kubeconfig(self.original_kubeconfig.replace(server, UNREACHABLE_SERVER))

    async def end_outage(self) -> None:
        self._write_kubeconfig(self.original_kubeconfig)
        self.clock.advance(31)  # past the breaker's open period: the next call is its trial

    async def force_error(self, ref: PodRef, message: str) -> bool:
        self.crash_file(ref.uid).write_text(message)
        return True

    async def vanish(self, ref: PodRef) -> bool:
        name = object_name(self.settings, ref.uid)
        self.plane.kubectl("delete", "pod", name, "-n", self.namespace, "--grace-period=0", "--force")
        return True

    async def aclose(self) -> None:
        for provider in [self.provider, *self._extra]:
            assert isinstance(provider, KubernetesProvider)
            await provider.aclose()
        self.plane.kubectl("delete", "namespace", self.namespace, "--wait=false", "--ignore-not-found")


@pytest.fixture
async def harness(remote_plane: RemotePlane, tmp_path: Path) -> AsyncIterator[KubernetesHarness]:
    harness = KubernetesHarness(remote_plane, tmp_path)
    yield harness
    await harness.aclose()


class TestKubernetesContract(ProviderContract):
    """The contract's tests, with the module's `harness`."""


async def read_log(
    provider: KubernetesProvider, ref: PodRef, options: LogOptions, container: str = "server"
) -> bytes:
    return b"".join([chunk async for chunk in provider.stream_logs(ref, container, options)])


async def test_the_remote_log_comes_back_with_the_kubelets_options(harness: KubernetesHarness) -> None:
    provider = harness.provider
    request = await harness.running_pod("talks")
    whole = await eventually(
        lambda: read_log(provider, request.ref, LogOptions()),
        lambda log: b"serving on" in log,
        what="a log line",
    )
    assert whole.decode().startswith("serving on 198.19.")  # the remote pod bound its own address
    stamped = await read_log(provider, request.ref, LogOptions(tail_lines=1, timestamps=True))
    assert re.fullmatch(rb"\d{4}-\d\d-\d\dT\S+Z serving on \S+\n", stamped)
    followed = provider.stream_logs(request.ref, "server", LogOptions(follow=True))
    assert b"serving on" in await anext(followed)  # the stream stays open; closing it must not hang
    await followed.aclose()
    with pytest.raises(NotFoundError):
        await read_log(provider, request.ref, LogOptions(), container="sidecar")
    with pytest.raises(NotFoundError):
        await read_log(provider, request.ref, LogOptions(previous=True))
    with pytest.raises(NotFoundError):
        await read_log(provider, PodRef("default", "unknown", str(uuid.uuid4())), LogOptions())


async def test_an_updated_image_reaches_the_remote_pod(harness: KubernetesHarness) -> None:
    provider = harness.provider
    request = await harness.running_pod("updated")
    container = dataclasses.replace(request.containers[0], image="python:3.13")
    await provider.update_pod(dataclasses.replace(request, containers=(container,)))
    state = await provider.get_pod_state(request.ref)
    assert state is not None
    assert state.containers[0].image == "python:3.13"


def with_config_volume(request: PodRequest) -> PodRequest:
    """`request` with a ConfigMap volume, its file read as the node would."""
    raw = copy.deepcopy(dict(request.raw))
    raw["spec"]["volumes"] = [{"name": "config", "configMap": {"name": "settings"}}]
    files = {"config": (VolumeFile("app.conf", b"workers = 2\n", 0o644),)}
    return dataclasses.replace(request, raw=raw, volume_files=files)


async def test_deleting_a_pod_removes_its_service_environment_and_volumes(harness: KubernetesHarness) -> None:
    request = with_config_volume(harness.pod("tidy"))
    await harness.provider.create_pod(request)
    await harness.provider.create_pod(request)  # a repeated create finds everything there
    name = object_name(harness.settings, request.ref.uid)
    objects = [f"pod/{name}", f"service/{name}", f"secret/{name}-env", f"secret/{name}-vol-0"]
    listed = harness.plane.kubectl("get", *objects, "-n", harness.namespace, "-o", "name").stdout.split()
    assert len(listed) == len(objects)
    await harness.provider.delete_pod(request.ref, grace_period_seconds=1)
    remaining = harness.plane.kubectl("get", "services,secrets", "-n", harness.namespace, "-o", "name").stdout
    assert name not in remaining


async def test_a_volume_secret_left_by_an_earlier_attempt_is_brought_up_to_date(
    harness: KubernetesHarness,
) -> None:
    request = with_config_volume(harness.pod("retried"))
    secret = f"{object_name(harness.settings, request.ref.uid)}-vol-0"
    harness.plane.kubectl("create", "namespace", harness.namespace)
    harness.plane.kubectl(
        "create", "secret", "generic", secret, "-n", harness.namespace, "--from-literal=old=x"
    )
    await harness.provider.create_pod(request)
    listed = harness.plane.kubectl("get", "secret", secret, "-n", harness.namespace, "-o", "json").stdout
    assert json.loads(listed)["data"] == {"file-0": base64.b64encode(b"workers = 2\n").decode()}


READINESS_DELAY_SECONDS = 20
"""The remote readiness probe's initialDelaySeconds: a server that answers at once is ready no sooner."""


def with_readiness_delay(request: PodRequest, seconds: int) -> PodRequest:
    """`request` whose container has a readiness probe on its traffic port, first tried `seconds` after
    the start (what a model server that loads its weights first has, in effect)."""
    raw = copy.deepcopy(dict(request.raw))
    raw["spec"]["containers"][0]["readinessProbe"] = {
        "httpGet": {"path": "/", "port": TRAFFIC_PORT_NAME},
        "initialDelaySeconds": seconds,
        "periodSeconds": 1,
    }
    return dataclasses.replace(request, raw=raw)


async def test_a_remote_pod_slow_to_be_ready_runs_not_ready_until_the_remote_says_so(
    harness: KubernetesHarness,
) -> None:
    request = with_readiness_delay(harness.pod("slow-ready"), READINESS_DELAY_SECONDS)
    created_at = asyncio.get_running_loop().time()
    await harness.provider.create_pod(request)
    await wait_running(harness.provider, request.ref)
    seen: list[PodState] = []

    async def ready() -> bool:
        state = await harness.provider.get_pod_state(request.ref)
        assert state is not None
        seen.append(state)
        return state.containers[0].ready

    await wait_for(ready, timeout_seconds=READINESS_DELAY_SECONDS + 60, what="the remote pod to be ready")
    assert asyncio.get_running_loop().time() - created_at >= READINESS_DELAY_SECONDS
    waiting = [state for state in seen if not state.containers[0].ready]
    assert waiting  # seen running and not ready before
    assert {(state.phase, state.containers[0].reason) for state in waiting} == {
        ("Running", "WaitingForReadiness")
    }
    assert f"first tried {READINESS_DELAY_SECONDS}s after the start" in (
        waiting[0].containers[0].message or ""
    )
    assert seen[-1].phase == "Running"


# -- end to end: a node on the main plane, backed by the remote plane ----------------------------------


def fetch(url: str) -> tuple[int, dict[str, str]]:
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - a test server on this host
        return response.status, dict(response.headers)


def token_server_pod(node: str) -> dict[str, Any]:
    """The demo token server, announcing its variables first; named after a ConfigMap value."""
    script = (
        'echo "greeting=$GREETING token=$API_TOKEN"; '
        f'exec {sys.executable} -m vk_devtools.demo.tokens --host "$POD_IP" --port 8080 --name "$GREETING"'
    )
    return {
        # An Offload's away pod: the node publishes a traffic address only for those.
        "metadata": {"name": "tokens", "labels": {OFFLOAD_LABEL: "tokens"}},
        "spec": {
            "nodeName": node,
            "tolerations": [{"operator": "Exists"}],
            "terminationGracePeriodSeconds": 5,
            "containers": [
                {
                    "name": "server",
                    "image": "vk-provider/tokens",  # informational: the remote local node runs the command
                    "command": ["sh", "-c", script],
                    "env": [
                        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                        {
                            "name": "GREETING",
                            "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "greeting"}},
                        },
                        {"name": "API_TOKEN", "valueFrom": {"secretKeyRef": {"name": "api", "key": "token"}}},
                    ],
                    "ports": [{"name": "http", "containerPort": 8080}],
                    "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 1},
                    "volumeMounts": [
                        {"name": "config", "mountPath": "/etc/tokens", "readOnly": True},
                        {"name": "api", "mountPath": "/run/api"},
                    ],
                }
            ],
            "volumes": [
                {
                    "name": "config",
                    "configMap": {
                        "name": "files",
                        "items": [{"key": "tokens.conf", "path": "conf/tokens.conf", "mode": 0o440}],
                    },
                },
                {"name": "api", "secret": {"secretName": "api", "defaultMode": 0o400}},
            ],
        },
    }


def remote_leftovers(plane: RemotePlane, namespace: str) -> list[str]:
    """Every pod, service, secret and ConfigMap in the remote namespace but the cluster's own CA bundle."""
    listed = plane.kubectl("get", "pods,services,secrets,configmaps", "-n", namespace, "-o", "json")
    names = [f"{item['kind']}/{item['metadata']['name']}" for item in json.loads(listed.stdout)["items"]]
    return [name for name in names if name != "ConfigMap/kube-root-ca.crt"]


def assert_volumes_copied(plane: RemotePlane, namespace: str, uid: str, remote_pod: dict[str, Any]) -> None:
    """The ConfigMap and Secret volumes of `token_server_pod` are Secrets of the remote namespace, mounted
    where the home pod mounts them.

    Checked in the remote API, not by reading the files: the remote `local` node runs containers as
    plain processes, which see no mounts.
    """

    def secret_data(name: str) -> dict[str, bytes]:
        listed = plane.kubectl("get", "secret", name, "-n", namespace, "-o", "json").stdout
        return {key: base64.b64decode(value) for key, value in json.loads(listed)["data"].items()}

    assert secret_data(f"vk-{uid}-vol-0") == {"file-0": b"workers = 2\n"}
    assert secret_data(f"vk-{uid}-vol-1") == {"file-0": b"s3cret-token-value"}
    volumes = {volume["name"]: volume for volume in remote_pod["spec"]["volumes"]}
    assert set(volumes) == {"config", "api"}  # the home token volume stays home
    assert volumes["config"]["secret"]["secretName"] == f"vk-{uid}-vol-0"
    assert volumes["config"]["secret"]["items"] == [
        {"key": "file-0", "path": "conf/tokens.conf", "mode": 0o440}
    ]
    assert volumes["api"]["secret"]["items"] == [{"key": "file-0", "path": "token", "mode": 0o400}]
    mounts = remote_pod["spec"]["containers"][0]["volumeMounts"]
    assert [(mount["name"], mount["mountPath"], mount.get("readOnly")) for mount in mounts] == [
        ("config", "/etc/tokens", True),
        ("api", "/run/api", None),
    ]


async def test_a_pod_runs_in_the_remote_cluster_with_its_environment_logs_and_traffic_and_leaves_nothing(
    remote_plane: RemotePlane,
    start_node: StartNode,
    kube_api: client.ApiClient,
    namespace: str,
    kubectl: Kubectl,
) -> None:
    remote_namespace = f"vk-e2e-{uuid.uuid4().hex[:8]}"
    daemon = await start_node(
        "kubernetes", provider_config=remote_plane.provider_settings(namespace=remote_namespace)
    )
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "settings"}, "data": {"greeting": "hello-from-a-configmap"}}
    )
    token = base64.b64encode(b"s3cret-token-value").decode()
    await core.create_namespaced_secret(namespace, {"metadata": {"name": "api"}, "data": {"token": token}})
    await core.create_namespaced_pod(namespace, token_server_pod(daemon.node_name))

    # The ConfigMap of the `config` volume does not exist yet: as with a kubelet, the pod waits.
    async def failed_mount() -> str | None:
        events = await core.list_namespaced_event(namespace, field_selector="involvedObject.name=tokens")
        return next((event.message for event in events.items if event.reason == "FailedMount"), None)

    message = await wait_for(failed_mount, timeout_seconds=30, what="the FailedMount event")
    assert message == 'MountVolume.SetUp failed for volume "config" : configmap "files" not found'
    assert (await core.read_namespaced_pod("tokens", namespace)).status.phase == "Pending"
    assert not remote_leftovers(remote_plane, remote_namespace), "nothing is created before the mount"
    await core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "files"}, "data": {"tokens.conf": "workers = 2\n"}}
    )

    async def ready() -> client.V1Pod | None:
        pod = await core.read_namespaced_pod("tokens", namespace)
        conditions = {c.type: c.status for c in pod.status.conditions or []}
        return pod if pod.status.phase == "Running" and conditions.get("Ready") == "True" else None

    pod = await wait_for(ready, timeout_seconds=120, what="the pod to run remotely and be Ready")
    uid = pod.metadata.uid
    names = set(remote_leftovers(remote_plane, remote_namespace))
    assert {f"Pod/vk-{uid}", f"Service/vk-{uid}", f"Secret/vk-{uid}-env"} <= names
    remote_pod = remote_plane.kubectl("get", "pod", f"vk-{uid}", "-n", remote_namespace, "-o", "json").stdout
    assert "s3cret-token-value" not in remote_pod, "secret values travel in the env Secret, not the pod spec"
    assert_volumes_copied(remote_plane, remote_namespace, uid, json.loads(remote_pod))

    async def logged() -> str:
        return kubectl("logs", "tokens", "-n", namespace, check=False).stdout

    log = await wait_for(logged, timeout_seconds=60, what="the remote log through the main plane")
    assert "greeting=hello-from-a-configmap token=s3cret-token-value" in log

    address = next(c.message for c in pod.status.conditions if c.type == TRAFFIC_ADDRESS)
    remote_ip = json.loads(remote_pod)["status"]["podIP"]
    assert address == f"http://{remote_ip}:8080"
    assert pod.status.pod_ip == remote_ip
    status, headers = await asyncio.to_thread(fetch, f"{address}/healthz")
    assert status == 200
    assert headers.get("X-Served-By") == "hello-from-a-configmap"

    await core.delete_namespaced_pod("tokens", namespace)

    async def home_pod_gone() -> bool:
        pods = await core.list_namespaced_pod(namespace, field_selector="metadata.name=tokens")
        return not pods.items

    await wait_for(home_pod_gone, timeout_seconds=90, what="the home pod to be removed")

    async def remote_empty() -> bool:
        return not await asyncio.to_thread(remote_leftovers, remote_plane, remote_namespace)

    await wait_for(
        remote_empty, timeout_seconds=60, what=f"the remote namespace {remote_namespace} to be empty"
    )
    remote_plane.kubectl("delete", "namespace", remote_namespace, "--wait=false")


async def test_the_conformance_kit_passes_against_the_remote_cluster(
    remote_plane: RemotePlane, tmp_path: Path
) -> None:
    """`vk-provider conformance --provider kubernetes`, as a provider's author would run it."""
    namespace = f"vk-kit-{uuid.uuid4().hex[:8]}"
    config = tmp_path / "kubernetes.yaml"
    config.write_text(json.dumps(remote_plane.provider_settings(namespace=namespace)))
    command = [sys.executable, "-m", "vk_provider", "conformance", "--provider", "kubernetes"]
    try:
        process = await asyncio.create_subprocess_exec(
            *command,
            "--provider-config",
            str(config),
            "--pod-command",
            "sleep 600",
            cwd=tmp_path,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        async with asyncio.timeout(600):
            output, _ = await process.communicate()
    finally:
        remote_plane.kubectl("delete", "namespace", namespace, "--wait=false", "--ignore-not-found")
    report = output.decode()
    assert process.returncode == 0, report
    passed = {line.rsplit("::", 1)[-1] for line in report.splitlines() if line.startswith("PASSED")}
    assert {
        "test_created_pod_runs_and_reports_itself",
        "test_logs_honour_limit_bytes_and_refuse_an_unknown_container",
        "test_exec_gives_the_output_and_exit_code_and_refuses_an_unknown_container",
    } <= passed, report
