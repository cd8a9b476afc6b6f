"""`kubectl exec`, `attach` and `cp` on virtual nodes, with the real kubectl through the real apiserver
(which speaks SPDY to the node's kubelet API), and the kubelet API's own authentication of them."""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
import re
import select
import ssl
import subprocess
import termios
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from tests.integration.daemons import NodeDaemon
from tests.integration.migration_rig import pod_range
from tests.integration.nodes import TOLERATE_ALL
from tests.integration.runpod_fleet import gpu_pod, runpod_config
from tests.integration.waiting import wait_for
from tests.unit.spdy.peer import SpdyPeer
from vk_devtools.devcluster import cluster
from vk_devtools.standins.runpod.standin import FakeRunPod

pytestmark = pytest.mark.integration

StartNode = Callable[..., Awaitable[NodeDaemon]]
BIG_FILE_BYTES = 50 * 1024 * 1024


def box_pod(node: str) -> dict[str, Any]:
    """A local pod that writes 50 MiB of noise to big.bin and serves its working folder over HTTP (8000)."""
    # http.server's listen backlog is 5: a burst of 100 connections overflows it, and SYNs dropped on
    # loopback are retried only after seconds (kubectl port-forward gives up meanwhile). 256 it is.
    serve = (
        "import http.server as h, sys; h.ThreadingHTTPServer.request_queue_size = 256; "
        "h.test(HandlerClass=h.SimpleHTTPRequestHandler, ServerClass=h.ThreadingHTTPServer, bind=sys.argv[1])"
    )
    script = f"head -c {BIG_FILE_BYTES} /dev/urandom > big.bin && exec python3 -c '{serve}' \"$MY_IP\""
    return {
        "metadata": {"name": "box"},
        "spec": {
            "nodeName": node,
            "tolerations": TOLERATE_ALL,
            "terminationGracePeriodSeconds": 2,
            "containers": [
                {
                    "name": "main",
                    "image": "local",
                    "command": ["sh", "-c", script],
                    "env": [{"name": "MY_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                    "readinessProbe": {"httpGet": {"path": "/", "port": 8000}, "periodSeconds": 1},
                }
            ],
        },
    }


async def start_box(
    start_node: StartNode, kube_api: client.ApiClient, namespace: str, *, websocket: bool = True
) -> NodeDaemon:
    """A local node running the box; `websocket=False`: the node does not declare WebSocket streaming,
    so the apiserver speaks SPDY to it (translating kubectl's WebSocket)."""
    daemon = await start_node(
        "local", provider_config={"address_range": pod_range()}, kubelet_websocket=websocket
    )
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_pod(namespace, box_pod(daemon.node_name))

    async def ready() -> bool:
        pod = await core.read_namespaced_pod("box", namespace)
        return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or ())

    await wait_for(ready, timeout_seconds=60, what="the box pod Ready")
    return daemon


def kubectl_process(plane: cluster.ClusterState, *arguments: str, **options: Any) -> subprocess.Popen[bytes]:
    command = [str(plane.bin_dir / "kubectl"), f"--kubeconfig={plane.kubeconfig}", *arguments]
    return subprocess.Popen(command, **options)


def kubectl_bytes(
    plane: cluster.ClusterState, *arguments: str, stdin: bytes | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[bytes]:
    command = [str(plane.bin_dir / "kubectl"), f"--kubeconfig={plane.kubeconfig}", *arguments]
    return subprocess.run(command, input=stdin, capture_output=True, timeout=timeout, check=False)


def sha256_in_pod(plane: cluster.ClusterState, namespace: str, path: str) -> str:
    done = kubectl_bytes(plane, "exec", "-n", namespace, "box", "--", "sha256sum", path)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()[0].decode()


@pytest.mark.parametrize("websocket", [True, False], ids=["websocket", "spdy"])
async def test_exec_separates_outputs_returns_the_exit_code_and_pipes_stdin(
    start_node: StartNode,
    kube_api: client.ApiClient,
    namespace: str,
    control_plane: cluster.ClusterState,
    websocket: bool,
) -> None:
    await start_box(start_node, kube_api, namespace, websocket=websocket)
    done = kubectl_bytes(
        control_plane, "exec", "-n", namespace, "box", "--", "sh", "-c", "echo out; echo err >&2; exit 3"
    )
    assert (done.returncode, done.stdout) == (3, b"out\n")
    assert done.stderr == b"err\ncommand terminated with exit code 3\n"  # kubectl's own last line

    payload = os.urandom(10 * 1024 * 1024)
    piped = kubectl_bytes(
        control_plane, "exec", "-i", "-n", namespace, "box", "--", "sha256sum", stdin=payload
    )
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.split()[0].decode() == hashlib.sha256(payload).hexdigest()

    # The command runs in the container's environment and working folder.
    where = kubectl_bytes(
        control_plane, "exec", "-n", namespace, "box", "--", "sh", "-c", 'echo "$MY_IP"; ls'
    )
    assert where.returncode == 0
    pod = await client.CoreV1Api(kube_api).read_namespaced_pod("box", namespace)
    assert where.stdout.startswith(f"{pod.status.pod_ip}\n".encode())
    assert b"big.bin" in where.stdout


class Terminal:
    """kubectl on a pseudo-terminal of ours, as a person's shell would run it."""

    def __init__(self, plane: cluster.ClusterState, *arguments: str, rows: int, columns: int) -> None:
        self.controller, replica = os.openpty()
        self.resize(rows, columns)
        self.process = kubectl_process(
            plane,
            *arguments,
            stdin=replica,
            stdout=replica,
            stderr=replica,
            start_new_session=True,
            preexec_fn=_controlling_terminal,  # an ioctl only: no lock is taken
        )
        os.close(replica)
        self.output = b""

    def resize(self, rows: int, columns: int) -> None:
        # The kernel sends SIGWINCH to kubectl, which forwards the new size to the remote terminal.
        fcntl.ioctl(self.controller, termios.TIOCSWINSZ, bytes(bytearray([rows, 0, columns, 0, 0, 0, 0, 0])))

    def type(self, text: str) -> None:
        os.write(self.controller, text.encode())

    def expect(self, pattern: bytes, *, since: int = 0, timeout: float = 20) -> re.Match[bytes]:
        """The first match of `pattern` in the output from offset `since`, reading until it comes."""
        deadline = time.monotonic() + timeout
        while (match := re.compile(pattern).search(self.output, since)) is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"{pattern!r} never came; the terminal shows {self.output[-500:]!r}")
            readable, _, _ = select.select([self.controller], [], [], remaining)
            if readable:
                try:
                    self.output += os.read(self.controller, 65536)
                except OSError:
                    raise AssertionError(
                        f"the terminal closed before {pattern!r}: {self.output[-500:]!r}"
                    ) from None
        return match

    def wait(self, timeout: float = 20) -> int:
        try:
            return self.process.wait(timeout)
        finally:
            os.close(self.controller)


def _controlling_terminal() -> None:
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    opened: list[Terminal] = []
    yield opened
    for terminal in opened:
        if terminal.process.poll() is None:
            terminal.process.kill()
            terminal.process.wait()


async def test_exec_with_a_terminal_runs_an_interactive_shell_that_sees_resizes(
    start_node: StartNode,
    kube_api: client.ApiClient,
    namespace: str,
    control_plane: cluster.ClusterState,
    terminals: list[Terminal],
) -> None:
    await start_box(start_node, kube_api, namespace)
    terminal = Terminal(control_plane, "exec", "-it", "-n", namespace, "box", "--", "sh", rows=24, columns=80)
    terminals.append(terminal)
    terminal.type("tty; stty size\n")
    seen = terminal.expect(rb"/dev/pts/\d+\s+24 80\r?\n")
    terminal.resize(50, 132)
    # The resize travels kubectl -> apiserver -> node -> the pty, while the shell may already be asked:
    # ask again (a bounded number of times, each answer awaited) until the new size is the answer.
    for _attempt in range(20):
        terminal.type("stty size\n")
        seen = terminal.expect(rb"(\d+) (\d+)\r?\n", since=seen.end())
        if seen.groups() == (b"50", b"132"):
            break
        await asyncio.sleep(0.2)  # gives the resize time to arrive before asking again (noqa: sleep-ok)
    assert seen.groups() == (b"50", b"132"), terminal.output[-500:]
    terminal.type("exit 7\n")
    assert terminal.wait() == 7


async def test_kubectl_cp_copies_20_mib_in_and_out(
    start_node: StartNode,
    kube_api: client.ApiClient,
    namespace: str,
    control_plane: cluster.ClusterState,
    tmp_path: Path,
) -> None:
    await start_box(start_node, kube_api, namespace)
    original = tmp_path / "original.bin"
    original.write_bytes(os.urandom(20 * 1024 * 1024))
    inside = tmp_path / "inside"  # a local pod's files are this host's: the copy lands here
    inside.mkdir()
    copied_in = kubectl_bytes(control_plane, "cp", str(original), f"{namespace}/box:{inside}/copy.bin")
    assert copied_in.returncode == 0, copied_in.stderr
    digest = hashlib.sha256(original.read_bytes()).hexdigest()
    assert sha256_in_pod(control_plane, namespace, f"{inside}/copy.bin") == digest
    back = tmp_path / "back.bin"
    copied_out = kubectl_bytes(control_plane, "cp", f"{namespace}/box:{inside}/copy.bin", str(back))
    assert copied_out.returncode == 0, copied_out.stderr
    assert hashlib.sha256(back.read_bytes()).hexdigest() == digest


@pytest.fixture
async def runpod_fake() -> AsyncIterator[FakeRunPod]:
    async with FakeRunPod(provisioning_seconds=0.3, starting_seconds=0.3) as fake:
        yield fake


async def test_exec_on_a_runpod_node_shows_the_providers_refusal(  # noqa: PLR0917 (fixtures)
    runpod_fake: FakeRunPod,
    start_node: StartNode,
    kube_api: client.ApiClient,
    namespace: str,
    control_plane: cluster.ClusterState,
    tmp_path: Path,
) -> None:
    # No hangs are injected here: a call timeout above the fleet tests' 1 s keeps a busy machine (the
    # stand-in answers from this test's own event loop) from opening the provider's circuit breaker.
    config = runpod_config(runpod_fake, tmp_path / "runpod", call_timeout_seconds=5.0)
    daemon = await start_node("runpod", provider_config=config)
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_pod(namespace, gpu_pod("gpu", daemon.node_name))

    async def running() -> bool:
        return (await core.read_namespaced_pod("gpu", namespace)).status.phase == "Running"

    await wait_for(running, timeout_seconds=60, what="the RunPod pod Running")
    # In a thread: the RunPod stand-in answers the node from this test's event loop, which a blocking
    # kubectl would stall (the node's calls then time out and its circuit breaker opens).
    done = await asyncio.to_thread(
        kubectl_bytes, control_plane, "exec", "-n", namespace, "gpu", "--", "nvidia-smi"
    )
    assert done.returncode != 0
    # The node's provider answers (or, for a chain, the member that holds the pod): either way kubectl
    # shows that RunPod cannot exec, never a 404.
    assert re.search(rb"exec is not supported by (provider )?runpod", done.stderr), done.stderr


async def test_streaming_at_the_kubelet_port_needs_authentication_and_nodes_proxy(
    start_node: StartNode, kube_api: client.ApiClient, namespace: str, control_plane: cluster.ClusterState
) -> None:
    daemon = await start_node("mock")
    core = client.CoreV1Api(kube_api)
    pod = {
        "metadata": {"name": "m"},
        "spec": {
            "nodeName": daemon.node_name,
            "tolerations": TOLERATE_ALL,
            "containers": [{"name": "main", "image": "mock"}],
        },
    }
    await core.create_namespaced_pod(namespace, pod)

    async def running() -> bool:
        return (await core.read_namespaced_pod("m", namespace)).status.phase == "Running"

    await wait_for(running, timeout_seconds=60, what="the mock pod Running")
    port = daemon.kubelet_port
    path = f"/exec/{namespace}/m/main?command=echo&command=hi&output=1"
    trusting = ssl.create_default_context(cafile=str(control_plane.ca_cert))
    trusting.check_hostname = False  # the serving certificate names the node's addresses, not 127.0.0.1

    async def upgrade(
        context: ssl.SSLContext, headers: dict[str, str] | None = None
    ) -> tuple[int, bytes, SpdyPeer | None]:
        status, _, body, peer = await SpdyPeer.upgrade(
            "127.0.0.1", port, path, protocols=("v4.channel.k8s.io",), headers=headers, ssl_context=context
        )
        return status, body, peer

    status, _, _ = await upgrade(trusting)
    assert status == 401
    await core.create_namespaced_service_account(namespace, {"metadata": {"name": "stranger"}})
    token = (
        await core.create_namespaced_service_account_token("stranger", namespace, {"spec": {}})
    ).status.token
    status, body, _ = await upgrade(trusting, {"Authorization": f"Bearer {token}"})
    assert status == 403
    assert b"subresource=proxy" in body, body
    # The apiserver's kubelet client (nodes/proxy through system:masters here) gets the stream.
    admin = ssl.create_default_context(cafile=str(control_plane.ca_cert))
    admin.check_hostname = False
    admin.load_cert_chain(
        control_plane.directory / "pki" / "admin.crt", control_plane.directory / "pki" / "admin.key"
    )
    status, _, peer = await upgrade(admin)
    assert status == 101
    assert peer is not None
    error = peer.open({"streamType": "error"}, fin=True)
    stdout = peer.open({"streamType": "stdout"}, fin=True)
    await peer.wait(stdout)
    await peer.wait(error)
    assert bytes(stdout.data) == b"hi\n"
    assert json.loads(error.data)["status"] == "Success"
    await peer.close()


async def test_attach_writes_to_a_process_reading_stdin_and_shows_its_output(
    start_node: StartNode, kube_api: client.ApiClient, namespace: str, control_plane: cluster.ClusterState
) -> None:
    daemon = await start_node("local", provider_config={"address_range": pod_range()})
    core = client.CoreV1Api(kube_api)
    echo = 'echo ready; while read -r line; do echo "got $line"; done'
    pod = {
        "metadata": {"name": "reader"},
        "spec": {
            "nodeName": daemon.node_name,
            "tolerations": TOLERATE_ALL,
            "terminationGracePeriodSeconds": 2,
            "containers": [{"name": "main", "image": "local", "command": ["sh", "-c", echo], "stdin": True}],
        },
    }
    await core.create_namespaced_pod(namespace, pod)

    async def started() -> bool:
        return "ready" in await core.read_namespaced_pod_log("reader", namespace)

    await wait_for(started, timeout_seconds=60, what="the reader started")
    attach = kubectl_process(
        control_plane,
        "attach",
        "-i",
        "-n",
        namespace,
        "reader",
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert attach.stdin is not None
        assert attach.stdout is not None
        received = b""
        deadline = time.monotonic() + 30
        # kubectl opens the streams only after it has connected: until the answer comes, ask again.
        while b"got hello" not in received:
            assert attach.poll() is None, received
            assert time.monotonic() < deadline, received
            attach.stdin.write(b"hello\n")
            attach.stdin.flush()
            readable, _, _ = select.select([attach.stdout], [], [], 1.0)
            if readable:
                received += os.read(attach.stdout.fileno(), 65536)
    finally:
        attach.terminate()
        attach.wait(10)
        for pipe in (attach.stdin, attach.stdout):
            if pipe is not None:
                pipe.close()
    assert "got hello" in await core.read_namespaced_pod_log("reader", namespace)
