"""`kubectl top` on a development cluster: wait until metrics-server has figures for the demo's pods."""

from __future__ import annotations

import subprocess
import time

from tests.integration.waiting import wait_for
from vk_devtools.devcluster import cluster

Table = dict[str, tuple[str, str]]
"""Name -> (CPU, memory) as `kubectl top` prints them."""


def kubectl(state: cluster.ClusterState, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(state.bin_dir / "kubectl"), f"--kubeconfig={state.kubeconfig}", *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def top(state: cluster.ClusterState, *arguments: str) -> Table:
    """`kubectl top ...` as a table; empty while the Metrics API has nothing (or is not yet there)."""
    result = kubectl(state, "top", *arguments, "--no-headers")
    if result.returncode != 0:
        return {}
    table: Table = {}
    for line in result.stdout.splitlines():
        # `top nodes` adds CPU(%) and MEMORY(%) after each figure; `top pods` has the figures alone.
        name, *columns = line.split()
        figures = [column for column in columns if not column.endswith("%")]
        if len(figures) >= 2:
            table[name] = (figures[0], figures[1])
    return table


def has_figures(cpu: str, memory: str) -> bool:
    """Real figures ("3m", "41Mi"), not "<unknown>"; metrics-server leaves out what it could not read."""
    return cpu[:1].isdigit() and memory[:1].isdigit() and memory.endswith(("Ki", "Mi", "Gi"))


def running_pods(state: cluster.ClusterState, namespace: str) -> set[str]:
    result = kubectl(
        state,
        "get",
        "pods",
        f"--namespace={namespace}",
        "--field-selector=status.phase=Running",
        "--output=jsonpath={.items[*].metadata.name}",
    )
    return set(result.stdout.split()) if result.returncode == 0 else set()


async def wait_for_top_pods(
    state: cluster.ClusterState, *, namespace: str, timeout_seconds: float
) -> tuple[Table, float]:
    """Wait until `kubectl top pods` shows CPU and memory for every running pod of `namespace`;
    return the table and how long it took."""
    started = time.monotonic()

    async def every_pod_measured() -> Table | None:
        pods = running_pods(state, namespace)
        table = top(state, "pods", f"--namespace={namespace}")
        measured = {name for name, figures in table.items() if has_figures(*figures)}
        return table if pods and pods <= measured else None

    table = await wait_for(
        every_pod_measured, timeout_seconds=timeout_seconds, what=f"`kubectl top pods -n {namespace}`"
    )
    return table, time.monotonic() - started
