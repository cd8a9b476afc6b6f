"""`vk-provider dev ...`: what each subcommand prints and returns as its exit code.

Exit codes: 0 success; 1 a failure with its reason on stderr; 2 bad usage (from argparse, or a
component name `restart` does not know); 3 from `status` when no control plane is running (as
`systemctl status` does for a stopped unit).

Every piece of advice printed is a command to paste, with `--dir` when the folder is not the default
(see `hints`).
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import TextIO

from vk_devtools import image as building_image
from vk_devtools import release as releasing
from vk_devtools.devcluster import (
    cluster,
    endpointpicker,
    envoygateway,
    helm,
    hints,
    incluster,
    kueue,
    metricsserver,
    runpodstandin,
    traffic,
)
from vk_devtools.devcluster import restart as restarting
from vk_devtools.devcluster.building import (
    CONTROL_PLANE,
    CONTROL_PLANE_1_35,
    CONTROL_PLANES,
    BinaryCache,
    BuildError,
    GoBuild,
    control_plane_build,
)
from vk_devtools.devcluster.processes import ComponentFailedError
from vk_provider import __version__

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NOT_RUNNING = 3


BUILDS: list[GoBuild] = [
    CONTROL_PLANE,
    metricsserver.METRICS_SERVER,
    kueue.KUEUE,
    envoygateway.ENVOY_GATEWAY,
    endpointpicker.ENDPOINT_PICKER,
    helm.HELM,
    CONTROL_PLANE_1_35,
]
"""What `dev build` builds: everything `dev up` can start (Kueue: `dev up --with-kueue`), Envoy
Gateway, which the tests of the `gatewayapi` data plane run, the Gateway API Inference Extension's
endpoint picker, which serves an InferencePool's picks to such a gateway, Helm, which the chart's tests
run, and the 1.35 control plane, which the tests on the oldest supported minor run (last: nothing else
waits for it)."""


def builds_for(kubernetes_version: str | None) -> list[GoBuild]:
    """BUILDS, or with `--kubernetes-version` the same with only that minor's control plane."""
    if kubernetes_version is None:
        return list(BUILDS)
    chosen = control_plane_build(kubernetes_version)
    planes = set(CONTROL_PLANES.values())
    return [chosen, *(go_build for go_build in BUILDS if go_build not in planes)]


def image(output: Path, *, tag: str | None, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """`dev image`: the container image as an OCI layout (see `vk_devtools.image`)."""
    source = Path(__file__).resolve().parents[3]
    if not (source / "pyproject.toml").is_file():
        print(f"dev image builds from a checkout of vk-provider; {source} is not one", file=err)
        return EXIT_USAGE
    try:
        built = building_image.build_image(
            source,
            output.resolve(),
            tag=tag or __version__,
            version=__version__,
            revision=_git(source, "rev-parse", "HEAD") or "unknown",
            source_url=_git(source, "config", "--get", "remote.origin.url"),
            log=err,
        )
    except building_image.ImageBuildError as error:
        print(error, file=err)
        return EXIT_FAILED
    print(
        f"built {built.reference}: one layer of {built.layer_bytes / 2**20:.1f} MiB compressed, "
        f"{built.root_bytes / 2**20:.1f} MiB unpacked",
        file=out,
    )
    return EXIT_OK


def release(
    output: Path, *, image_repository: str, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    """`dev release`: everything vk-provider is installed from, in `output` (see `vk_devtools.release`)."""
    source = Path(__file__).resolve().parents[3]
    if not (source / "pyproject.toml").is_file():
        print(f"dev release builds from a checkout of vk-provider; {source} is not one", file=err)
        return EXIT_USAGE
    revision = _git(source, "rev-parse", "HEAD") or "unknown"
    return releasing.run(
        source, output.resolve(), image_repository=image_repository, revision=revision, out=out, err=err
    )


def _git(source: Path, *arguments: str) -> str | None:
    done = subprocess.run(
        ["git", "-C", str(source), *arguments], capture_output=True, text=True, timeout=30, check=False
    )
    return done.stdout.strip() or None if done.returncode == 0 else None


def build(
    *,
    background: bool,
    wait: bool,
    kubernetes_version: str | None = None,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    try:
        caches = [BinaryCache.for_build(go_build) for go_build in builds_for(kubernetes_version)]
    except BuildError as error:
        print(f"error: {error}", file=err)
        return EXIT_USAGE
    if background:
        missing = [cache for cache in caches if cache.problems()]
        if not missing:
            print(f"already built: {', '.join(str(cache.bin_dir) for cache in caches)}", file=out)
            return EXIT_OK
        # One background `dev build` builds every missing GoBuild in turn; it logs to the first one's folder.
        first = missing[0]
        pid = first.start_background_build(
            ["--kubernetes-version", kubernetes_version] if kubernetes_version else []
        )
        if pid is None:
            print(f"a build is already under way; its progress is in {first.progress_log_path}", file=out)
        else:
            print(
                f"building in the background (pid {pid}); progress in {first.progress_log_path}. "
                "`vk-provider dev build` waits for it.",
                file=out,
            )
        return EXIT_OK
    for cache in caches:
        try:
            bin_dir = cache.ensure(wait=wait, out=err)
        except BuildError as error:
            print(f"error: {error}", file=err)
            return EXIT_FAILED
        print(f"{cache.build.name}: {bin_dir}", file=out)
    return EXIT_OK


def up(
    settings: cluster.ClusterSettings,
    *,
    with_kueue: bool = False,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    directory = settings.directory
    existing = cluster.ClusterState.load(directory)
    if existing is not None and not existing.is_fully_running():
        # Refuse before building anything: the answer does not depend on the binaries.
        try:
            cluster.check_folder_may_be_reused(existing)
        except cluster.PlaneStillRunningError as refusal:
            print(refusal_advice(refusal), file=err)
            return EXIT_FAILED
    try:
        cache = BinaryCache.default(settings.kubernetes_version)
    except BuildError as error:
        print(f"error: {error}", file=err)
        return EXIT_USAGE
    try:
        bin_dir = cache.ensure(wait=True, out=err)
        # metrics-server reads the nodes' usage: with no node there is nothing for `kubectl top`.
        metrics_server_bin_dir = (
            BinaryCache.for_build(metricsserver.METRICS_SERVER).ensure(wait=True, out=err)
            if settings.local_node
            else None
        )
        result = cluster.up(
            settings,
            bin_dir=bin_dir,
            kubernetes_version=cache.pins.kubernetes_version,
            out=err,
            metrics_server_bin_dir=metrics_server_bin_dir,
        )
        if with_kueue:
            result = dataclasses.replace(result, state=kueue.add_to_plane(result.state, out=err))
    except cluster.PlaneStillRunningError as refusal:
        print(refusal_advice(refusal), file=err)
        return EXIT_FAILED
    except (BuildError, ComponentFailedError, FileExistsError, RuntimeError) as error:
        print(f"error: {error}", file=err)
        return EXIT_FAILED
    print_started(result, out=out)
    return EXIT_OK


def refusal_advice(refusal: cluster.PlaneStillRunningError) -> str:
    """Why `up` starts nothing in a folder, and the commands that would let it."""
    directory = refusal.directory
    return "\n".join(
        [
            f"error: {refusal}.",
            "  bring back what stopped:  "
            + "; ".join(hints.dev(directory, "restart", name) for name in refusal.stopped),
            f"  or stop it all:           {hints.dev(directory, 'down')}   (then `dev up` starts afresh)",
        ]
    )


def print_started(result: cluster.UpResult, *, out: TextIO) -> None:
    """What `up` started (or found running), and how to use it: the demo's commands only with the demo."""
    state = result.state
    directory = state.directory
    if result.already_running:
        print(
            f"a control plane is already running in {directory} ({state.server}); not starting another",
            file=out,
        )
    else:
        print(
            f"control plane Kubernetes {state.kubernetes_version} is up at {state.server} "
            f"(started in {result.seconds:.1f}s)",
            file=out,
        )
    print(f"components: {', '.join(state.component_names())}", file=out)
    print(f"kubeconfig: {state.kubeconfig}", file=out)
    print(f"use it with: {hints.env(directory)}; kubectl get nodes", file=out)
    print(f"stop it with: {hints.dev(directory, 'down')}", file=out)
    if not state.has_demo:
        return
    try:
        router = state.traffic_urls()[0]
    except RuntimeError as error:
        print(f"warning: {error}", file=out)
        return
    name = traffic.EXAMPLE_NAME
    print(
        f"""
the demo runs: {name} serves at home (node local-gpu); {_burst_node_role(state)}.
  send a request:   curl -H 'Host: {traffic.EXAMPLE_HOST}' {router}/v1/completions \\
                      -d '{{"prompt": "hi", "stream": true}}'
  flip it out:      kubectl offload flip {name} --to away --wait
  bring it back:    kubectl offload flip {name} --to home --wait
  watch it move:    kubectl offload status {name} --watch
  all of it, under load, with a failed-request count:  {hints.dev(directory, "demo")}""",
        file=out,
    )


def _burst_node_role(state: cluster.ClusterState) -> str:
    if state.in_cluster:
        return (
            f"node burst-gpu plays the external GPU provider, registered by the node daemon's Pod in "
            f"{incluster.NAMESPACE} (`kubectl get pods -n {incluster.NAMESPACE}`)"
        )
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
        print(
            f"stopped {', '.join(stopped)}; logs remain in {directory / 'logs'} until the next "
            f"`{hints.dev(directory, 'up')}` starts afresh",
            file=out,
        )
    else:
        print(f"no control plane is running in {directory}", file=out)
    return EXIT_OK


def _answering_state(directory: Path, err: TextIO) -> cluster.ClusterState | None:
    """The plane, if its apiserver answers (what `env`, `kubeconfig` and `kubectl` need); other
    components that are not running are named on `err` with the command that restarts them."""
    state = cluster.ClusterState.load(directory)
    apiserver = state.record("kube-apiserver") if state is not None else None
    if state is None or apiserver is None:
        print(
            f"error: no control plane in {directory}; start one with `{hints.dev(directory, 'up')}`", file=err
        )
        return None
    running = state.running()
    if state.stopped and not any(running.values()):
        print(
            f"error: no control plane is running in {directory} (`dev down` stopped it); "
            f"start one with `{hints.dev(directory, 'up')}`",
            file=err,
        )
        return None
    if not running[apiserver.name]:
        if not any(running.values()):
            afresh = f"{hints.dev(directory, 'down')} && {hints.dev(directory, 'up')}"
            advice = f"none of its components runs; to start afresh, deleting its data: `{afresh}`"
        else:
            advice = f"start it again with `{hints.dev(directory, 'restart', apiserver.name)}`"
        print(
            f"error: the apiserver of the control plane in {directory} is not running "
            f"(log: {apiserver.log}); {advice}",
            file=err,
        )
        return None
    if not cluster.apiserver_answers(state):
        print(
            f"error: the apiserver of the control plane in {directory} runs but does not answer at "
            f"{state.server} (log: {apiserver.log})",
            file=err,
        )
        return None
    _warn_about_stopped(state, running, err)
    return state


def _warn_about_stopped(state: cluster.ClusterState, running: dict[str, bool], err: TextIO) -> None:
    stopped = [name for name, is_running in running.items() if not is_running]
    if stopped:
        print(
            f"warning: not running in {state.directory}: {', '.join(stopped)}; restart with "
            + "; ".join(f"`{hints.dev(state.directory, 'restart', name)}`" for name in stopped),
            file=err,
        )


def status(directory: Path, *, out: TextIO = sys.stdout) -> int:
    state = cluster.ClusterState.load(directory)
    if state is None:
        print(f"no control plane in {directory}", file=out)
        return EXIT_NOT_RUNNING
    running = state.running()
    ready = cluster.apiserver_request(state, "/readyz") if running.get("kube-apiserver") else None
    overall = "running" if state.is_fully_running() and ready == "ok" else "not running"
    if overall != "running" and any(running.values()):
        overall = f"partly running ({sum(running.values())} of {len(running)} components)"
    print(
        f"control plane in {directory}: {overall} (Kubernetes {state.kubernetes_version}, {state.server})",
        file=out,
    )
    for record in state.processes:
        word = "running" if running[record.name] else "stopped"
        print(f"  {record.name:<24} {word:<8} pid {record.pid:<8} log {record.log}", file=out)
    print(f"  readyz: {ready if ready is not None else 'unreachable'}", file=out)
    if state.in_cluster:
        pods = hints.dev(directory, "kubectl", "--", "get", "pods", "-n", incluster.NAMESPACE)
        print(f"the node daemon, router and controller run as Pods: {pods}", file=out)
    print(f"kubeconfig: {state.kubeconfig}", file=out)
    stopped = [name for name, is_running in running.items() if not is_running]
    if stopped and not state.stopped:
        for name in stopped:
            print(f"restart {name}: {hints.dev(directory, 'restart', name)}", file=out)
    return EXIT_OK if overall == "running" else EXIT_NOT_RUNNING


def restart(
    directory: Path,
    name: str,
    *,
    timeout_seconds: float,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    """Start one component again with its recorded command line and log, stopping it first if it runs."""
    state = cluster.ClusterState.load(directory)
    if state is None:
        print(
            f"error: no control plane in {directory}; start one with `{hints.dev(directory, 'up')}`", file=err
        )
        return EXIT_FAILED
    try:
        full_name = restarting.resolve(state, name)
    except restarting.UnknownComponentError as error:
        print(f"error: {error}", file=err)
        return EXIT_USAGE
    try:
        restarted = restarting.restart(state, full_name, timeout_seconds=timeout_seconds)
    except restarting.NotRestartableError as error:
        afresh = f"{hints.dev(directory, 'down')} && {hints.dev(directory, 'up')}"
        print(f"error: {error}; start the plane afresh: {afresh}", file=err)
        return EXIT_FAILED
    except ComponentFailedError as error:
        print(f"error: {error}", file=err)
        others = [other for other, alive in state.running().items() if not alive and other != full_name]
        if others:
            print(f"also not running (it may need them): {', '.join(others)}", file=err)
        return EXIT_FAILED
    how = "restarted" if restarted.was_running else "started again"
    healthy = "healthy" if restarted.health_checked else "running (it has no health check)"
    print(
        f"{how} {full_name}: {healthy}, pid {restarted.record.pid} ({restarted.seconds:.1f}s); "
        f"log {restarted.record.log}",
        file=out,
    )
    return EXIT_OK


def kubeconfig(directory: Path, *, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    state = _answering_state(directory, err)
    if state is None:
        return EXIT_FAILED
    print(state.kubeconfig, file=out)
    return EXIT_OK


def env(directory: Path, *, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Shell lines that point kubectl (the one built with the plane) at the running cluster."""
    state = _answering_state(directory, err)
    if state is None:
        return EXIT_FAILED
    print(f"export KUBECONFIG={shlex.quote(str(state.kubeconfig))}", file=out)
    print(f'export PATH={shlex.quote(str(state.bin_dir))}:"$PATH"', file=out)
    return EXIT_OK


def kubectl(directory: Path, arguments: list[str], *, err: TextIO = sys.stderr) -> int:
    """Replace this process with the plane's own kubectl, pointed at the running cluster."""
    state = _answering_state(directory, err)
    if state is None:
        return EXIT_FAILED
    binary = str(state.bin_dir / "kubectl")
    os.execv(binary, [binary, f"--kubeconfig={state.kubeconfig}", *arguments])  # noqa: S606
