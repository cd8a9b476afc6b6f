"""Pods-to-Running benchmark: our `vk-provider node` daemon against virtual-kubelet's own mock.

Why: vk-provider replaces virtual-kubelet (Go) with a Python daemon. Before the Python daemon is
trusted with real nodes, it must at least keep up with the Go reference on the one path every pod
takes: a pod is bound to the virtual node, the daemon sees it, hands it to the provider, and writes
status.phase=Running back to the apiserver. Both sides run an in-memory mock provider that reports
Running at once, so what is measured is the daemon itself: its watch, queueing, API writes, rate
limits and memory, not a backend.

Each daemon runs in variants of its client-side rate limit (--variants): at virtual-kubelet's budget
(QPS 5, burst 10: client-go's defaults, which virtual-kubelet cannot change), as shipped, and
vk-provider unthrottled (the plane's ceiling on this machine). The budget each run had is derived from
the flags passed and the defaults the daemon's --help states, never assumed.

For each daemon and variant, on the same local control plane (`vk-provider dev up`) and in the same
run, and for each size N: start the daemon as a subprocess with its own node name, wait for its Node to
be Ready, create N pods in a fresh namespace with spec.nodeName already set to that node (creation is
the moment of binding), at most --concurrency creations in flight, while a list+watch of the namespace
records when each pod is first seen Running. Then the daemon is stopped, the pods force-deleted and
the namespace removed before the next run. Each (daemon, size) gets a fresh daemon process, so its
peak RSS is that run's.

Times are client-side (time.monotonic on this machine): a pod's latency runs from the moment the
apiserver acknowledged its creation (the 201 response; the pod is bound from then on) to the moment
the watch delivered it with phase Running. The request-start time is also kept (`latency_from_send`),
and the server-side view, with the apiserver's one-second resolution, is kept as a cross-check: the
pod's creationTimestamp and the time of the daemon's last status write (its managedFields entry).
Throughput is N over the span from the first creation request to the last pod seen Running.

Requests per pod come from the apiserver's own counters by verb and resource, less the bench's own
requests and the plane's background (apiserver_requests.py); pod watch events per pod from the
bench's watch. The report (pods_report.py) gives the issue's table and targets.

Usage (see bench/README.md):

    bench/build_virtual_kubelet.sh
    .venv/bin/python bench/pods_to_running.py --plane-dir /tmp/bench-plane
"""

from __future__ import annotations

import abc
import argparse
import asyncio
import contextlib
import dataclasses
import ipaddress
import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import apiserver_requests
import pods_report
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from benchkit import (
    BENCH_DIR,
    BenchError,
    add_results_dir_option,
    free_port,
    percentile,
    report_head,
    run_main,
    run_text,
    tail,
    write_report,
)
from vk_devtools.devcluster.building import cache_root
from vk_devtools.devcluster.pki import CertificateAuthority, KeyPair
from vk_provider.kit import procfs
from vk_provider.node import leadership

DEFAULT_PLANE_DIR = Path(tempfile.gettempdir()) / "bench-plane"
FIELD_MANAGER = "pods-to-running-bench"
POD_IMAGE = "registry.k8s.io/pause:3.10"
CAPACITY = {"cpu": "10000", "memory": "10000Gi", "pods": "10000"}
DAEMON_NAMES = ("virtual-kubelet", "vk-provider")

NODE_READY_TIMEOUT_SECONDS = 120.0
NAMESPACE_GONE_TIMEOUT_SECONDS = 600.0
STOP_GRACE_SECONDS = 20.0
RSS_SAMPLE_INTERVAL_SECONDS = 0.5
WATCH_TIMEOUT_SECONDS = 240
CREATE_ATTEMPTS = 5
# Quiet means no request on pods or Events for this long (see apiserver_requests.settle).
SETTLE_QUIET_SECONDS = 3.0

VARIANTS = ("same-budget", "as-shipped", "unthrottled")
# virtual-kubelet v1.13.0 builds its clientset without setting rest.Config's QPS or Burst, so client-go's
# defaults apply (rest.DefaultQPS 5, rest.DefaultBurst 10): the budget the same-budget runs give us.
REFERENCE_QPS, REFERENCE_BURST = "5", "10"
# Unthrottled, when `vk-provider node --help` names no value meaning "no limit": far above this plane.
FALLBACK_UNTHROTTLED_ARGS = ("--api-qps", "1000", "--api-burst", "2000")
# Environment variables that would change vk-provider's client budget behind the flags' back.
BUDGET_ENV_PREFIX = "VK_PROVIDER_API_"
VK_WORKQUEUE_NOTE = (
    "each of its workqueues also has client-go's default controller limiter (10 qps / burst 100 on "
    "top of per-item backoff); 10 pod sync workers (--pod-sync-workers)"
)


def pinned_vk_version() -> str:
    """The virtual-kubelet version bench/virtual-kubelet/go.mod pins (build_virtual_kubelet.sh builds it)."""
    gomod = (BENCH_DIR / "virtual-kubelet" / "go.mod").read_text()
    match = re.search(r"^\s*github\.com/virtual-kubelet/virtual-kubelet (v\S+)", gomod, re.MULTILINE)
    if match is None:
        raise SystemExit(f"{BENCH_DIR / 'virtual-kubelet' / 'go.mod'} does not pin virtual-kubelet")
    return match.group(1)


def default_vk_binary() -> Path:
    """Where build_virtual_kubelet.sh puts it: $VK_PROVIDER_CACHE_DIR or ~/.cache/vk-provider, then bench/."""
    return cache_root() / "bench" / f"virtual-kubelet-{pinned_vk_version()}" / "virtual-kubelet"


def default_vk_provider() -> Path:
    return Path(sys.executable).with_name("vk-provider")


class DaemonUnavailableError(BenchError):
    """The daemon cannot be started at all (binary missing, command not implemented)."""


class DaemonDiedError(BenchError):
    """The daemon exited during a run; the message ends with its log."""


async def raw(call: Awaitable[object]) -> aiohttp.ClientResponse:
    """kubernetes_asyncio hands back the bare aiohttp response of a call made with _preload_content=False."""
    response = await call
    if not isinstance(response, aiohttp.ClientResponse):
        raise TypeError(f"expected an aiohttp response, got {type(response).__name__}")
    return response


# --- the daemons under test -----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Launch:
    argv: list[str]
    env: dict[str, str]


@dataclasses.dataclass(frozen=True, slots=True)
class RunPaths:
    """One run's folder: the daemon's log, its config and certificates."""

    folder: Path
    kubeconfig: Path
    plane_dir: Path

    @property
    def log(self) -> Path:
        return self.folder / "daemon.log"


@dataclasses.dataclass(frozen=True, slots=True)
class ClientBudget:
    """The client-side rate limit a run's daemon had, and how the bench knows: never a fixed claim."""

    qps: str
    burst: str
    how: str

    def describe(self) -> str:
        return f"QPS {self.qps}, burst {self.burst}"


@dataclasses.dataclass(frozen=True, slots=True)
class Subject:
    """One daemon in one variant: what a run starts, with which extra flags, at which budget."""

    daemon: Daemon
    variant: str
    extra_args: tuple[str, ...]
    budget: ClientBudget
    serves: tuple[str, ...]
    """The variants this run stands for: virtual-kubelet as shipped is also at virtual-kubelet's budget."""

    @property
    def key(self) -> str:
        return f"{self.daemon.name}/{self.variant}"

    def label(self) -> str:
        flags = f" (`{' '.join(self.extra_args)}`)" if self.extra_args else ""
        return f"{self.daemon.name}, {self.variant}{flags}: {self.budget.describe()}"


def option_help(help_text: str, flag: str) -> str | None:
    """The help of one option in argparse's --help output, on one line; None when it is not listed."""
    lines = help_text.splitlines()
    for index, line in enumerate(lines):
        stripped = line.strip()
        if not re.match(re.escape(flag) + r"(?=[\s,=]|$)", stripped):
            continue
        parts = [stripped]
        for following in lines[index + 1 :]:
            if not following.strip() or following.strip().startswith("-"):
                break
            parts.append(following.strip())
        text = " ".join(parts)
        # Drop the flag and its metavar ("--api-qps API_QPS   requests ...").
        return re.sub(r"^" + re.escape(flag) + r"(?:[ =][A-Z_]+)?\s*", "", text)
    return None


def flag_value(args: Sequence[str], flag: str) -> str:
    """The value after `flag` in an argument list, "default" when it is not there."""
    items = list(args)
    return items[items.index(flag) + 1] if flag in items[:-1] else "default"


def help_default(option: str | None) -> str | None:
    """The "(default: X)" of an option's help, as written."""
    if option is None:
        return None
    match = re.search(r"\(default:?\s*([^);,]*)", option)
    return match.group(1).strip() if match else None


def no_limit_value(option: str | None) -> str | None:
    """The value an option's help says means no limit ("0 for no limit", "0 = unlimited"), if any."""
    if option is None:
        return None
    match = re.search(
        r"(?<![\w.-])(-?\d+(?:\.\d+)?)\s*(?:=|:|means|for|to|disables)?\s*"
        r"(?:no (?:client-side )?(?:limit|ceiling)|unlimited|unthrottled|disables?|off\b)",
        option,
        re.IGNORECASE,
    )
    return match.group(1) if match else None


class Daemon(abc.ABC):
    name: str

    @abc.abstractmethod
    def check(self) -> None:
        """Raise DaemonUnavailableError, saying what to do, if the daemon cannot be started."""

    @abc.abstractmethod
    def version(self) -> str: ...

    @abc.abstractmethod
    def launch(
        self, node_name: str, kubelet_port: int, paths: RunPaths, extra_args: Sequence[str]
    ) -> Launch: ...

    @abc.abstractmethod
    def subjects(self, variants: Sequence[str]) -> tuple[list[Subject], dict[str, str]]:
        """The runs for these variants, and each variant it cannot run with the reason (after check())."""

    @abc.abstractmethod
    def findings(self) -> str:
        """What its --help says about client-side limits, for the report."""


def issue_serving_cert(paths: RunPaths, node_name: str) -> tuple[Path, Path]:
    """A kubelet serving pair signed by the plane's CA: virtual-kubelet will not start without one."""
    pki = paths.plane_dir / "pki"
    ca_cert = x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((pki / "ca.key").read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise BenchError(f"{pki / 'ca.key'} is not the EC key vk_devtools.devcluster writes")
    authority = CertificateAuthority(ca_cert, ca_key, KeyPair(cert=pki / "ca.crt", key=pki / "ca.key"))
    pair = authority.issue_serving(
        paths.folder,
        "kubelet-serving",
        common_name=f"system:node:{node_name}",
        dns_names=(node_name, "localhost"),
        ip_addresses=(ipaddress.ip_address("127.0.0.1"),),
    )
    return pair.cert, pair.key


class VirtualKubelet(Daemon):
    """Upstream cmd/virtual-kubelet with its built-in `mock` provider, built by build_virtual_kubelet.sh."""

    name = "virtual-kubelet"

    def __init__(self, binary: Path) -> None:
        self.binary = binary
        self._help = ""

    def check(self) -> None:
        if not os.access(self.binary, os.X_OK):
            raise DaemonUnavailableError(
                f"virtual-kubelet is not built at {self.binary}; run bench/build_virtual_kubelet.sh "
                "(or pass --vk-binary)."
            )
        result = run_text([str(self.binary), "--help"])
        self._help = result.stdout + result.stderr

    def rate_flags(self) -> list[str]:
        """Lines of its --help about client-side rate limits (none in v1.13.0)."""
        pattern = re.compile(r"qps|burst|rate.?limit", re.IGNORECASE)
        return [line.strip() for line in self._help.splitlines() if pattern.search(line)]

    def findings(self) -> str:
        flags = self.rate_flags()
        listed = "; ".join(flags) if flags else "none: no flag sets its client's QPS or burst"
        return (
            f"`virtual-kubelet --help` options about QPS/burst/rate limits: {listed}. It builds its "
            "clientset without setting QPS/Burst, so client-go's defaults apply: QPS 5, burst 10, "
            f"one token bucket shared by every request of the process; {VK_WORKQUEUE_NOTE}"
        )

    def subjects(self, variants: Sequence[str]) -> tuple[list[Subject], dict[str, str]]:
        skipped: dict[str, str] = {}
        flags = self.rate_flags()
        how = "client-go defaults, no flag passed" + (
            f" (its --help lists {'; '.join(flags)})" if flags else " (its --help has no flag to change them)"
        )
        budget = ClientBudget(REFERENCE_QPS, REFERENCE_BURST, how)
        serves = tuple(variant for variant in ("as-shipped", "same-budget") if variant in variants)
        runs = [Subject(self, "as-shipped", (), budget, serves)] if serves else []
        if "unthrottled" in variants:
            skipped["unthrottled"] = (
                "virtual-kubelet cannot run unthrottled without patching its code: no flag or environment "
                "variable sets its client's QPS or burst"
            )
        return runs, skipped

    def version(self) -> str:
        # `virtual-kubelet version` prints "Version: v1.13.0, Built: <date>".
        text = run_text([str(self.binary), "version"]).stdout.strip()
        version = text.removeprefix("Version: ").split(",", 1)[0] or "unknown"
        go = shutil.which("go")
        built = run_text([go, "version", str(self.binary)]).stdout.strip() if go else ""
        return f"{version} (built with {built.rsplit(' ', 1)[-1]})" if built else version

    def launch(self, node_name: str, kubelet_port: int, paths: RunPaths, extra_args: Sequence[str]) -> Launch:
        cert, key = issue_serving_cert(paths, node_name)
        provider_config = paths.folder / "mock-provider.json"
        # The mock reads the capacity of the entry named after the node (else 20 cpu / 100Gi / 20 pods).
        provider_config.write_text(json.dumps({node_name: CAPACITY}, indent=2) + "\n")
        env = dict(os.environ)
        env.update(
            {
                # The kubelet API's serving pair; it has no flags for these. No APISERVER_CA_CERT_LOCATION:
                # without it the kubelet API does no client authentication, which the bench does not use.
                "APISERVER_CERT_LOCATION": str(cert),
                "APISERVER_KEY_LOCATION": str(key),
                # The kubelet API port: no flag either, only this variable (it listens on all interfaces).
                "KUBELET_PORT": str(kubelet_port),
                # The Node's InternalIP.
                "VKUBELET_POD_IP": "127.0.0.1",
                # NewNode also builds a default client from $KUBECONFIG before our options apply; without
                # this it logs a harmless in-cluster-config warning.
                "KUBECONFIG": str(paths.kubeconfig),
            }
        )
        argv = [
            str(self.binary),
            "--kubeconfig",
            str(paths.kubeconfig),
            "--nodename",
            node_name,
            "--provider",
            "mock",
            "--provider-config",
            str(provider_config),
            "--startup-timeout",
            "60s",
            *extra_args,
        ]
        return Launch(argv, env)


class VkProvider(Daemon):
    """Our daemon: `vk-provider node ... --provider mock`."""

    name = "vk-provider"

    def __init__(
        self,
        executable: Path,
        unthrottled_args: Sequence[str] | None = None,
        common_args: Sequence[str] = (),
    ) -> None:
        self.executable = executable
        self._common_args = tuple(common_args)
        self._help = ""
        self._unthrottled_args = tuple(unthrottled_args) if unthrottled_args is not None else None

    def check(self) -> None:
        if not os.access(self.executable, os.X_OK):
            raise DaemonUnavailableError(f"{self.executable} not found; install the project into the venv.")
        result = run_text([str(self.executable), "node", "--help"])
        if result.returncode != 0 or "--node-name" not in result.stdout:
            raise DaemonUnavailableError(
                f"`{self.executable} node` is not available yet (exit {result.returncode}): "
                f"{(result.stderr or result.stdout).strip()[-500:]}\n"
                "Run the virtual-kubelet side alone with --only virtual-kubelet."
            )
        self._help = result.stdout

    def version(self) -> str:
        # `vk-provider --version` prints "vk-provider 0.1.0".
        return run_text([str(self.executable), "--version"]).stdout.strip().removeprefix("vk-provider ")

    def findings(self) -> str:
        qps, burst = option_help(self._help, "--api-qps"), option_help(self._help, "--api-burst")
        if qps is None:
            return "`vk-provider node --help` lists no --api-qps: the bench does not know its client budget"
        return f"`vk-provider node --help`: --api-qps: {qps}; --api-burst: {burst or '(not listed)'}"

    def unthrottled(self) -> tuple[tuple[str, ...], str]:
        """The flags for an unthrottled run and why: --unthrottled-args, a "no limit" value from --help,
        or a budget far above what this plane serves."""
        if self._unthrottled_args is not None:
            return self._unthrottled_args, "flags passed (--unthrottled-args)"
        qps, burst = option_help(self._help, "--api-qps"), option_help(self._help, "--api-burst")
        off = no_limit_value(qps)
        if off is not None:
            args: tuple[str, ...] = ("--api-qps", off)
            burst_off = no_limit_value(burst)
            if burst_off is not None:
                args += ("--api-burst", burst_off)
            return args, "flags passed; --help says this value means no limit"
        return (
            FALLBACK_UNTHROTTLED_ARGS,
            "flags passed; --help names no value for no limit, so a budget far above the plane",
        )

    def subjects(self, variants: Sequence[str]) -> tuple[list[Subject], dict[str, str]]:
        runs: list[Subject] = []
        skipped: dict[str, str] = {}
        qps, burst = option_help(self._help, "--api-qps"), option_help(self._help, "--api-burst")
        for variant in VARIANTS:
            if variant not in variants:
                continue
            if variant == "as-shipped":
                budget = ClientBudget(
                    help_default(qps) or "?",
                    help_default(burst) or "?",
                    "no flag passed; the defaults `vk-provider node --help` states"
                    if qps is not None
                    else "no flag passed; `vk-provider node --help` lists no --api-qps",
                )
                runs.append(Subject(self, variant, self._common_args, budget, (variant,)))
                continue
            if qps is None or burst is None:
                skipped[variant] = (
                    "`vk-provider node --help` lists no --api-qps/--api-burst to set the budget with"
                )
                continue
            args: tuple[str, ...]
            if variant == "same-budget":
                args = ("--api-qps", REFERENCE_QPS, "--api-burst", REFERENCE_BURST)
                how = "flags passed: virtual-kubelet's client-go defaults"
            else:
                args, how = self.unthrottled()
            budget = ClientBudget(flag_value(args, "--api-qps"), flag_value(args, "--api-burst"), how)
            runs.append(Subject(self, variant, (*self._common_args, *args), budget, (variant,)))
        return runs, skipped

    def launch(self, node_name: str, kubelet_port: int, paths: RunPaths, extra_args: Sequence[str]) -> Launch:
        argv = [
            str(self.executable),
            "node",
            "--kubeconfig",
            str(paths.kubeconfig),
            "--node-name",
            node_name,
            "--provider",
            "mock",
            "--kubelet-port",
            str(kubelet_port),
        ]
        # Options the daemon may or may not have yet: pass them only when its --help lists them.
        if "--capacity" in self._help:
            for resource, quantity in CAPACITY.items():
                argv += ["--capacity", f"{resource}={quantity}"]
        if "--state-dir" in self._help:
            argv += ["--state-dir", str(paths.folder / "state")]
        if "--kubelet-bind-address" in self._help:
            # Loopback only, and a serving certificate from the plane's signer, as in the dev cluster.
            argv += ["--kubelet-bind-address", "127.0.0.1", "--kubelet-csr-self-approve"]
        argv += extra_args
        # The budget is what the flags say (or their defaults), not whatever this shell exports.
        env = {name: value for name, value in os.environ.items() if not name.startswith(BUDGET_ENV_PREFIX)}
        return Launch(argv, env)


# --- a running daemon and its memory --------------------------------------------------------------


def read_status_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (KiB) of a process; empty when it is gone."""
    found: dict[str, int] = {}
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return found
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0])
    return found


@dataclasses.dataclass(slots=True)
class MemoryPeak:
    hwm_kib: int = 0
    """VmHWM of the daemon's main process: the kernel's own peak, read until just before it is stopped."""
    max_rss_kib: int = 0
    """Largest VmRSS of the main process seen by sampling every 0.5 s."""
    max_tree_rss_kib: int = 0
    """Largest sum of VmRSS over the main process and its descendants (equal when it has none)."""
    samples: int = 0

    def sample(self, pid: int) -> None:
        main = read_status_kib(pid)
        if not main:
            return
        self.samples += 1
        self.hwm_kib = max(self.hwm_kib, main.get("VmHWM", 0))
        rss = main.get("VmRSS", 0)
        self.max_rss_kib = max(self.max_rss_kib, rss)
        tree = rss + sum(read_status_kib(child).get("VmRSS", 0) for child in procfs.descendants_of(pid))
        self.max_tree_rss_kib = max(self.max_tree_rss_kib, tree)

    @property
    def peak_kib(self) -> int:
        return max(self.hwm_kib, self.max_rss_kib, self.max_tree_rss_kib)


class RunningDaemon:
    def __init__(self, daemon: Daemon, process: asyncio.subprocess.Process, log: Path) -> None:
        self.daemon = daemon
        self.process = process
        self.log = log
        self.memory = MemoryPeak()
        self._sampler: asyncio.Task[None] | None = None

    @classmethod
    async def start(cls, daemon: Daemon, launch: Launch, log: Path, cwd: Path) -> RunningDaemon:
        with log.open("ab") as stream:
            stream.write(f"$ {' '.join(launch.argv)}\n".encode())
            stream.flush()
            process = await asyncio.create_subprocess_exec(
                *launch.argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=stream,
                stderr=asyncio.subprocess.STDOUT,
                env=launch.env,
                cwd=cwd,
                start_new_session=True,
            )
        running = cls(daemon, process, log)
        running._sampler = asyncio.create_task(running._sample_forever())
        return running

    async def _sample_forever(self) -> None:
        while self.process.returncode is None:
            self.memory.sample(self.process.pid)
            await asyncio.sleep(RSS_SAMPLE_INTERVAL_SECONDS)

    def died(self) -> DaemonDiedError | None:
        code = self.process.returncode
        if code is None:
            return None
        return DaemonDiedError(
            f"{self.daemon.name} exited with status {code}. "
            f"The end of its log ({self.log}):\n{tail(self.log, 30)}"
        )

    def check_alive(self) -> None:
        error = self.died()
        if error is not None:
            raise error

    async def stop(self) -> None:
        """Take a last memory sample, then SIGTERM the daemon's process group; SIGKILL if it lingers."""
        if self.process.returncode is None:
            self.memory.sample(self.process.pid)
        if self._sampler is not None:
            self._sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sampler
        if self.process.returncode is not None:
            return
        procfs.signal_group(self.process.pid, signal.SIGTERM)
        try:
            async with asyncio.timeout(STOP_GRACE_SECONDS):
                await self.process.wait()
        except TimeoutError:
            print(
                f"  {self.daemon.name} ignored SIGTERM for {STOP_GRACE_SECONDS:.0f}s; killing it", flush=True
            )
            procfs.signal_group(self.process.pid, signal.SIGKILL)
            await self.process.wait()


# --- one run: N pods to Running -------------------------------------------------------------------


def parse_kube_time(text: str | None) -> float | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@dataclasses.dataclass(slots=True)
class PodTimes:
    sent: float = math.nan
    acked: float = math.nan
    running: float = math.nan
    server_created: float | None = None
    server_status_written: float | None = None


class RunState:
    """Per-pod times, filled in by the creators and the watcher."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.pods = [PodTimes() for _ in range(n)]
        self.running_count = 0
        self.all_running = asyncio.Event()
        self.events_seen = 0
        # The bench's own requests, subtracted from the apiserver's counts (see apiserver_requests.py).
        self.creates_sent = 0
        self.lists_sent = 0
        self.watches_sent = 0

    @staticmethod
    def pod_name(index: int) -> str:
        return f"pod-{index:05d}"

    def observe(self, pod: dict[str, Any], now: float) -> None:
        self.events_seen += 1
        if (pod.get("status") or {}).get("phase") != "Running":
            return
        metadata = pod["metadata"]
        name: str = metadata["name"]
        try:
            index = int(name.removeprefix("pod-"))
        except ValueError:
            return
        if not 0 <= index < self.n:
            return
        times = self.pods[index]
        if not math.isnan(times.running):
            return
        times.running = now
        times.server_created = parse_kube_time(metadata.get("creationTimestamp"))
        # The daemon's status write: its managedFields entry for the status subresource.
        written = [
            parse_kube_time(entry.get("time"))
            for entry in metadata.get("managedFields") or []
            if entry.get("subresource") == "status" and entry.get("manager") != FIELD_MANAGER
        ]
        times.server_status_written = max((w for w in written if w is not None), default=None)
        self.running_count += 1
        if self.running_count == self.n:
            self.all_running.set()


def pod_manifest(name: str, node_name: str, automount_token: bool) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "pods-to-running-bench"}},
        "spec": {
            "nodeName": node_name,
            "automountServiceAccountToken": automount_token,
            "tolerations": [{"operator": "Exists"}],
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "pause",
                    "image": POD_IMAGE,
                    "resources": {"requests": {"cpu": "1m"}},
                }
            ],
        },
    }


async def create_pods(
    api: client.CoreV1Api,
    namespace: str,
    state: RunState,
    *,
    node_name: str,
    concurrency: int,
    automount_token: bool,
) -> None:
    """`concurrency` workers create pod-00000.. in order; bodies go as plain JSON, replies are not parsed."""
    next_index = 0

    async def worker() -> None:
        nonlocal next_index
        while next_index < state.n:
            index = next_index
            next_index += 1
            body = pod_manifest(state.pod_name(index), node_name, automount_token)
            times = state.pods[index]
            for attempt in range(1, CREATE_ATTEMPTS + 1):
                times.sent = time.monotonic()
                state.creates_sent += 1
                # A plain dict goes out as is: building V1Pod models would take CPU the daemons need.
                call = api.create_namespaced_pod(
                    namespace,
                    body,  # type: ignore[arg-type]
                    field_manager=FIELD_MANAGER,
                    _preload_content=False,
                )
                response = await raw(call)
                async with response:
                    payload = await response.read()
                    times.acked = time.monotonic()
                if response.status == 201:
                    break
                if response.status in (429, 500, 503, 504) and attempt < CREATE_ATTEMPTS:
                    await asyncio.sleep(0.2 * attempt)
                    continue
                raise BenchError(
                    f"creating {namespace}/{body['metadata']['name']} failed with HTTP {response.status}: "
                    f"{payload[:500].decode(errors='replace')}"
                )

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def watch_pods(api: client.CoreV1Api, namespace: str, state: RunState) -> None:
    """List, then watch from the list's resourceVersion; relist on 410 Gone. Runs until cancelled."""
    resource_version: str | None = None
    while True:
        if resource_version is None:
            state.lists_sent += 1
            response = await raw(api.list_namespaced_pod(namespace, _preload_content=False))
            async with response:
                payload = await response.read()
            if response.status != 200:
                raise BenchError(f"listing pods in {namespace}: HTTP {response.status}: {payload[:300]!r}")
            listing = json.loads(payload)
            now = time.monotonic()
            for item in listing["items"]:
                state.observe(item, now)
            resource_version = listing["metadata"]["resourceVersion"]
        state.watches_sent += 1
        response = await raw(
            api.list_namespaced_pod(
                namespace,
                watch=True,
                resource_version=resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=WATCH_TIMEOUT_SECONDS,
                _preload_content=False,
                _request_timeout=WATCH_TIMEOUT_SECONDS + 60,
            )
        )
        async with response:
            if response.status == 410:
                resource_version = None
                continue
            if response.status != 200:
                raise BenchError(f"watching pods in {namespace}: HTTP {response.status}")
            async for line in response.content:
                now = time.monotonic()
                if not line.strip():
                    continue
                event = json.loads(line)
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    if obj.get("code") == 410:
                        resource_version = None
                        break
                    raise BenchError(f"watch error in {namespace}: {obj}")
                resource_version = obj.get("metadata", {}).get("resourceVersion", resource_version)
                if event.get("type") in ("ADDED", "MODIFIED"):
                    state.observe(obj, now)


async def wait_node_ready(api: client.CoreV1Api, node_name: str, daemon: RunningDaemon) -> float:
    started = time.monotonic()
    deadline = started + NODE_READY_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        daemon.check_alive()
        try:
            node = await api.read_node(node_name)
        except ApiException as error:
            if error.status != 404:
                raise
        else:
            for condition in node.status.conditions or []:
                if condition.type == "Ready" and condition.status == "True":
                    return time.monotonic() - started
        await asyncio.sleep(0.25)
    raise BenchError(
        f"node {node_name} was not Ready within {NODE_READY_TIMEOUT_SECONDS:.0f}s. "
        f"The end of {daemon.daemon.name}'s log ({daemon.log}):\n{tail(daemon.log, 30)}"
    )


async def wait_default_service_account(api: client.CoreV1Api, namespace: str) -> None:
    """Pod admission wants the namespace's `default` ServiceAccount, created by the controller-manager."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            await api.read_namespaced_service_account("default", namespace)
            return
        except ApiException as error:
            if error.status != 404:
                raise
        await asyncio.sleep(0.2)
    raise BenchError(
        f"namespace {namespace} got no default ServiceAccount in 60s; is the controller-manager up?"
    )


async def cleanup(api: client.ApiClient, namespace: str | None, node_name: str) -> None:
    """Force-delete the pods (the daemon is already stopped), the namespace, the Node and its Lease."""
    core = client.CoreV1Api(api)
    if namespace is not None:
        with contextlib.suppress(ApiException):
            await core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        with contextlib.suppress(ApiException):
            await core.delete_namespace(namespace)
    with contextlib.suppress(ApiException):
        await core.delete_node(node_name)
    with contextlib.suppress(ApiException):
        await client.CoordinationV1Api(api).delete_namespaced_lease(node_name, "kube-node-lease")
    with contextlib.suppress(ApiException):  # vk-provider's leader Lease (404 for virtual-kubelet)
        await client.CoordinationV1Api(api).delete_namespaced_lease(
            leadership.lease_name(node_name), leadership.FALLBACK_NAMESPACE
        )
    if namespace is None:
        return
    deadline = time.monotonic() + NAMESPACE_GONE_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        try:
            await core.read_namespace(namespace)
        except ApiException as error:
            if error.status == 404:
                return
            raise
        # Pods created after the first delete-collection (none expected) would hold the namespace.
        with contextlib.suppress(ApiException):
            await core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        await asyncio.sleep(1.0)
    raise BenchError(f"namespace {namespace} still exists after {NAMESPACE_GONE_TIMEOUT_SECONDS:.0f}s")


def summarize(state: RunState, started_wall: float, started_mono: float) -> dict[str, Any]:
    pods = state.pods
    first_sent = min(p.sent for p in pods)
    last_acked = max(p.acked for p in pods)
    last_running = max(p.running for p in pods)
    latency = [p.running - p.acked for p in pods]
    latency_send = [p.running - p.sent for p in pods]
    duration = last_running - first_sent

    def to_wall(mono: float) -> float:
        return started_wall + (mono - started_mono)

    server = [
        p.server_status_written - p.server_created
        for p in pods
        if p.server_status_written is not None and p.server_created is not None
    ]
    return {
        "n": state.n,
        "throughput_pods_per_s": state.n / duration,
        "p50_s": percentile(latency, 0.50),
        "p99_s": percentile(latency, 0.99),
        "max_s": max(latency),
        "mean_s": sum(latency) / len(latency),
        "duration_s": duration,
        "latency_from_send": {
            "p50_s": percentile(latency_send, 0.50),
            "p99_s": percentile(latency_send, 0.99),
        },
        "creation": {
            "duration_s": last_acked - first_sent,
            "rate_pods_per_s": state.n / (last_acked - first_sent),
            "p50_request_s": percentile([p.acked - p.sent for p in pods], 0.50),
            "p99_request_s": percentile([p.acked - p.sent for p in pods], 0.99),
        },
        "server_side_1s_resolution": {
            "pods": len(server),
            "p50_s": percentile(server, 0.50),
            "p99_s": percentile(server, 0.99),
            "max_s": max(server, default=math.nan),
        },
        "first_created_at": datetime.fromtimestamp(to_wall(first_sent), UTC).isoformat(),
        "last_running_at": datetime.fromtimestamp(to_wall(last_running), UTC).isoformat(),
        "watch_events": state.events_seen,
    }


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    plane_dir: Path
    work_dir: Path
    concurrency: int
    timeout_seconds: float | None
    """None: 20 minutes plus 0.2 s per pod (virtual-kubelet needs ~0.2 s per pod, see README.md)."""
    automount_token: bool
    stall_seconds: float
    settle_seconds: float
    detail_max_pods: int
    """At most this long after the last Running, wait for the daemon's pod and Event writes to stop
    (apiserver_requests.settle), so requests queued behind its limit are counted too."""
    """A run in which no pod became Running for this long has stalled: it fails rather than waiting
    out the whole timeout."""

    def timeout_for(self, n: int) -> float:
        return self.timeout_seconds if self.timeout_seconds is not None else 1200.0 + 0.2 * n


async def measure(
    api: client.ApiClient,
    core: client.CoreV1Api,
    running: RunningDaemon,
    namespace: str,
    *,
    node_name: str,
    n: int,
    settings: Settings,
    background: apiserver_requests.Background,
) -> dict[str, Any]:
    """Create n pods bound to node_name and wait until the watch has seen every one Running.

    The apiserver's request counters are read just before the watch starts and just after the last
    pod is seen Running (and the watch is stopped): that window is what `requests` accounts for.
    """
    state = RunState(n)
    before = await apiserver_requests.scrape(api)
    watcher = asyncio.create_task(watch_pods(core, namespace, state))
    await asyncio.sleep(0.5)  # let the initial list land before the first pod is created
    started_wall, started_mono = time.time(), time.monotonic()
    creator = asyncio.create_task(
        create_pods(
            core,
            namespace,
            state,
            node_name=node_name,
            concurrency=settings.concurrency,
            automount_token=settings.automount_token,
        )
    )
    all_running = asyncio.create_task(state.all_running.wait())
    died = asyncio.create_task(running.process.wait())
    tasks: tuple[asyncio.Task[Any], ...] = (all_running, died, watcher, creator)
    timeout = settings.timeout_for(n)
    deadline = started_mono + timeout
    progress_at = started_mono
    last_count, last_count_at = 0, started_mono
    try:
        while not all_running.done():
            now = time.monotonic()
            if state.running_count != last_count:
                last_count, last_count_at = state.running_count, now
            remaining = deadline - now
            if remaining <= 0 or now - last_count_at >= settings.stall_seconds:
                why = (
                    f"timed out after {timeout:.0f}s (see --timeout)"
                    if remaining <= 0
                    else f"stalled: no pod became Running for {settings.stall_seconds:.0f}s "
                    "(see --stall-seconds)"
                )
                raise BenchError(
                    f"{why}: {state.running_count}/{n} pods Running. "
                    f"The end of {running.daemon.name}'s log ({running.log}):\n{tail(running.log, 10)}"
                )
            pending = {task for task in tasks if not task.done()}
            await asyncio.wait(pending, timeout=min(remaining, 10.0), return_when=asyncio.FIRST_COMPLETED)
            if died.done():
                raise running.died() or BenchError(f"{running.daemon.name} exited")
            for task in (watcher, creator):
                if task.done() and task.exception() is not None:
                    raise BenchError(str(task.exception())) from task.exception()
            if time.monotonic() - progress_at >= 30 and not all_running.done():
                progress_at = time.monotonic()
                created = sum(1 for pod in state.pods if not math.isnan(pod.acked))
                print(
                    f"    {progress_at - started_mono:5.0f}s: {created}/{n} created, "
                    f"{state.running_count}/{n} Running, RSS {running.memory.max_rss_kib / 1024:.0f} MiB",
                    flush=True,
                )
        # The watch stays open: pod writes the daemon still sends are watch events every watcher gets.
        after, settled_s, settled = await apiserver_requests.settle(
            api,
            quiet_seconds=SETTLE_QUIET_SECONDS,
            max_seconds=settings.settle_seconds if detailed(n, settings.detail_max_pods) else 0.0,
        )
        running.check_alive()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    summary = summarize(state, started_wall, started_mono)
    summary["settled_after_last_running_s"] = settled_s
    summary["settled"] = settled
    if not settled:
        waited = (
            f"it still wrote pods or Events {settled_s:.0f}s after the last Running (see --settle-seconds)"
            if settled_s > 0
            else "no settle at this size (see --detail-max-pods)"
        )
        print(f"  requests counted to here only, a lower bound: {waited}", flush=True)
    bench_sent = {
        apiserver_requests.CREATE_PODS: state.creates_sent,
        apiserver_requests.LIST_PODS: state.lists_sent,
        apiserver_requests.WATCH_PODS: state.watches_sent,
    }
    summary["requests"] = apiserver_requests.attribute(
        before, after, bench_sent=bench_sent, background=background, pods=n
    )
    summary["requests_per_pod"] = summary["requests"]["per_pod"]
    summary["pod_watch_events_per_pod"] = state.events_seen / n
    return summary


def memory_report(memory: MemoryPeak) -> dict[str, Any]:
    return {
        "peak_rss_mib": memory.peak_kib / 1024,
        "vm_hwm_mib": memory.hwm_kib / 1024,
        "max_sampled_rss_mib": memory.max_rss_kib / 1024,
        "max_sampled_tree_rss_mib": memory.max_tree_rss_kib / 1024,
        "samples": memory.samples,
    }


async def run_once(
    api: client.ApiClient,
    subject: Subject,
    n: int,
    settings: Settings,
    background: apiserver_requests.Background,
) -> dict[str, Any]:
    """Start the daemon, wait for its Node, create n pods, wait until all are Running; always clean up."""
    core = client.CoreV1Api(api)
    daemon = subject.daemon
    suffix = uuid.uuid4().hex[:5]
    node_name = namespace = f"bench-{daemon.name}-{subject.variant}-{n}-{suffix}"
    paths = RunPaths(
        folder=settings.work_dir / node_name,
        kubeconfig=settings.plane_dir / "kubeconfig",
        plane_dir=settings.plane_dir,
    )
    paths.folder.mkdir(parents=True, exist_ok=True)
    launch = daemon.launch(node_name, free_port(), paths, subject.extra_args)
    running = await RunningDaemon.start(daemon, launch, paths.log, paths.folder)
    print(
        f"  started {daemon.name}: pid {running.process.pid}, node {node_name}, log {paths.log}", flush=True
    )
    result: dict[str, Any] = {"node": node_name, "namespace": namespace, "log": str(paths.log)}
    result["argv"] = launch.argv
    namespace_created = False
    try:
        result["node_ready_s"] = await wait_node_ready(core, node_name, running)
        result["idle_rss_mib"] = running.memory.max_rss_kib / 1024
        print(
            f"  node Ready after {result['node_ready_s']:.1f}s, RSS {result['idle_rss_mib']:.0f} MiB",
            flush=True,
        )
        await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
        namespace_created = True
        await wait_default_service_account(core, namespace)
        result.update(
            await measure(
                api,
                core,
                running,
                namespace,
                node_name=node_name,
                n=n,
                settings=settings,
                background=background,
            )
        )
        return result
    finally:
        await running.stop()  # takes a last VmHWM sample first
        result["memory"] = memory_report(running.memory)
        result["peak_rss_mib"] = running.memory.peak_kib / 1024
        print("  cleaning up: daemon stopped; force-deleting its pods, namespace and node...", flush=True)
        await cleanup(api, namespace if namespace_created else None, node_name)


# --- the control plane ----------------------------------------------------------------------------


# The plane is this checkout's `vk-provider dev`, whatever --vk-provider points at.
DEV_COMMAND = (sys.executable, "-m", "vk_provider", "dev")


def ensure_plane(plane_dir: Path) -> bool:
    """Start the local control plane unless it is already up; True if this call started it."""
    status = run_text([*DEV_COMMAND, "status", "--dir", str(plane_dir)])
    if status.returncode == 0 and "readyz: ok" in status.stdout:
        return False
    print(f"starting the control plane in {plane_dir} (vk-provider dev up)...", flush=True)
    # May build the control plane first (cached); that can take a long time on a fresh machine.
    # No local-gpu node: only the daemon under test should be working during a run.
    up = subprocess.run(
        [*DEV_COMMAND, "up", "--dir", str(plane_dir), "--no-local-node"], check=False, timeout=3600
    )
    if up.returncode != 0:
        raise BenchError(f"`vk-provider dev up --dir {plane_dir}` failed (exit {up.returncode})")
    return True


def stop_plane(plane_dir: Path) -> None:
    subprocess.run([*DEV_COMMAND, "down", "--dir", str(plane_dir)], check=False, timeout=120)


# --- main -----------------------------------------------------------------------------------------


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text!r}") from None
    if not sizes or any(size <= 0 for size in sizes):
        raise argparse.ArgumentTypeError("sizes must be positive")
    return sizes


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Time N pods from binding to Running, for virtual-kubelet's mock and for vk-provider's.",
    )
    parser.add_argument(
        "--plane-dir", type=Path, default=DEFAULT_PLANE_DIR, help="control-plane folder (%(default)s)"
    )
    parser.add_argument("--sizes", type=parse_sizes, default=[1000, 5000], help="pod counts, e.g. 1000,5000")
    parser.add_argument(
        "--variants",
        type=parse_variants,
        default=list(VARIANTS),
        help="client budgets to run: same-budget (vk-provider at virtual-kubelet's QPS 5 / burst 10), "
        "as-shipped (each daemon's defaults), unthrottled (vk-provider only); default: all",
    )
    parser.add_argument(
        "--detail-max-pods",
        type=int,
        default=1000,
        help="sizes above this (0: none) are for memory and as-shipped throughput: no same-budget run "
        "(vk-provider at 5 QPS needs minutes per thousand pods) and no settle, so their requests are "
        "counted to the last Running only (default %(default)s)",
    )
    parser.add_argument(
        "--unthrottled-args",
        help="vk-provider flags for the unthrottled run, e.g. '--api-qps 1000 --api-burst 2000' "
        "(default: the value `vk-provider node --help` says means no limit, else those)",
    )
    parser.add_argument(
        "--background-seconds",
        type=float,
        default=30.0,
        help="window with no daemon running to measure the plane's own requests in (%(default)s)",
    )
    parser.add_argument("--only", choices=DAEMON_NAMES, help="run one side only")
    parser.add_argument("--concurrency", type=int, default=50, help="pod creations in flight (%(default)s)")
    parser.add_argument(
        "--timeout",
        type=float,
        help="seconds per run for all pods to be Running (default: 1200 + 0.2 per pod)",
    )
    parser.add_argument(
        "--stall-seconds",
        type=float,
        default=120.0,
        help="fail a run in which no pod became Running for this long (%(default)s)",
    )
    parser.add_argument(
        "--settle-seconds",
        type=float,
        default=240.0,
        help="after the last pod is Running, wait at most this long for the daemon's pod and Event "
        "writes to stop, counting them (%(default)s)",
    )
    parser.add_argument(
        "--vk-provider-args",
        default="",
        help="extra flags for every vk-provider run, e.g. '--leader-elect false' (shown in the report)",
    )
    parser.add_argument("--vk-binary", type=Path, default=default_vk_binary(), help="virtual-kubelet binary")
    parser.add_argument(
        "--vk-provider", type=Path, default=default_vk_provider(), help="vk-provider executable"
    )
    add_results_dir_option(parser)
    parser.add_argument(
        "--work-dir",
        type=Path,
        help="daemon logs, configs and certificates (default: <plane-dir>/bench-runs)",
    )
    parser.add_argument(
        "--keep-plane", action="store_true", help="leave the control plane up if this run started it"
    )
    parser.add_argument(
        "--automount-service-account-token",
        action="store_true",
        help="let pods mount a service-account token (off by default: the mocks ignore volumes)",
    )
    return parser


def parse_variants(text: str) -> list[str]:
    variants = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [variant for variant in variants if variant not in VARIANTS]
    if not variants or unknown:
        raise argparse.ArgumentTypeError(f"variants are a comma-separated subset of {','.join(VARIANTS)}")
    return variants


def select_daemons(args: argparse.Namespace) -> tuple[list[Daemon], dict[str, str], dict[str, str]]:
    """The daemons that can run, the reason each other one cannot, and the versions of the former."""
    wanted: list[Daemon] = []
    if args.only in (None, "virtual-kubelet"):
        wanted.append(VirtualKubelet(args.vk_binary))
    if args.only in (None, "vk-provider"):
        unthrottled = shlex.split(args.unthrottled_args) if args.unthrottled_args is not None else None
        wanted.append(VkProvider(args.vk_provider, unthrottled, shlex.split(args.vk_provider_args)))
    available: list[Daemon] = []
    unavailable: dict[str, str] = {}
    versions: dict[str, str] = {}
    for daemon in wanted:
        try:
            daemon.check()
        except DaemonUnavailableError as error:
            print(f"CANNOT RUN {daemon.name}: {error}", file=sys.stderr, flush=True)
            unavailable[daemon.name] = str(error)
            continue
        versions[daemon.name] = daemon.version()
        available.append(daemon)
    return available, unavailable, versions


def select_subjects(
    daemons: Sequence[Daemon], variants: Sequence[str]
) -> tuple[list[Subject], dict[str, str]]:
    subjects: list[Subject] = []
    skipped: dict[str, str] = {}
    for daemon in daemons:
        runs, cannot = daemon.subjects(variants)
        subjects += runs
        skipped.update({f"{daemon.name}/{variant}": reason for variant, reason in cannot.items()})
    return subjects, skipped


def detailed(size: int, detail_max_pods: int) -> bool:
    """Whether this size gets same-budget runs and the settle (--detail-max-pods; 0: every size)."""
    return not detail_max_pods or size <= detail_max_pods


def variants_at(size: int, variants: Sequence[str], detail_max_pods: int) -> set[str]:
    """The variants run at this size: same-budget only at detailed sizes."""
    if not detailed(size, detail_max_pods):
        return {variant for variant in variants if variant != "same-budget"}
    return set(variants)


def subject_json(subject: Subject) -> dict[str, Any]:
    short = "VK" if subject.daemon.name == "virtual-kubelet" else "ours"
    return {
        "daemon": subject.daemon.name,
        "variant": subject.variant,
        "serves": list(subject.serves),
        "extra_args": list(subject.extra_args),
        "budget": dataclasses.asdict(subject.budget),
        "label": subject.label(),
        "short": f"{short} {subject.variant} ({subject.budget.describe()})",
    }


async def ensure_leader_namespace(api: client.ApiClient) -> None:
    """vk-provider, as shipped, elects a leader through a Lease in vk-provider-system (outside a pod),
    which its manifests create; on the bare dev plane the bench creates it."""
    core = client.CoreV1Api(api)
    try:
        await core.read_namespace(leadership.FALLBACK_NAMESPACE)
    except ApiException as error:
        if error.status != 404:
            raise
        body = client.V1Namespace(metadata=client.V1ObjectMeta(name=leadership.FALLBACK_NAMESPACE))
        await core.create_namespace(body)


async def measure_background(api: client.ApiClient, seconds: float) -> apiserver_requests.Background:
    """The plane's own request rates with no daemon running, to subtract from every run's window."""
    if seconds <= 0:
        return apiserver_requests.Background.none()
    print(f"measuring the plane's background requests for {seconds:.0f}s (no daemon running)...", flush=True)
    before = await apiserver_requests.scrape(api)
    await asyncio.sleep(seconds)  # (noqa: sleep-ok) a deliberate sampling window of the plane's idle traffic
    background = apiserver_requests.Background.between(before, await apiserver_requests.scrape(api))
    total = sum(rate for (verb, _), rate in background.rates.items() if verb != "WATCH")
    print(f"  background: {total:.2f} requests/s", flush=True)
    return background


async def run_matrix(
    api: client.ApiClient,
    subjects: Sequence[Subject],
    args: argparse.Namespace,
    settings: Settings,
    background: apiserver_requests.Background,
) -> dict[str, dict[str, dict[str, Any]]]:
    results: dict[str, dict[str, dict[str, Any]]] = {subject.key: {} for subject in subjects}
    # Sizes outermost: all runs of a size meet the plane (etcd size, compaction) in about the same state.
    for size in args.sizes:
        wanted = variants_at(size, args.variants, args.detail_max_pods)
        for subject in subjects:
            if not wanted & set(subject.serves):
                continue
            print(f"\n== {subject.label()}: {size} pods ==", flush=True)
            try:
                entry = await run_once(api, subject, size, settings, background)
            except BenchError as error:
                print(f"  FAILED: {error}", file=sys.stderr, flush=True)
                entry = {"n": size, "error": str(error)}
            else:
                print(
                    f"  {size} pods Running in {entry['duration_s']:.1f}s: "
                    f"{entry['throughput_pods_per_s']:.1f} pods/s, p50 {entry['p50_s']:.3f}s, "
                    f"p99 {entry['p99_s']:.3f}s, peak RSS {entry['peak_rss_mib']:.0f} MiB, "
                    f"{entry['requests_per_pod']:.2f} requests and "
                    f"{entry['pod_watch_events_per_pod']:.2f} watch events per pod "
                    f"(creation ran at {entry['creation']['rate_pods_per_s']:.0f} pods/s)",
                    flush=True,
                )
            results[subject.key][str(size)] = entry
    return results


async def run_all(args: argparse.Namespace) -> int:
    available, unavailable, versions = select_daemons(args)
    if not available:
        return 2
    subjects, skipped = select_subjects(available, args.variants)
    for key, reason in skipped.items():
        print(f"not running {key}: {reason}", flush=True)
    started_at = datetime.now(UTC)
    settings = Settings(
        plane_dir=args.plane_dir.resolve(),
        work_dir=(args.work_dir or args.plane_dir / "bench-runs").resolve(),
        concurrency=args.concurrency,
        timeout_seconds=args.timeout,
        automount_token=args.automount_service_account_token,
        stall_seconds=args.stall_seconds,
        settle_seconds=args.settle_seconds,
        detail_max_pods=args.detail_max_pods,
    )
    started_plane = ensure_plane(settings.plane_dir)
    try:
        configuration = client.Configuration()
        await config.load_kube_config(
            config_file=str(settings.plane_dir / "kubeconfig"), client_configuration=configuration
        )
        configuration.connection_pool_maxsize = args.concurrency + 10
        async with client.ApiClient(configuration) as api:
            versions["kubernetes"] = (await client.VersionApi(api).get_code()).git_version
            await ensure_leader_namespace(api)
            background = await measure_background(api, args.background_seconds)
            results = await run_matrix(api, subjects, args, settings, background)
    finally:
        if started_plane and not args.keep_plane:
            stop_plane(settings.plane_dir)

    report: dict[str, Any] = {
        **report_head("pods_to_running", started_at),
        "versions": versions,
        "settings": {
            "sizes": args.sizes,
            "variants": args.variants,
            "detail_max_pods": args.detail_max_pods,
            "concurrency": args.concurrency,
            "timeout_s": {str(size): settings.timeout_for(size) for size in args.sizes},
            "pod_image": POD_IMAGE,
            "capacity": CAPACITY,
            "automount_service_account_token": settings.automount_token,
            "latency": "client-side: first watch event with phase Running minus the 201 of the pod's create",
        },
        "subjects": {subject.key: subject_json(subject) for subject in subjects},
        "findings": {daemon.name: daemon.findings() for daemon in available},
        "skipped": skipped,
        "unavailable": unavailable,
        "background": {
            "seconds": background.seconds,
            "requests_per_s": {
                f"{verb} {resource}": rate for (verb, resource), rate in background.rates.items()
            },
            "pod_watch_events_per_s": background.pod_watch_events_per_s,
        },
        "results": results,
    }
    report["table"] = pods_report.table_rows(report)
    report["targets"] = pods_report.targets(report)
    json_path, markdown_path = write_report(args.results_dir, report, pods_report.write_markdown)
    pods_report.print_summary(report)
    for name, reason in unavailable.items():
        print(f"\n{name} was NOT measured: {reason}", file=sys.stderr)
    print(f"\nwrote {json_path}\nwrote {markdown_path}")
    failed = any("error" in entry for by_size in results.values() for entry in by_size.values())
    return 1 if failed or unavailable else 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.concurrency < 1:
        raise SystemExit("--concurrency must be at least 1")
    return run_main(
        run_all(args), interrupted="the daemon was stopped and its namespace deleted; no results written"
    )


if __name__ == "__main__":
    sys.exit(main())
