"""The local provider runs pods as processes: addresses, phases, restarts, init containers, deletion."""

from __future__ import annotations

import asyncio
import ipaddress
from pathlib import Path

import aiohttp
import pytest

from vk_provider.errors import InvalidPodError, ProviderUnavailableError
from vk_provider.provider import (
    ContainerSpec,
    ContainerState,
    ContainerStateKind,
    PodLifecycle,
    PodRef,
    PodRequest,
    SupportsLogs,
    SupportsNodeCapacity,
    SupportsPodAddress,
    SupportsStatusPush,
    SupportsUsage,
)

from .local_support import (
    PYTHON,
    TEST_ADDRESS_RANGE,
    container,
    container_named,
    eventually,
    free_port,
    has_restarted,
    in_phase,
    is_ready,
    is_running,
    local_provider,
    logs_contain,
    pod,
    read_logs,
    shell,
    wait_for_pod,
    wait_until,
)

SLEEP_FOREVER = "exec sleep 600"


async def test_the_provider_offers_every_capability_of_the_contract(tmp_path: Path) -> None:
    async with local_provider(tmp_path) as provider:
        for capability in (
            PodLifecycle,
            SupportsStatusPush,
            SupportsPodAddress,
            SupportsLogs,
            SupportsUsage,
            SupportsNodeCapacity,
        ):
            assert isinstance(provider, capability)


async def test_a_pod_runs_with_its_own_loopback_address_in_pod_ip(tmp_path: Path) -> None:
    request = pod("a1", shell(f'echo "ip=$POD_IP host=$HOSTNAME"; {SLEEP_FOREVER}'))
    async with local_provider(tmp_path) as provider:
        await provider.create_pod(request)
        state = await wait_for_pod(provider, request.ref, in_phase("Running"))
        assert state.pod_ip is not None
        address = ipaddress.IPv4Address(state.pod_ip)
        assert address in ipaddress.IPv4Network(TEST_ADDRESS_RANGE)
        assert address != ipaddress.IPv4Address("127.0.0.1")
        main = container_named(state, "main")
        assert main.state is ContainerStateKind.RUNNING
        assert main.ready
        assert main.started_at is not None
        await logs_contain(provider, request.ref, f"ip={state.pod_ip} host=pod-a1\n".encode())


async def test_a_container_without_probes_is_ready_in_the_first_state_that_shows_it_running(
    tmp_path: Path,
) -> None:
    # As the kubelet reports it: no startup or readiness probe, so started and ready with the running.
    request = pod("a2", shell(SLEEP_FOREVER))
    async with local_provider(tmp_path) as provider:

        async def first_running() -> ContainerState:
            async for state in provider.watch_states():
                main = container_named(state, "main")
                if main.state is ContainerStateKind.RUNNING:
                    return main
            raise AssertionError("the provider stopped pushing states")

        watcher = asyncio.create_task(first_running())
        await provider.create_pod(request)
        main = await asyncio.wait_for(watcher, timeout=10)
        assert main.started
        assert main.ready


async def test_pods_get_different_addresses_and_keep_them_until_deleted(tmp_path: Path) -> None:
    first, second = pod("b1", shell(SLEEP_FOREVER)), pod("b2", shell(SLEEP_FOREVER))
    async with local_provider(tmp_path) as provider:
        reserved = await provider.pod_address(first.ref)
        assert await provider.pod_address(first.ref) == reserved
        await provider.create_pod(first)
        await provider.create_pod(second)
        states = [await wait_for_pod(provider, item.ref, in_phase("Running")) for item in (first, second)]
        assert states[0].pod_ip == reserved
        assert states[1].pod_ip not in (None, reserved)
        await provider.delete_pod(first.ref, grace_period_seconds=5)
        await wait_for_pod(provider, first.ref, lambda state: state.terminated)
        assert await provider.pod_address(first.ref) == reserved  # kept while the node may still ask
        await provider.delete_pod(first.ref, grace_period_seconds=5)
        assert await provider.get_pod_state(first.ref) is None
        assert not (tmp_path / "pods" / "b1").exists()


async def test_a_pod_that_sets_pod_ip_itself_keeps_its_own_value(tmp_path: Path) -> None:
    request = pod("c1", shell(f'echo "ip=$POD_IP"; {SLEEP_FOREVER}', env={"POD_IP": "10.9.8.7"}))
    async with local_provider(tmp_path) as provider:
        await provider.create_pod(request)
        await logs_contain(provider, request.ref, b"ip=10.9.8.7\n")


async def test_an_http_server_in_a_pod_answers_on_the_pod_address(tmp_path: Path) -> None:
    async with local_provider(tmp_path) as provider:
        ref = PodRef("default", "web", "d1")
        ip = await provider.pod_address(ref)
        port = free_port(ip)
        server = container(PYTHON, "-m", "http.server", "--bind", ip, str(port), ports=(port,))
        await provider.create_pod(pod("d1", server))
        state = await wait_for_pod(provider, ref, in_phase("Running"))
        assert state.traffic_address == f"http://{ip}:{port}"

        async def answered() -> bool | None:
            try:
                async with session.get(f"{state.traffic_address}/") as response:
                    return True if response.status == 200 else None
            except aiohttp.ClientConnectionError:
                return None  # not listening yet

        async with aiohttp.ClientSession() as session:
            assert await eventually(answered, timeout_seconds=10.0)


@pytest.mark.parametrize(
    ("restart_policy", "exit_code", "phase"),
    [("Never", 0, "Succeeded"), ("Never", 3, "Failed"), ("OnFailure", 0, "Succeeded")],
)
async def test_a_container_that_will_not_restart_ends_the_pod_with_its_exit_code(
    tmp_path: Path, restart_policy: str, exit_code: int, phase: str
) -> None:
    request = pod("e1", shell(f"echo bye; exit {exit_code}"), restart_policy=restart_policy)  # type: ignore[arg-type]
    async with local_provider(tmp_path) as provider:
        await provider.create_pod(request)
        state = await wait_for_pod(provider, request.ref, in_phase(phase))
        main = container_named(state, "main")
        assert main.state is ContainerStateKind.TERMINATED
        assert main.termination is not None
        assert main.termination.exit_code == exit_code
        assert main.termination.reason == ("Completed" if exit_code == 0 else "Error")
        assert main.termination.finished_at is not None
        assert main.restart_count == 0
        assert await read_logs(provider, request.ref) == b"bye\n"


@pytest.mark.parametrize(("restart_policy", "exit_code"), [("OnFailure", 1), ("Always", 0), ("Always", 2)])
async def test_a_container_is_restarted_as_its_restart_policy_says(
    tmp_path: Path, restart_policy: str, exit_code: int
) -> None:
    request = pod("f1", shell(f"exit {exit_code}"), restart_policy=restart_policy)  # type: ignore[arg-type]
    async with local_provider(tmp_path) as provider:
        await provider.create_pod(request)
        state = await wait_for_pod(provider, request.ref, has_restarted(3))
        main = container_named(state, "main")
        assert state.phase == "Running"
        assert main.last_termination is not None
        assert main.last_termination.exit_code == exit_code
        assert (tmp_path / "pods" / "f1" / "main" / "2.log").exists()


async def test_restarts_back_off_with_crash_loop_back_off(tmp_path: Path) -> None:
    request = pod("g1", shell("exit 1"))
    # A back-off long enough that a busy machine's poller still sees the first one before it ends.
    config = {"restart_backoff_initial_seconds": 2.0, "restart_backoff_max_seconds": 2.0}
    async with local_provider(tmp_path, **config) as provider:
        await provider.create_pod(request)
        state = await wait_for_pod(
            provider, request.ref, lambda state: container_named(state, "main").reason == "CrashLoopBackOff"
        )
        main = container_named(state, "main")
        assert main.state is ContainerStateKind.WAITING
        assert main.restart_count == 1  # the first restart is immediate, as the kubelet's
        assert "back-off 2s" in (main.message or "")
        assert main.last_termination is not None
        assert main.last_termination.exit_code == 1
        await wait_for_pod(provider, request.ref, has_restarted(2))


async def test_a_command_that_cannot_be_run_is_a_start_error(tmp_path: Path) -> None:
    request = pod("h1", container("/no/such/program"), restart_policy="Never")
    async with local_provider(tmp_path) as provider:
        await provider.create_pod(request)
        state = await wait_for_pod(provider, request.ref, in_phase("Failed"))
        termination = container_named(state, "main").termination
        assert termination is not None
        assert termination.exit_code == 128
        assert termination.reason == "StartError"
        assert "/no/such/program" in (termination.message or "")


async def test_a_start_error_follows_the_restart_policy(tmp_path: Path) -> None:
    request = pod("h2", container("no-such-program-anywhere"), restart_policy="OnFailure")
    async with local_provider(tmp_path) as provider:
        await provider.create_pod(request)
        state = await wait_for_pod(provider, request.ref, has_restarted(2))
        last = container_named(state, "main").last_termination
        assert last is not None
        assert last.reason == "StartError"


async def test_a_container_without_a_command_is_rejected(tmp_path: Path) -> None:
    request = pod("i1", ContainerSpec(name="main", image="nginx", args=("--port", "80")))
    async with local_provider(tmp_path) as provider:
        with pytest.raises(InvalidPodError, match="no command"):
            await provider.create_pod(request)
        assert await provider.get_pod_state(request.ref) is None


@pytest.mark.parametrize("image", ["tracer", f"tracer@sha256:{'a' * 64}"])
async def test_a_container_without_a_command_runs_its_images_configured_entrypoint(
    tmp_path: Path, image: str
) -> None:
    trace = tmp_path / "trace"
    script = f"echo entrypoint ran >> {trace}; {SLEEP_FOREVER}"
    request = pod("i2", ContainerSpec(name="main", image=image, args=(script,)))
    async with local_provider(tmp_path, image_entrypoints={"tracer": ["sh", "-c"]}) as provider:
        await provider.create_pod(request)
        await wait_for_pod(provider, request.ref, is_running())
        await wait_until(lambda: trace.exists() and "entrypoint ran" in trace.read_text(), what="the trace")


async def test_init_containers_run_in_order_before_the_containers(tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    request = pod(
        "j1",
        shell(f"echo main >> {trace}; {SLEEP_FOREVER}"),
        init=(
            shell(f"sleep 0.2; echo first >> {trace}", name="first"),
            shell(f"echo second >> {trace}", name="second"),
        ),
    )
    async with local_provider(tmp_path) as provider:
        await provider.create_pod(request)
        pending = await wait_for_pod(provider, request.ref, is_running("first"))
        assert pending.phase == "Pending"
        assert container_named(pending, "main").reason == "PodInitializing"
        state = await wait_for_pod(provider, request.ref, is_running("main"))
        assert state.phase == "Running"
        for name in ("first", "second"):
            init = container_named(state, name)
            assert init.state is ContainerStateKind.TERMINATED
            assert init.termination is not None
            assert init.termination.exit_code == 0
        await wait_until(lambda: trace.exists() and trace.read_text() == "first\nsecond\nmain\n")


async def test_a_failing_init_container_fails_the_pod_when_it_will_not_restart(tmp_path: Path) -> None:
    request = pod("k1", shell(SLEEP_FOREVER), init=(shell("exit 4", name="setup"),), restart_policy="Never")
    async with local_provider(tmp_path) as provider:
        await provider.create_pod(request)
        state = await wait_for_pod(provider, request.ref, in_phase("Failed"))
        assert container_named(state, "main").state is ContainerStateKind.WAITING
        termination = container_named(state, "setup").termination
        assert termination is not None
        assert termination.exit_code == 4


async def test_a_failing_init_container_is_retried_unless_the_policy_is_never(tmp_path: Path) -> None:
    marker = tmp_path / "second-try"
    script = f"if [ -f {marker} ]; then exit 0; fi; touch {marker}; exit 1"
    request = pod("k2", shell(SLEEP_FOREVER), init=(shell(script, name="setup"),), restart_policy="Always")
    async with local_provider(tmp_path) as provider:
        await provider.create_pod(request)
        state = await wait_for_pod(provider, request.ref, is_running("main"))
        assert container_named(state, "setup").restart_count == 1


async def test_creating_a_pod_twice_starts_it_once(tmp_path: Path) -> None:
    request = pod("l1", shell(f"echo started; {SLEEP_FOREVER}"))
    async with local_provider(tmp_path) as provider:
        await provider.create_pod(request)
        await provider.create_pod(request)
        await wait_for_pod(provider, request.ref, in_phase("Running"))
        await provider.create_pod(request)
        await logs_contain(provider, request.ref, b"started\n")
        assert len(list((tmp_path / "pods" / "l1" / "main").glob("*.status.json"))) == 1
        assert len(await provider.list_pods()) == 1
        assert await read_logs(provider, request.ref) == b"started\n"


async def test_delete_sends_sigterm_then_sigkill_when_the_grace_period_ends(tmp_path: Path) -> None:
    script = "trap 'echo got TERM' TERM; echo ready; while :; do sleep 0.05; done"
    request = pod("m1", shell(script))
    async with local_provider(tmp_path) as provider:
        await provider.create_pod(request)
        await logs_contain(provider, request.ref, b"ready\n")
        loop = asyncio.get_running_loop()
        deleted_at = loop.time()
        await provider.delete_pod(request.ref, grace_period_seconds=0.5)
        await logs_contain(provider, request.ref, b"got TERM\n")
        state = await wait_for_pod(provider, request.ref, lambda state: state.terminated)
        assert loop.time() - deleted_at >= 0.5
        main = container_named(state, "main")
        assert main.state is ContainerStateKind.TERMINATED
        assert main.termination is not None
        assert main.termination.exit_code == 128 + 9


async def test_delete_of_a_cooperative_pod_ends_it_at_once(tmp_path: Path) -> None:
    request = pod(
        "m2", shell(SLEEP_FOREVER), shell(SLEEP_FOREVER, name="sidecar"), init=(shell("true", name="setup"),)
    )
    async with local_provider(tmp_path) as provider:
        await provider.create_pod(request)
        await wait_for_pod(provider, request.ref, in_phase("Running"))
        await provider.delete_pod(request.ref, grace_period_seconds=30)
        state = await wait_for_pod(provider, request.ref, lambda state: state.terminated, timeout_seconds=5)
        assert all(
            item.state is ContainerStateKind.TERMINATED
            for item in (*state.containers, *state.init_containers)
        )
        assert {item.termination.exit_code for item in state.containers if item.termination} == {128 + 15}


async def test_a_pod_deleted_before_its_containers_started_is_terminated(tmp_path: Path) -> None:
    request = pod("m3", shell(SLEEP_FOREVER), init=(shell(SLEEP_FOREVER, name="setup"),))
    async with local_provider(tmp_path) as provider:
        await provider.create_pod(request)
        await wait_for_pod(provider, request.ref, is_running("setup"))
        await provider.delete_pod(request.ref, grace_period_seconds=5)
        state = await wait_for_pod(provider, request.ref, lambda state: state.terminated)
        main = container_named(state, "main")
        assert main.state is ContainerStateKind.TERMINATED
        assert main.termination is not None
        assert main.termination.reason == "PodDeleted"


async def test_deleting_an_unknown_pod_is_fine(tmp_path: Path) -> None:
    async with local_provider(tmp_path) as provider:
        await provider.delete_pod(PodRef("default", "ghost", "nobody"), grace_period_seconds=1)
        assert await provider.get_pod_state(PodRef("default", "ghost", "nobody")) is None


async def test_an_update_changes_labels_but_not_containers(tmp_path: Path) -> None:
    request = pod("n1", shell(SLEEP_FOREVER))
    async with local_provider(tmp_path) as provider:
        await provider.create_pod(request)
        changed = PodRequest(
            ref=request.ref,
            node_name=request.node_name,
            containers=(shell("exit 1"),),
            labels={"tier": "gpu"},
        )
        await provider.update_pod(changed)
        await wait_for_pod(provider, request.ref, in_phase("Running"))
        record = (tmp_path / "pods" / "n1" / "pod.json").read_text()
        assert '"tier": "gpu"' in record
        assert "exit 1" not in record


async def test_watch_states_pushes_each_change(tmp_path: Path) -> None:
    request = pod("o1", shell("exit 0"), restart_policy="Never")
    async with local_provider(tmp_path) as provider:
        seen: list[str] = []

        async def watch() -> None:
            async for state in provider.watch_states():
                seen.append(state.phase)
                if state.phase == "Succeeded":
                    return

        watcher = asyncio.create_task(watch())
        await provider.create_pod(request)
        await asyncio.wait_for(watcher, timeout=10)
        assert seen[0] == "Pending"
        assert seen[-1] == "Succeeded"


async def test_the_health_check_fails_while_the_marker_file_exists(tmp_path: Path) -> None:
    marker = tmp_path / "unhealthy"
    async with local_provider(tmp_path / "state", unhealthy_marker_file=str(marker)) as provider:
        await provider.check_health()
        marker.touch()
        with pytest.raises(ProviderUnavailableError):
            await provider.check_health()
        marker.unlink()
        await provider.check_health()


async def test_node_capacity_is_the_configured_capacity_as_strings(tmp_path: Path) -> None:
    async with local_provider(tmp_path, capacity={"nvidia.com/gpu": 8, "cpu": "16"}) as provider:
        assert await provider.node_capacity() == {"nvidia.com/gpu": "8", "cpu": "16"}
    async with local_provider(tmp_path) as provider:
        assert await provider.node_capacity() == {}


async def test_a_pod_reports_ready_only_when_every_probe_allows(tmp_path: Path) -> None:
    request = pod("p1", shell(SLEEP_FOREVER))
    async with local_provider(tmp_path) as provider:
        await provider.create_pod(request)
        state = await wait_for_pod(provider, request.ref, is_ready())
        assert container_named(state, "main").started
