"""The provider contract as tests: what every provider does, whatever its backend.

A provider's test module plugs in with a subclass named Test*, and a `harness` fixture yielding an
object that satisfies `ProviderHarness` (the provider under test, plus the few things only its backend
can do: make it fail, force a pod into an error, lose a pod). A harness that cannot simulate something
says so (`False`/`None`), and the test is skipped with that reason rather than passed vacuously.

    class TestMyContract(ProviderContract):
        @pytest.fixture
        async def harness(self, ...) -> AsyncIterator[ProviderHarness]: ...

Covered: idempotent create; create after a restart; deletion, including of a pod never created;
listing for resync and orphan collection (full references, only this node's pods, across restarts);
state mapping of running, failed and vanished pods; concurrent creates and deletes; the optional
capabilities the provider has (status push, logs with their options), each skipped as "not declared"
when it has not; and faults: a pod refused for good fails with the provider's message, a temporary
failure is a TemporaryProviderError and passes, and an outage of the backend makes the health check
fail (and calls fail with contract errors only) until it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

import pytest

from vk_provider.errors import (
    CapabilityMissingError,
    InvalidPodError,
    NotFoundError,
    ProviderError,
    ProviderUnavailableError,
    TemporaryProviderError,
)
from vk_provider.provider import (
    ContainerStateKind,
    ContainerStreams,
    LogOptions,
    PodLifecycle,
    PodRef,
    PodRequest,
    PodState,
    SupportsExec,
    SupportsLogs,
    SupportsStatusPush,
)

T = TypeVar("T")
POLL_SECONDS = 0.02


class ProviderHarness(Protocol):
    provider: PodLifecycle
    node_name: str
    outage_fails_calls: bool
    """Whether pod calls (not just the health check) fail during an outage."""

    def pod(self, name: str, *, uid: str | None = None) -> PodRequest:
        """A pod this provider can run, exposing one HTTP port, bound to `node_name`."""
        ...

    async def rejected_pod(self) -> tuple[PodRequest, str]:
        """A pod the provider will refuse for good, and words its refusal must contain."""
        ...

    async def temporarily_failing_pod(self) -> tuple[PodRequest, PodRequest]:
        """A pod whose creation fails for now, and the same pod once the cause is gone."""
        ...

    def other_node(self) -> PodLifecycle:
        """The same provider for another node, on the same backend (the harness closes it)."""
        ...

    def restarted(self) -> PodLifecycle | None:
        """A fresh instance for this node on the same backend (closed by the harness); None if the
        backend does not outlive the instance."""
        ...

    async def start_outage(self) -> None: ...

    async def end_outage(self) -> None:
        """Bring the backend back, and let time pass so the provider may notice."""
        ...

    async def force_error(self, ref: PodRef, message: str) -> bool:
        """Put the pod's workload in the backend's error state with `message`; False if impossible."""
        ...

    async def vanish(self, ref: PodRef) -> bool:
        """Make the backend lose the pod's workload without a trace; False if impossible."""
        ...


async def eventually(
    probe: Callable[[], Awaitable[T]],
    accept: Callable[[T], bool],
    *,
    timeout_seconds: float = 30.0,
    what: str = "",
) -> T:
    """Poll `probe` until `accept` holds; fail with the last value on timeout."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_seconds
    while True:
        value = await probe()
        if accept(value):
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout_seconds}s waiting for {what}; last: {value!r}")
        await asyncio.sleep(POLL_SECONDS)


async def wait_running(provider: PodLifecycle, ref: PodRef) -> PodState:
    state = await eventually(
        lambda: provider.get_pod_state(ref),
        lambda state: state is not None and state.phase == "Running",
        what=f"{ref} to run",
    )
    assert state is not None
    return state


async def wait_stopped(provider: PodLifecycle, ref: PodRef, *, what: str = "") -> None:
    """Until the provider holds nothing for the pod, or holds it stopped (a deleted pod's end)."""
    await eventually(
        lambda: provider.get_pod_state(ref),
        lambda state: state is None or state.terminated,
        what=what or f"{ref} to stop",
    )


async def health(provider: PodLifecycle) -> BaseException | None:
    try:
        await provider.check_health()
    except ProviderError as error:
        return error
    return None


def new_uid() -> str:
    return str(uuid.uuid4())


class ProviderContract:
    """The contract tests; subclass with a `harness` fixture (see the module docstring)."""

    async def test_created_pod_runs_and_reports_itself(self, harness: ProviderHarness) -> None:
        request = harness.pod("runs")
        await harness.provider.create_pod(request)
        state = await wait_running(harness.provider, request.ref)
        assert state.ref == request.ref
        assert [container.name for container in state.containers] == [c.name for c in request.containers]
        assert all(container.state is ContainerStateKind.RUNNING for container in state.containers)
        assert state.traffic_address, "a pod with a port publishes where its traffic goes"
        assert not state.terminated

    async def test_create_is_idempotent(self, harness: ProviderHarness) -> None:
        request = harness.pod("idempotent")
        await harness.provider.create_pod(request)
        await harness.provider.create_pod(request)
        await wait_running(harness.provider, request.ref)
        await harness.provider.create_pod(request)
        refs = [state.ref for state in await harness.provider.list_pods()]
        assert refs.count(request.ref) == 1

    async def test_create_after_a_restart_finds_the_pod(self, harness: ProviderHarness) -> None:
        request = harness.pod("restart")
        await harness.provider.create_pod(request)
        restarted = harness.restarted()
        if restarted is None:
            pytest.skip("the provider's workloads do not outlive the instance")
        await restarted.create_pod(request)
        await wait_running(restarted, request.ref)
        refs = [state.ref for state in await restarted.list_pods()]
        assert refs.count(request.ref) == 1

    async def test_deleting_a_pod_never_created_succeeds(self, harness: ProviderHarness) -> None:
        ref = PodRef("default", "never-created", new_uid())
        await harness.provider.delete_pod(ref, grace_period_seconds=30)
        await harness.provider.delete_pod(ref, grace_period_seconds=0)
        assert await harness.provider.get_pod_state(ref) is None

    async def test_deleted_pod_stops_and_leaves_the_list(self, harness: ProviderHarness) -> None:
        request = harness.pod("deleted")
        await harness.provider.create_pod(request)
        await wait_running(harness.provider, request.ref)
        await harness.provider.delete_pod(request.ref, grace_period_seconds=0)
        await wait_stopped(harness.provider, request.ref, what="the deleted pod to stop")
        await harness.provider.delete_pod(request.ref, grace_period_seconds=0)
        assert request.ref not in [state.ref for state in await harness.provider.list_pods()]

    async def test_state_of_an_unknown_pod_is_none(self, harness: ProviderHarness) -> None:
        assert await harness.provider.get_pod_state(PodRef("default", "unknown", new_uid())) is None

    async def test_list_gives_full_references_of_this_nodes_pods_only(self, harness: ProviderHarness) -> None:
        first, second = harness.pod("first"), harness.pod("second")
        foreign = harness.pod("foreign")
        for request in (first, second):
            await harness.provider.create_pod(request)
        await harness.other_node().create_pod(foreign)
        listed = {state.ref for state in await harness.provider.list_pods()}
        assert listed == {first.ref, second.ref}  # namespace, name and UID, for adoption and orphans

    async def test_list_after_a_restart_finds_every_pod(self, harness: ProviderHarness) -> None:
        requests = [harness.pod(f"survivor-{index}") for index in range(2)]
        for request in requests:
            await harness.provider.create_pod(request)
        restarted = harness.restarted()
        if restarted is None:
            pytest.skip("the provider's workloads do not outlive the instance")
        listed = {state.ref for state in await restarted.list_pods()}
        assert listed == {request.ref for request in requests}
        for request in requests:  # an orphan found by listing can be deleted by its reference
            await restarted.delete_pod(request.ref, grace_period_seconds=0)
        for request in requests:  # once stopped, and deleted again, it leaves the list
            await wait_stopped(restarted, request.ref, what=f"the orphan {request.ref} to stop")
            await restarted.delete_pod(request.ref, grace_period_seconds=0)
        assert await restarted.list_pods() == []

    async def test_workload_in_error_is_failed_with_the_providers_message(
        self, harness: ProviderHarness
    ) -> None:
        request = harness.pod("breaks")
        await harness.provider.create_pod(request)
        await wait_running(harness.provider, request.ref)
        if not await harness.force_error(request.ref, "CUDA error: an illegal memory access"):
            pytest.skip("the backend cannot be put into an error state")
        state = await eventually(
            lambda: harness.provider.get_pod_state(request.ref),
            lambda state: state is not None and state.phase == "Failed",
            what="the pod to fail",
        )
        assert state is not None
        assert state.message is not None
        assert "CUDA error: an illegal memory access" in state.message
        assert all(container.state is ContainerStateKind.TERMINATED for container in state.containers)

    async def test_vanished_workload_reads_as_gone_and_is_created_again(
        self, harness: ProviderHarness
    ) -> None:
        request = harness.pod("vanishes")
        await harness.provider.create_pod(request)
        await wait_running(harness.provider, request.ref)
        if not await harness.vanish(request.ref):
            pytest.skip("the backend cannot lose a workload")
        assert await harness.provider.get_pod_state(request.ref) is None
        await harness.provider.create_pod(request)
        await wait_running(harness.provider, request.ref)

    async def test_pod_refused_for_good_fails_with_the_providers_message(
        self, harness: ProviderHarness
    ) -> None:
        request, words = await harness.rejected_pod()
        with pytest.raises(InvalidPodError) as refused:
            await harness.provider.create_pod(request)
        assert words in str(refused.value)
        assert await harness.provider.get_pod_state(request.ref) is None

    async def test_temporary_failure_is_temporary(self, harness: ProviderHarness) -> None:
        failing, healed = await harness.temporarily_failing_pod()
        with pytest.raises(TemporaryProviderError):
            await harness.provider.create_pod(failing)
        await harness.provider.create_pod(healed)
        await wait_running(harness.provider, healed.ref)

    async def test_outage_makes_the_provider_unavailable_until_it_ends(
        self, harness: ProviderHarness
    ) -> None:
        request = harness.pod("outage")
        await harness.start_outage()
        error = await eventually(
            lambda: health(harness.provider), lambda error: error is not None, what="the health check to fail"
        )
        assert isinstance(error, ProviderUnavailableError)
        if harness.outage_fails_calls:
            with pytest.raises(TemporaryProviderError):
                await harness.provider.create_pod(request)
            with pytest.raises(TemporaryProviderError):
                await harness.provider.list_pods()
        await harness.end_outage()
        await eventually(lambda: health(harness.provider), lambda error: error is None, what="recovery")
        await harness.provider.create_pod(request)
        await wait_running(harness.provider, request.ref)

    async def test_concurrent_creates_and_deletes_leave_each_pod_once(self, harness: ProviderHarness) -> None:
        requests = [harness.pod(f"crowd-{index}") for index in range(4)]
        await asyncio.gather(*(harness.provider.create_pod(request) for request in requests * 2))
        for request in requests:
            await wait_running(harness.provider, request.ref)
        refs = [state.ref for state in await harness.provider.list_pods()]
        assert sorted(refs.count(request.ref) for request in requests) == [1, 1, 1, 1]
        await asyncio.gather(
            *(harness.provider.delete_pod(request.ref, grace_period_seconds=0) for request in requests * 2)
        )
        for request in requests:
            await wait_stopped(harness.provider, request.ref)

    async def test_status_push_reports_a_created_pod(self, harness: ProviderHarness) -> None:
        provider = harness.provider
        if not isinstance(provider, SupportsStatusPush):
            pytest.skip("not declared: the provider has no status push")
        created: set[PodRef] = set()
        seen = asyncio.Event()

        async def watch() -> None:
            async for state in provider.watch_states():
                if state.ref in created:
                    seen.set()

        watcher = asyncio.create_task(watch())
        try:
            # A push is for changes after the watch began, and nothing says when it has begun on the
            # provider's side: a pod a second, until one of them is pushed.
            for attempt in range(30):
                request = harness.pod(f"pushed-{attempt}")
                created.add(request.ref)
                await provider.create_pod(request)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(1):
                        await seen.wait()
                if seen.is_set():
                    break
            assert seen.is_set(), f"no state pushed for any of {len(created)} pods created"
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)

    async def test_logs_honour_limit_bytes_and_refuse_an_unknown_container(
        self, harness: ProviderHarness
    ) -> None:
        provider = harness.provider
        if not isinstance(provider, SupportsLogs):
            pytest.skip("not declared: the provider has no logs")
        request = harness.pod("logs")
        await provider.create_pod(request)
        await wait_running(provider, request.ref)
        container = request.containers[0].name
        limited = b"".join(
            [chunk async for chunk in provider.stream_logs(request.ref, container, LogOptions(limit_bytes=5))]
        )
        assert len(limited) <= 5
        with pytest.raises(NotFoundError):
            _ = [
                chunk async for chunk in provider.stream_logs(request.ref, "no-such-container", LogOptions())
            ]

    async def test_exec_gives_the_output_and_exit_code_and_refuses_an_unknown_container(
        self, harness: ProviderHarness
    ) -> None:
        provider = harness.provider
        if not isinstance(provider, SupportsExec):
            pytest.skip("not declared: the provider has no exec")
        request = harness.pod("exec")
        await provider.create_pod(request)
        await wait_running(provider, request.ref)
        output = bytearray()

        async def collect(data: bytes) -> None:
            output.extend(data)

        container = request.containers[0].name
        streams = ContainerStreams(stdout=collect)
        try:
            code = await provider.exec_in_container(request.ref, container, ["echo", "conformance"], streams)
        except CapabilityMissingError as error:  # a chain's member without it: declared, not offered here
            pytest.skip(f"refused for this pod: {error}")
        assert (code, bytes(output)) == (0, b"conformance\n"), f"exit code {code}, output {bytes(output)!r}"
        with pytest.raises(NotFoundError):
            await provider.exec_in_container(request.ref, "no-such-container", ["echo", "x"], streams)
