"""`vk-provider dev ...`: what each subcommand prints and returns as its exit code.

Exit codes: 0 success; 1 a failure with its reason on stderr; 2 bad usage (from argparse);
3 from `status` when no control plane is running (as `systemctl status` does for a stopped unit).
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import TextIO

from vk_devtools.devcluster import cluster, runpodstandin, traffic
from vk_devtools.devcluster.building import BinaryCache, BuildError
from vk_devtools.devcluster.processes import ComponentFailedError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_NOT_RUNNING = 3


def build(*, background: bool, wait: bool, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    cache = BinaryCache.default()
    if background:
        problems = cache.problems()
        if not problems:
            print(f"the control plane is already built: {cache.bin_dir}", file=out)
            return EXIT_OK
        pid = cache.start_background_build()
        if pid is None:
            print(f"a build is already under way; its progress is in {cache.progress_log_path}", file=out)
        else:
            print(
                f"building in the background (pid {pid}); progress in {cache.progress_log_path}. "
                "`vk-provider dev build` waits for it.",
                file=out,
            )
        return EXIT_OK
    try:
        bin_dir = cache.ensure(wait=wait, out=err)
    except BuildError as error:
        print(f"error: {error}", file=err)
        return EXIT_FAILED
    print(f"control plane binaries: {bin_dir}", file=out)
    return EXIT_OK


def up(settings: cluster.ClusterSettings, *, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    cache = BinaryCache.default()
    try:
        bin_dir = cache.ensure(wait=True, out=err)
        result = cluster.up(
            settings, bin_dir=bin_dir, kubernetes_version=cache.pins.kubernetes_version, out=err
        )
    except (BuildError, ComponentFailedError, FileExistsError, RuntimeError) as error:
        print(f"error: {error}", file=err)
        return EXIT_FAILED
    state = result.state
    if result.already_running:
        print(
            f"a control plane is already running in {state.directory} ({state.server}); not starting another"
        )
    else:
        print(
            f"control plane Kubernetes {state.kubernetes_version} is up at {state.server} "
            f"(started in {result.seconds:.1f}s)",
            file=out,
        )
    print(f"kubeconfig: {state.kubeconfig}", file=out)
    print('use it with: eval "$(vk-provider dev env)"; kubectl get nodes', file=out)
    if "router" in state.ports:
        router = f"http://127.0.0.1:{state.ports['router']}"
        name = traffic.EXAMPLE_NAME
        print(
            f"""
the demo runs: {name} serves at home (node local-gpu); {_burst_node_role(state)}.
  send a request:   curl -H 'Host: {traffic.EXAMPLE_HOST}' {router}/v1/completions \\
                      -d '{{"prompt": "hi", "stream": true}}'
  flip it out:      kubectl offload flip {name} --to away --wait
  bring it back:    kubectl offload flip {name} --to home --wait
  watch it move:    kubectl offload status {name} --watch
  all of it, under load, with a failed-request count:  vk-provider dev demo""",
            file=out,
        )
    return EXIT_OK


def _burst_node_role(state: cluster.ClusterState) -> str:
    if state.burst_provider != runpodstandin.PROVIDER_CHOICE:
        return "node burst-gpu plays the external GPU provider"
    addresses = runpodstandin.read_addresses(state.directory)
    api = f" at {addresses.api_url}" if addresses is not None else ""
    return (
        "node burst-gpu is a runpod node on the offline RunPod stand-in"
        f"{api}: away pods are RunPod pods, their traffic goes through its proxy front"
    )


def down(directory: Path, *, out: TextIO = sys.stdout) -> int:
    stopped = cluster.down(directory)
    if stopped:
        print(f"stopped {', '.join(stopped)}; logs remain in {directory / 'logs'}", file=out)
    else:
        print(f"no control plane is running in {directory}", file=out)
    return EXIT_OK


def _running_state(directory: Path, err: TextIO) -> cluster.ClusterState | None:
    state = cluster.ClusterState.load(directory)
    if state is None or not state.is_fully_running():
        print(
            f"error: no control plane is running in {directory}; start one with `vk-provider dev up`",
            file=err,
        )
        return None
    return state


def status(directory: Path, *, out: TextIO = sys.stdout) -> int:
    state = cluster.ClusterState.load(directory)
    if state is None:
        print(f"no control plane in {directory}", file=out)
        return EXIT_NOT_RUNNING
    running = state.running()
    ready = cluster.apiserver_request(state, "/readyz") if running.get("kube-apiserver") else None
    overall = "running" if state.is_fully_running() and ready == "ok" else "not running"
    print(
        f"control plane in {directory}: {overall} (Kubernetes {state.kubernetes_version}, {state.server})",
        file=out,
    )
    for record in state.processes:
        word = "running" if running[record.name] else "stopped"
        print(f"  {record.name:<24} {word:<8} pid {record.pid:<8} log {record.log}", file=out)
    print(f"  readyz: {ready if ready is not None else 'unreachable'}", file=out)
    print(f"kubeconfig: {state.kubeconfig}", file=out)
    return EXIT_OK if overall == "running" else EXIT_NOT_RUNNING


def kubeconfig(directory: Path, *, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    state = _running_state(directory, err)
    if state is None:
        return EXIT_FAILED
    print(state.kubeconfig, file=out)
    return EXIT_OK


def env(directory: Path, *, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Shell lines that point kubectl (the one built with the plane) at the running cluster."""
    state = _running_state(directory, err)
    if state is None:
        return EXIT_FAILED
    print(f"export KUBECONFIG={shlex.quote(str(state.kubeconfig))}", file=out)
    print(f'export PATH={shlex.quote(str(state.bin_dir))}:"$PATH"', file=out)
    return EXIT_OK


def kubectl(directory: Path, arguments: list[str], *, err: TextIO = sys.stderr) -> int:
    """Replace this process with the plane's own kubectl, pointed at the running cluster."""
    state = _running_state(directory, err)
    if state is None:
        return EXIT_FAILED
    binary = str(state.bin_dir / "kubectl")
    os.execv(binary, [binary, f"--kubeconfig={state.kubeconfig}", *arguments])  # noqa: S606
