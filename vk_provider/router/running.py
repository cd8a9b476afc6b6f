"""`vk-provider router`: serve the route table that the cluster's Offloads describe.

The router loads the table before it listens, so its first answer is never a 404 for a route that
exists. The first SIGTERM or SIGINT stops listening and lets requests in flight finish (up to the
shutdown grace); a second one exits at once.

Away pods whose traffic address wants SigV4 (SageMaker endpoints) get signed requests, with the AWS
credentials botocore's standard chain finds for the router (environment, IRSA, shared files, container
or instance metadata), or the profile and credentials file `--aws-profile` and
`--aws-credentials-file` name; see `vk_provider.router.signing`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
from pathlib import Path

from vk_provider._kube.events import EventRecorder
from vk_provider.kit.apibudget import ApiBudget
from vk_provider.kit.kube import KubeApi
from vk_provider.router.core import ProxyServer, start
from vk_provider.router.feed import TableFeed
from vk_provider.router.health import CheckSettings
from vk_provider.router.proxy import ProxySettings, Router
from vk_provider.router.signing import RequestSigning, standard_chain
from vk_provider.runtime.signals import SLOW_STOP_SECONDS, until_signalled

logger = logging.getLogger(__name__)

DEFAULT_LISTEN = "0.0.0.0:8080"


def parse_listen(text: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 in brackets) → (host, port); argparse turns the ValueError into exit 2."""
    host, separator, port_text = text.rpartition(":")
    if not separator or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]") or "0.0.0.0", int(port_text)  # noqa: S104 - a router serves the network


def add_router_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", help="kubeconfig to use (default: the in-cluster service account)")
    parser.add_argument(
        "--listen",
        type=parse_listen,
        default=parse_listen(DEFAULT_LISTEN),
        metavar="HOST:PORT",
        help=f"where to serve traffic, /-/healthz, /-/status and /-/metrics (default: {DEFAULT_LISTEN})",
    )
    parser.add_argument(
        "--namespace", help="route only the Offloads of this namespace (default: every namespace)"
    )
    parser.add_argument(
        "--connect-timeout", type=float, default=2.0, help="seconds to connect to an endpoint (default: 2)"
    )
    parser.add_argument(
        "--shutdown-grace",
        type=float,
        default=30.0,
        help="seconds requests in flight get to finish when the router stops (default: 30)",
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
    defaults = CheckSettings()
    parser.add_argument(
        "--check-interval",
        type=float,
        default=defaults.interval_seconds,
        metavar="SECONDS",
        help="seconds between the active checks of each away endpoint, which keep an endpoint "
        f"serving while its node is not Ready (default: {defaults.interval_seconds:g})",
    )
    parser.add_argument(
        "--check-timeout",
        type=float,
        default=defaults.timeout_seconds,
        metavar="SECONDS",
        help=f"seconds an active check may take (default: {defaults.timeout_seconds:g})",
    )
    parser.add_argument(
        "--check-healthy-threshold",
        type=int,
        default=defaults.healthy_threshold,
        metavar="N",
        help=f"passes in a row that make an endpoint healthy (default: {defaults.healthy_threshold})",
    )
    parser.add_argument(
        "--check-unhealthy-threshold",
        type=int,
        default=defaults.unhealthy_threshold,
        metavar="N",
        help=f"failures in a row that make an endpoint unhealthy (default: {defaults.unhealthy_threshold})",
    )
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR (default: INFO)")


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


async def serve_router(arguments: argparse.Namespace, stop: asyncio.Event) -> None:
    host, port = arguments.listen
    api = await KubeApi.from_kubeconfig(arguments.kubeconfig, budget=ApiBudget(qps=20, burst=40))
    signing = RequestSigning(
        standard_chain(profile=arguments.aws_profile, credentials_file=arguments.aws_credentials_file)
    )
    router = Router(settings=ProxySettings(connect_timeout=arguments.connect_timeout), signing=signing)
    check_settings = CheckSettings(
        interval_seconds=arguments.check_interval,
        timeout_seconds=arguments.check_timeout,
        healthy_threshold=arguments.check_healthy_threshold,
        unhealthy_threshold=arguments.check_unhealthy_threshold,
    )
    events = EventRecorder(api, host=socket.gethostname(), component="vk-provider-router")
    feed = TableFeed(
        api,
        router.update,
        namespace=arguments.namespace,
        check_settings=check_settings,
        metrics=router.metrics,
        events=events,
    )
    router.check_status = feed.checks.status
    feed_task = asyncio.create_task(feed.run(), name="route-feed")
    events_task = asyncio.create_task(events.run(), name="router-events")
    server = None
    try:
        synced = asyncio.create_task(feed.synced.wait())
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({synced, stopping, feed_task}, return_when=asyncio.FIRST_COMPLETED)
        synced.cancel()
        stopping.cancel()
        if feed_task.done():
            feed_task.result()  # the watches died before loading: raise why
        if stop.is_set():
            return
        server = await start(router, host, port)
        logger.info("router serving on %s:%d with %d routes", host, port, len(router.table.routes))
        await stop.wait()
        logger.info("stopping: no new connections; requests in flight get %gs", arguments.shutdown_grace)
        await drain(server, router, arguments.shutdown_grace)
    finally:
        if server is not None:
            await server.close()
        feed_task.cancel()
        events_task.cancel()
        await asyncio.gather(feed_task, events_task, return_exceptions=True)
        await api.close()


def run_router_command(arguments: argparse.Namespace) -> int:
    logging.basicConfig(
        level=str(arguments.log_level).upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )

    async def main(stop: asyncio.Event) -> None:
        await serve_router(arguments, stop)

    # The drain may rightly take the whole grace period: only a stop that outlasts it is a hang.
    slow_stop_seconds = arguments.shutdown_grace + SLOW_STOP_SECONDS
    try:
        asyncio.run(until_signalled(main, slow_stop_seconds=slow_stop_seconds))
    except OSError as error:
        logger.error("cannot serve on %s:%d: %s", *arguments.listen, error)
        return 1
    return 0
