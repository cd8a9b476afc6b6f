"""Usage of local containers: CPU and memory summed over each container's process group."""

from __future__ import annotations

from pathlib import Path

import pytest

from vk_provider.errors import NotFoundError
from vk_provider.provider import PodRef

from .local_support import PYTHON, container, eventually, in_phase, local_provider, pod, shell, wait_for_pod


async def test_a_busy_container_reports_cpu_time_and_memory(tmp_path: Path) -> None:
    busy = container(PYTHON, "-c", "while True: pass", name="busy")
    idle = shell("exec sleep 600", name="idle")
    request = pod("q1", busy, idle)
    async with local_provider(tmp_path) as provider:
        await provider.create_pod(request)
        await wait_for_pod(provider, request.ref, in_phase("Running"))

        async def measured_cpu() -> dict[str, int] | None:
            usage = {item.name: item for item in await provider.usage(request.ref)}
            # Running means one container runs: on a loaded machine `idle` may start a moment later.
            if "idle" not in usage or usage.get("busy") is None:
                return None
            if usage["busy"].cpu_usage_core_nanoseconds < 50_000_000:
                return None
            return {name: item.memory_working_set_bytes for name, item in usage.items()}

        memory = await eventually(measured_cpu)
        assert set(memory) == {"busy", "idle"}
        assert memory["busy"] > 1_000_000  # a Python interpreter's resident set


async def test_usage_is_empty_for_a_finished_pod_and_not_found_for_an_unknown_one(tmp_path: Path) -> None:
    request = pod("q2", shell("exit 0"), restart_policy="Never")
    async with local_provider(tmp_path) as provider:
        with pytest.raises(NotFoundError):
            await provider.usage(PodRef("default", "ghost", "nobody"))
        await provider.create_pod(request)
        await wait_for_pod(provider, request.ref, in_phase("Succeeded"))
        assert await provider.usage(request.ref) == []
