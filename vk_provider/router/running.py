"""`vk-provider router`: serve the route table that the cluster's Offloads describe.

The router loads the table before it listens, so its first answer is never a 404 for a route that
exists. The first SIGTERM or SIGINT stops listening and lets requests in flight finish (up to the
shutdown grace); a second one exits at once.

`--worker-processes N` (default: the CPUs this process may run on) serves the port from N worker processes
fed by this one, which watches the cluster for all of them (`vk_provider.router.workers`); with 1,
this process serves the port itself, with no other process.

Away pods whose traffic address wants SigV4 (SageMaker endpoints) get signed requests, with the AWS
credentials botocore's standard chain finds for the router (environment, IRSA, shared files, container
or instance metadata), or the profile and credentials file `--aws-profile` and
`--aws-credentials-file` name; see `vk_provider.router.signing`. It signs only for SageMaker's
runtime, at its own hosts and those `--sign-for-host` names (`vk_provider.routetable.signingscope`), and
takes home endpoints only from the EndpointSlices of Kubernetes' EndpointSlice controller and the
managers `--endpoint-slice-manager` names (`vk_provider.offload.homeslices`), and away addresses only
with a node's seal that the key in `--traffic-key-secret` verifies (`vk_provider.kit.traffic_signature`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import math
import os
from collections.abc import AsyncIterator
from pathlib import Path

from vk_provider.kit.kubeconfigs import daemon_kubeconfig
from vk_provider.router.admin import DEFAULT_ADMIN_LISTEN, Answer, local_answer, start_admin
from vk_provider.router.metrics import RouterMetrics
from vk_provider.router.proxy import ProxySettings, Router
from vk_provider.router.server import ProxyServer, start
from vk_provider.router.signing import RequestSigning, standard_chain
from vk_provider.router.workerprotocol import WorkerConfig
from vk_provider.router.workers import Supervisor
from vk_provider.routetable.running import add_check_arguments, add_trust_arguments, watching_cluster
from vk_provider.runtime import eventloop
from vk_provider.runtime.flagaliases import add_deprecated_alias
from vk_provider.runtime.flagtypes import (
    host_port,
    positive_seconds,
    seconds,
    seconds_with_unit,
    whole_number,
)
from vk_provider.runtime.logsetup import add_log_arguments, configure_logging
from vk_provider.runtime.signals import SLOW_STOP_SECONDS, until_signalled

logger = logging.getLogger(__name__)

DEFAULT_LISTEN = "0.0.0.0:8080"


def usable_cpus(cgroup_root: Path = Path("/sys/fs/cgroup")) -> int:
    """The CPUs this process may use: its affinity (which a container's cpuset narrows), capped by
    its cgroup's CPU quota rounded up (a container's CPU limit), so a pod limited to 2 CPUs on a
    64-CPU node runs 2 workers, not 64 (each takes about 50 MB)."""
    cpus = len(os.sched_getaffinity(0))
    quota = cpu_quota(cgroup_root)
    return max(1, min(cpus, math.ceil(quota))) if quota is not None else cpus


def cpu_quota(cgroup_root: Path) -> float | None:
    """CPUs' worth of the cgroup's quota (cgroup v2 `cpu.max`, else v1 `cpu.cfs_quota_us` and
    `cpu.cfs_period_us`), or None when there is no limit or no readable cgroup file."""
    try:
        quota, _, period = (cgroup_root / "cpu.max").read_text().strip().partition(" ")
        if quota != "max":
            return int(quota) / int(period or 100_000)
        return None
    except (OSError, ValueError):
        pass
    try:
        quota_us = int((cgroup_root / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((cgroup_root / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota_us / period_us if quota_us > 0 and period_us > 0 else None


def add_router_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig",
        help="kubeconfig to use (default: $KUBECONFIG, else ~/.kube/config, else the pod's ServiceAccount)",
    )
    parser.add_argument(
        "--listen",
        type=host_port,
        default=host_port(DEFAULT_LISTEN),
        metavar="HOST:PORT",
        help=f"where to serve traffic, and nothing else (default: {DEFAULT_LISTEN})",
    )
    parser.add_argument(
        "--admin-listen",
        type=host_port,
        default=host_port(DEFAULT_ADMIN_LISTEN),
        metavar="HOST:PORT",
        help="where to serve /-/healthz, /-/readyz, /-/status and /-/metrics, for the controller, "
        "Prometheus and probes; the status names every route's endpoints, so keep it off the traffic "
        f"path (the manifests' NetworkPolicy does) (default: {DEFAULT_ADMIN_LISTEN})",
    )
    parser.add_argument(
        "--namespace", help="route only the Offloads of this namespace (default: every namespace)"
    )
    cpus = usable_cpus()
    parser.add_argument(
        "--worker-processes",
        type=whole_number(1),
        default=cpus,
        metavar="N",
        help="processes serving the port (SO_REUSEPORT), fed the route table by one more that watches "
        f"the cluster; 1 serves from this process alone (default: the CPUs it may use, here {cpus})",
    )
    parser.add_argument(
        "--connect-timeout-seconds",
        type=positive_seconds,
        default=2.0,
        metavar="SECONDS",
        help="seconds to connect to an endpoint (default: 2)",
    )
    parser.add_argument(
        "--shutdown-grace-seconds",
        type=seconds,
        default=30.0,
        metavar="SECONDS",
        help="seconds requests in flight get to finish when the router stops (default: 30)",
    )
    parser.add_argument(
        "--shutdown-delay-seconds",
        type=seconds,
        default=0.0,
        metavar="SECONDS",
        help="seconds to go on taking new connections after SIGTERM, before the grace: a Service's "
        "endpoints and the load balancers in front take that long to stop sending to a replica being "
        "replaced (default: 0; the manifests set 5)",
    )
    parser.add_argument(
        "--aws-profile",
        help="AWS profile whose credentials sign requests to SageMaker endpoints "
        "(default: AWS_PROFILE, else the default profile)",
    )
    parser.add_argument(
        "--aws-credentials-file",
        type=Path,
        metavar="FILE",
        help="AWS shared credentials file to read them from, e.g. a mounted Secret's "
        "(default: AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials); re-read when it changes "
        "(checked at most once a second)",
    )
    add_client_limit_arguments(parser)
    add_trust_arguments(parser)
    add_check_arguments(parser)
    add_log_arguments(parser)
    add_deprecated_alias(parser, "--workers", "--worker-processes")
    for old in ("--connect-timeout", "--shutdown-grace", "--shutdown-delay"):
        add_deprecated_alias(parser, old, f"{old}-seconds", convert=seconds_with_unit)


def add_client_limit_arguments(parser: argparse.ArgumentParser) -> None:
    """What one client may hold: a slow or oversized request head is refused, connections are capped."""
    defaults = ProxySettings()
    parser.add_argument(
        "--header-timeout-seconds",
        type=positive_seconds,
        default=defaults.header_timeout,
        metavar="SECONDS",
        help="seconds from a request's first byte to the end of its head, then 408 and the connection "
        "closes; a client dribbling header lines (slowloris) is cut here "
        f"(default: {defaults.header_timeout:g})",
    )
    add_deprecated_alias(parser, "--header-timeout", "--header-timeout-seconds", convert=seconds_with_unit)
    parser.add_argument(
        "--max-request-line",
        type=whole_number(1),
        default=defaults.max_request_line,
        metavar="BYTES",
        help=f"bytes of a request's target; longer gets 414 (default: {defaults.max_request_line})",
    )
    parser.add_argument(
        "--max-header-bytes",
        type=whole_number(1),
        default=defaults.max_header_bytes,
        metavar="BYTES",
        help=f"bytes of a request's header fields; more gets 431 (default: {defaults.max_header_bytes})",
    )
    parser.add_argument(
        "--max-headers",
        type=whole_number(1),
        default=defaults.max_headers,
        metavar="N",
        help=f"header fields of a request; more gets 431 (default: {defaults.max_headers})",
    )
    parser.add_argument(
        "--max-connections",
        type=whole_number(1),
        default=defaults.max_client_connections,
        metavar="N",
        help="client connections each worker keeps open; one more is answered 503 and closed "
        f"(default: {defaults.max_client_connections})",
    )


def proxy_settings_of(arguments: argparse.Namespace) -> ProxySettings:
    return ProxySettings(
        connect_timeout=arguments.connect_timeout_seconds,
        header_timeout=arguments.header_timeout_seconds,
        max_request_line=arguments.max_request_line,
        max_header_bytes=arguments.max_header_bytes,
        max_headers=arguments.max_headers,
        max_client_connections=arguments.max_connections,
    )


LATE_REQUEST_SETTLE_SECONDS = 0.1


async def drain(server: ProxyServer, router: Router, grace: float) -> None:
    """Stop listening, then wait (up to `grace`) for the requests in flight before cleanup closes
    connections.

    Not left to `server.close()` alone: it closes every connection with no request running, and a
    connection accepted just before the listener closed may not have sent its request yet; aiohttp
    then drops that request and leaves the client waiting. A moment for such requests to arrive,
    then waiting for every proxied request, answers them instead.
    """
    await server.stop_listening()
    await asyncio.sleep(min(LATE_REQUEST_SETTLE_SECONDS, grace))
    try:
        async with asyncio.timeout(grace):
            await router.wait_idle()
    except TimeoutError:
        logger.warning("%d request(s) still in flight after the %gs grace", router.in_flight, grace)


async def keep_serving_while_endpoints_let_go(delay: float) -> None:
    """After SIGTERM, go on serving new connections for `delay` seconds. Kubernetes marks a deleted
    Pod's endpoints terminating at the moment it sends SIGTERM, but kube-proxy, ingress controllers and
    cloud load balancers learn of it later: a router that stopped listening at once would refuse the
    requests they still send it (as the rolling upgrade under load measured)."""
    if delay > 0:
        logger.info("stopping in %gs: serving new connections until the endpoints let go", delay)
        await asyncio.sleep(delay)


@contextlib.asynccontextmanager
async def admin_listener(
    arguments: argparse.Namespace, answer: Answer, serving: asyncio.Event, stop: asyncio.Event
) -> AsyncIterator[None]:
    """The admin listener while inside, from before the table loads (liveness holds meanwhile);
    ready while `serving` is set and `stop` is not."""
    host, port = arguments.admin_listen
    runner = await start_admin(host, port, answer, lambda: serving.is_set() and not stop.is_set())
    try:
        yield
    finally:
        await runner.cleanup()


async def serve_router(arguments: argparse.Namespace, stop: asyncio.Event) -> None:
    """Serve from this process alone (`--worker-processes 1`)."""
    host, port = arguments.listen
    signing = RequestSigning(
        standard_chain(profile=arguments.aws_profile, credentials_file=arguments.aws_credentials_file)
    )
    router = Router(
        settings=proxy_settings_of(arguments), signing=signing, metrics=RouterMetrics(build_info=True)
    )
    serving = asyncio.Event()
    async with (
        admin_listener(arguments, local_answer(router), serving, stop),
        watching_cluster(arguments, router.update, router.metrics, stop) as feed,
    ):
        if feed is None:
            return
        router.check_status = feed.checks.status
        server = await start(router, host, port)
        serving.set()
        try:
            logger.info("router serving on %s:%d with %d routes", host, port, len(router.table.routes))
            await stop.wait()
            await keep_serving_while_endpoints_let_go(arguments.shutdown_delay_seconds)
            logger.info(
                "stopping: no new connections; requests in flight get %gs", arguments.shutdown_grace_seconds
            )
            await drain(server, router, arguments.shutdown_grace_seconds)
        finally:
            await server.close()


async def serve_with_workers(arguments: argparse.Namespace, stop: asyncio.Event) -> None:
    """Watch the cluster here; serve from `arguments.worker_processes` worker processes."""
    host, port = arguments.listen
    config = WorkerConfig(
        host=host,
        port=port,
        proxy=proxy_settings_of(arguments),
        shutdown_grace=arguments.shutdown_grace_seconds,
        shutdown_delay=arguments.shutdown_delay_seconds,
        aws_profile=arguments.aws_profile,
        aws_credentials_file=arguments.aws_credentials_file,
        log_level=str(arguments.log_level),
        log_format=str(arguments.log_format),
    )
    supervisor = Supervisor(config, arguments.worker_processes)
    serving = asyncio.Event()
    async with (
        admin_listener(arguments, supervisor.answer, serving, stop),
        watching_cluster(arguments, supervisor.update, supervisor.router.metrics, stop) as feed,
    ):
        if feed is None:
            return
        supervisor.router.check_status = feed.checks.status
        try:
            await supervisor.start()
            serving.set()
            logger.info(
                "router serving on %s:%d from %d workers with %d routes",
                host,
                supervisor.port,
                arguments.worker_processes,
                len(supervisor.router.table.routes),
            )
            await stop.wait()
            await keep_serving_while_endpoints_let_go(arguments.shutdown_delay_seconds)
            logger.info(
                "stopping: the workers take no new connections; requests in flight get %gs",
                arguments.shutdown_grace_seconds,
            )
        finally:
            await supervisor.stop()


def run_router_command(arguments: argparse.Namespace) -> int:
    configure_logging(arguments.log_level, arguments.log_format)

    logger.info("event loop: %s", eventloop.loop_name())
    arguments.kubeconfig = daemon_kubeconfig(arguments.kubeconfig)  # KubeconfigError: one line, exit 1
    serve = serve_router if arguments.worker_processes == 1 else serve_with_workers

    async def main(stop: asyncio.Event) -> None:
        await serve(arguments, stop)

    # The drain may rightly take the whole grace period: only a stop that outlasts it is a hang.
    slow_stop_seconds = (
        arguments.shutdown_delay_seconds + arguments.shutdown_grace_seconds + SLOW_STOP_SECONDS
    )
    try:
        eventloop.run(until_signalled(main, slow_stop_seconds=slow_stop_seconds))
    except OSError as error:
        logger.error(
            "cannot serve on %s:%d (admin %s:%d): %s", *arguments.listen, *arguments.admin_listen, error
        )
        return 1
    return 0
