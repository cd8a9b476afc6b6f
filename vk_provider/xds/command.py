"""`vk-provider xds`: the cluster's route tables, served over xDS to any number of Envoy replicas.

The tables are the router's: the same watches (Offloads, EndpointSlices, away pods, virtual Nodes) and
the same active checks of away endpoints (`vk_provider.routetable.running.watching_cluster`), so Envoy
routes exactly what the built-in router would. Each table becomes one version of every resource type
(`XdsServer.update`); the server keeps, per connected Envoy, the newest version it has ACKed, and
says at `--admin-listen` which weight that gives each route (`vk_provider.xds.status`). Envoys
connect over mutual TLS (`vk_provider.xds.authentication`); plaintext only with --allow-plaintext.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Callable

from vk_provider.kit.grpctls import ServerTls
from vk_provider.kit.kubeconfigs import daemon_kubeconfig
from vk_provider.routetable.running import add_check_arguments, add_trust_arguments, watching_cluster
from vk_provider.routetable.table import RouteTable
from vk_provider.runtime import eventloop
from vk_provider.runtime.flagaliases import add_deprecated_alias
from vk_provider.runtime.flagtypes import host_port, port
from vk_provider.runtime.logsetup import add_log_arguments, configure_logging
from vk_provider.runtime.signals import until_signalled
from vk_provider.xds.authentication import (
    AuthenticationArgumentError,
    add_authentication_arguments,
    server_tls,
)
from vk_provider.xds.clusters import UpstreamTrust
from vk_provider.xds.resources import EnvoySettings
from vk_provider.xds.running import serve_xds

logger = logging.getLogger(__name__)

DEFAULT_LISTEN = "0.0.0.0:18000"
DEFAULT_ADMIN_LISTEN = "0.0.0.0:18001"


def add_xds_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig",
        help="kubeconfig to use (default: $KUBECONFIG, else ~/.kube/config, else the pod's ServiceAccount)",
    )
    parser.add_argument(
        "--listen",
        type=host_port,
        default=host_port(DEFAULT_LISTEN),
        metavar="HOST:PORT",
        help=f"where Envoys connect for aggregated xDS over gRPC (default: {DEFAULT_LISTEN})",
    )
    add_authentication_arguments(parser)
    parser.add_argument(
        "--admin-listen",
        type=host_port,
        default=host_port(DEFAULT_ADMIN_LISTEN),
        metavar="HOST:PORT",
        help="where to serve /-/status (the weight each Envoy has applied, for the migration controller), "
        f"/-/metrics and /-/healthz over HTTP (default: {DEFAULT_ADMIN_LISTEN})",
    )
    parser.add_argument(
        "--envoy-port",
        type=port,
        default=8080,
        metavar="PORT",
        help="the port of the listener the Envoys serve traffic on (default: 8080)",
    )
    parser.add_argument(
        "--namespace", help="route only the Offloads of this namespace (default: every namespace)"
    )
    parser.add_argument(
        "--upstream-ca-file",
        metavar="FILE",
        help="CA bundle Envoy trusts for TLS endpoints (default: the system's roots)",
    )
    parser.add_argument(
        "--inference-pools",
        action="store_true",
        help="watch InferencePools (their CRD must be installed) for the Offloads of the inferencepool "
        "data plane: each home request asks the pool's endpoint picker which pod to go to",
    )
    add_trust_arguments(parser)
    add_check_arguments(parser)
    add_log_arguments(parser)
    add_deprecated_alias(parser, "--status-listen", "--admin-listen")


async def serve(arguments: argparse.Namespace, stop: asyncio.Event, tls: ServerTls | None) -> None:
    host, port = arguments.listen
    settings = EnvoySettings(
        listener_port=arguments.envoy_port, trust=UpstreamTrust(arguments.upstream_ca_file)
    )

    async def tables(apply: Callable[[RouteTable], None]) -> None:
        # No feed metrics: the xDS server's /-/metrics are its own series (`vk_provider.xds.status`);
        # ignored objects and active checks are counted in the router's.
        async with watching_cluster(
            arguments, apply, None, stop, inference_pools=arguments.inference_pools
        ) as feed:
            if feed is not None:
                logger.info(
                    "serving xDS on %s:%d; Envoy listeners on port %d", host, port, arguments.envoy_port
                )
                await stop.wait()

    serving = asyncio.create_task(
        serve_xds(tables, host, port, settings=settings, tls=tls, status=arguments.admin_listen),
        name="xds",
    )
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if serving.done():
            serving.result()  # the server or the watches failed: raise why
    finally:
        stopping.cancel()
        serving.cancel()
        await asyncio.gather(serving, stopping, return_exceptions=True)


def run_xds_command(arguments: argparse.Namespace) -> int:
    configure_logging(arguments.log_level, arguments.log_format)
    try:
        tls = server_tls(arguments)
    except AuthenticationArgumentError as error:
        print(f"vk-provider xds: error: {error}", file=sys.stderr)
        return 2
    logger.info("event loop: %s", eventloop.loop_name())
    arguments.kubeconfig = daemon_kubeconfig(arguments.kubeconfig)  # KubeconfigError: one line, exit 1
    try:
        eventloop.run(until_signalled(lambda stop: serve(arguments, stop, tls)))
    except OSError as error:
        logger.error(
            "cannot serve xDS on %s:%d and its status on %s:%d: %s",
            *arguments.listen,
            *arguments.admin_listen,
            error,
        )
        return 1
    return 0
