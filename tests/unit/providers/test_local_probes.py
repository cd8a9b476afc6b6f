"""Probes of the local provider: readiness flips `ready`, liveness restarts, startup gates both."""

from __future__ import annotations

from pathlib import Path

from vk_provider.provider import ExecAction, HttpGetAction, PodRef, Probe, TcpSocketAction

from .local_support import (
    PYTHON,
    container,
    container_named,
    free_port,
    has_restarted,
    is_ready,
    is_running,
    local_provider,
    make_provider,
    pod,
    shell,
    wait_for_pod,
    wait_until,
)

SLEEP_FOREVER = "exec sleep 600"


def quick(
    action: HttpGetAction | TcpSocketAction | ExecAction,
    *,
    failure_threshold: int = 1,
    success_threshold: int = 1,
    initial_delay_seconds: float = 0.0,
) -> Probe:
    """A probe that runs every 50 ms, so that tests see thresholds reached in a fraction of a second."""
    return Probe(
        action=action,
        initial_delay_seconds=initial_delay_seconds,
        period_seconds=0.05,
        timeout_seconds=1.0,
        success_threshold=success_threshold,
        failure_threshold=failure_threshold,
    )


async def test_a_readiness_probe_turns_ready_on_and_off(tmp_path: Path) -> None:
    flag = tmp_path / "ready"
    readiness = quick(ExecAction(("test", "-f", str(flag))))
    request = pod("r1", shell(SLEEP_FOREVER, readiness=readiness))
    async with local_provider(tmp_path / "state") as provider:
        await provider.create_pod(request)
        state = await wait_for_pod(provider, request.ref, is_running())
        assert not container_named(state, "main").ready
        flag.touch()
        await wait_for_pod(provider, request.ref, is_ready())
        flag.unlink()
        state = await wait_for_pod(provider, request.ref, lambda state: not is_ready()(state))
        assert container_named(state, "main").restart_count == 0


async def test_an_adopted_ready_container_is_ready_from_its_first_state_and_can_turn_unready(
    tmp_path: Path,
) -> None:
    """A daemon restart or takeover must not take a ready container out of its endpoints for a probe."""
    flag = tmp_path / "ready"
    flag.touch()
    readiness = quick(ExecAction(("test", "-f", str(flag))), initial_delay_seconds=0.5)
    request = pod("r5", shell(SLEEP_FOREVER, readiness=readiness))
    async with local_provider(tmp_path / "state") as provider:
        await provider.create_pod(request)
        await wait_for_pod(provider, request.ref, is_ready())
        await provider.aclose()
        successor = make_provider(tmp_path / "state")
        try:
            # The first state the successor reports, before any probe of its own (0.5 s initial delay).
            (first,) = await successor.list_pods()
            assert container_named(first, "main").ready
            flag.unlink()
            await wait_for_pod(successor, request.ref, lambda state: not is_ready()(state))
        finally:
            await successor.aclose()


async def test_readiness_waits_for_success_threshold_successes_in_a_row(tmp_path: Path) -> None:
    counter = tmp_path / "count"
    # Succeeds from the third attempt on; with a threshold of 3 the container is ready after the fifth.
    script = f'n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter}; [ "$n" -ge 3 ]'
    readiness = quick(ExecAction(("sh", "-c", script)), success_threshold=3)
    request = pod("r2", shell(SLEEP_FOREVER, readiness=readiness))
    async with local_provider(tmp_path / "state") as provider:
        await provider.create_pod(request)
        await wait_for_pod(provider, request.ref, is_ready())
        assert int(counter.read_text()) >= 5


async def test_an_http_readiness_probe_and_a_tcp_liveness_probe_pass_against_a_server(tmp_path: Path) -> None:
    async with local_provider(tmp_path) as provider:
        ref = PodRef("default", "web", "r3")
        ip = await provider.pod_address(ref)
        port = free_port(ip)
        server = container(
            PYTHON,
            "-m",
            "http.server",
            "--bind",
            ip,
            str(port),
            readiness=quick(HttpGetAction(port=port, path="/")),
            liveness=quick(TcpSocketAction(port=port), failure_threshold=3, initial_delay_seconds=0.5),
        )
        await provider.create_pod(pod("r3", server))
        state = await wait_for_pod(provider, ref, is_ready())
        assert container_named(state, "main").restart_count == 0


async def test_a_failing_liveness_probe_restarts_the_container(tmp_path: Path) -> None:
    liveness = quick(ExecAction(("false",)), failure_threshold=2)
    request = pod("s1", shell(SLEEP_FOREVER, liveness=liveness), grace_period_seconds=2)
    async with local_provider(tmp_path) as provider:
        await provider.create_pod(request)
        state = await wait_for_pod(provider, request.ref, has_restarted(1))
        last = container_named(state, "main").last_termination
        assert last is not None
        assert last.exit_code == 128 + 15  # stopped politely with SIGTERM
        assert "liveness probe failed" in (last.message or "")


async def test_a_liveness_kill_escalates_to_sigkill_after_the_grace_period(tmp_path: Path) -> None:
    # The probe fails only once the shell has ignored SIGTERM: a probe failing at once could send the
    # TERM before the trap is set, and the shell would die of it (exit 143) without needing the SIGKILL.
    trapped = tmp_path / "trapped"
    liveness = quick(ExecAction(("test", "!", "-f", str(trapped))))
    script = f"trap '' TERM; touch {trapped}; while :; do sleep 0.05; done"
    request = pod("s2", shell(script, liveness=liveness), grace_period_seconds=0.3, restart_policy="Never")
    async with local_provider(tmp_path / "state") as provider:
        await provider.create_pod(request)
        state = await wait_for_pod(provider, request.ref, lambda state: state.phase == "Failed")
        termination = container_named(state, "main").termination
        assert termination is not None
        assert termination.exit_code == 128 + 9


async def test_a_startup_probe_holds_back_readiness_and_liveness_until_it_succeeds(tmp_path: Path) -> None:
    flag, attempts = tmp_path / "started", tmp_path / "attempts"
    startup = quick(ExecAction(("sh", "-c", f"echo . >> {attempts}; test -f {flag}")), failure_threshold=1000)
    liveness = quick(ExecAction(("false",)))
    request = pod("t1", shell(SLEEP_FOREVER, startup=startup, liveness=liveness))
    async with local_provider(tmp_path / "state") as provider:
        await provider.create_pod(request)
        # Four startup attempts span three liveness periods: an ungated liveness probe would have fired.
        await wait_until(lambda: attempts.exists() and len(attempts.read_text().split()) >= 4)
        state = await provider.get_pod_state(request.ref)
        assert state is not None
        main = container_named(state, "main")
        assert main.restart_count == 0
        assert not main.started
        assert not main.ready
        flag.touch()
        state = await wait_for_pod(provider, request.ref, has_restarted(1))
        assert container_named(state, "main").last_termination is not None


async def test_a_startup_probe_that_keeps_failing_kills_the_container(tmp_path: Path) -> None:
    startup = quick(ExecAction(("false",)), failure_threshold=2)
    request = pod("t2", shell(SLEEP_FOREVER, startup=startup), restart_policy="Never")
    async with local_provider(tmp_path) as provider:
        await provider.create_pod(request)
        state = await wait_for_pod(provider, request.ref, lambda state: state.phase == "Failed")
        termination = container_named(state, "main").termination
        assert termination is not None
        assert "startup probe failed" in (termination.message or "")
