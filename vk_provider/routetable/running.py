"""The route table's feed as a daemon runs it: the flags that say what it takes on trust and how it
checks away endpoints, and the cluster's watches while inside `watching_cluster`.

Both data planes run it the same way, `vk-provider router` (`vk_provider.router.running`) and
`vk-provider xds` (`vk_provider.xds.command`), so Envoy routes exactly what the built-in router
would.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable

from vk_provider._kube.events import EventRecorder
from vk_provider.kit.apibudget import ApiBudget
from vk_provider.kit.kube import KubeApi
from vk_provider.kit.traffic_signature import SecretLocation, secret_location
from vk_provider.offload.homeslices import ENDPOINTSLICE_CONTROLLER, MANAGED_BY_LABEL, SliceManagers
from vk_provider.routetable.feed import TableFeed
from vk_provider.routetable.health import CheckSettings
from vk_provider.routetable.metrics import FeedMetrics
from vk_provider.routetable.signingscope import SigningScope, sign_for_host
from vk_provider.routetable.table import RouteTable
from vk_provider.runtime.flagaliases import add_deprecated_alias
from vk_provider.runtime.flagtypes import positive_seconds, seconds_with_unit, whole_number


def add_trust_arguments(parser: argparse.ArgumentParser) -> None:
    """What the route tables take on trust (`--sign-for-host`, `--endpoint-slice-manager`,
    `--traffic-key-secret`, `--accept-unsigned-traffic-addresses`): the router's, and the xDS server's
    feed's."""
    parser.add_argument(
        "--traffic-key-secret",
        type=_secret_flag,
        metavar="NAMESPACE/NAME",
        help="the Secret of the key that verifies the seals node daemons put on the traffic addresses "
        "they publish; the nodes must use the same one (default: vk-provider-traffic-key in the pod's "
        "own namespace; outside a pod, in default)",
    )
    parser.add_argument(
        "--accept-unsigned-traffic-addresses",
        action="store_true",
        help="take an away pod's traffic address that carries no seal at all (one that carries a seal "
        "that does not verify is refused still): only while upgrading from a release whose nodes did "
        "not seal, until they have restarted",
    )
    parser.add_argument(
        "--sign-for-host",
        type=_host_flag,
        action="append",
        default=[],
        metavar="HOST",
        help="sign SigV4 requests (service sagemaker) for pods whose traffic address is at HOST too: a "
        "SageMaker VPC endpoint's host name, a stand-in's address; repeat for more (default: only "
        "SageMaker runtime's own hosts, runtime.sagemaker.<region>.amazonaws.com and the like)",
    )
    parser.add_argument(
        "--endpoint-slice-manager",
        action="append",
        default=[],
        metavar="NAME",
        help=f"take home endpoints from EndpointSlices whose {MANAGED_BY_LABEL} label is NAME too; "
        f"repeat for more (default: only {ENDPOINTSLICE_CONTROLLER}, Kubernetes' EndpointSlice "
        "controller, since anyone who may write EndpointSlices can label one with a Service's name)",
    )


def add_check_arguments(parser: argparse.ArgumentParser) -> None:
    """The active checks of away endpoints (`--check-*`): the router's, and the xDS server's feed's."""
    defaults = CheckSettings()
    parser.add_argument(
        "--check-interval-seconds",
        type=positive_seconds,
        default=defaults.interval_seconds,
        metavar="SECONDS",
        help="seconds between the active checks of each away endpoint, which keep an endpoint "
        f"serving while its node is not Ready (default: {defaults.interval_seconds:g})",
    )
    parser.add_argument(
        "--check-timeout-seconds",
        type=positive_seconds,
        default=defaults.timeout_seconds,
        metavar="SECONDS",
        help=f"seconds an active check may take (default: {defaults.timeout_seconds:g})",
    )
    parser.add_argument(
        "--check-healthy-threshold",
        type=whole_number(1),
        default=defaults.healthy_threshold,
        metavar="N",
        help=f"passes in a row that make an endpoint healthy (default: {defaults.healthy_threshold})",
    )
    parser.add_argument(
        "--check-unhealthy-threshold",
        type=whole_number(1),
        default=defaults.unhealthy_threshold,
        metavar="N",
        help=f"failures in a row that make an endpoint unhealthy (default: {defaults.unhealthy_threshold})",
    )
    for old in ("--check-interval", "--check-timeout"):
        add_deprecated_alias(parser, old, f"{old}-seconds", convert=seconds_with_unit)


def check_settings_of(arguments: argparse.Namespace) -> CheckSettings:
    return CheckSettings(
        interval_seconds=arguments.check_interval_seconds,
        timeout_seconds=arguments.check_timeout_seconds,
        healthy_threshold=arguments.check_healthy_threshold,
        unhealthy_threshold=arguments.check_unhealthy_threshold,
    )


def signing_scope_of(arguments: argparse.Namespace) -> SigningScope:
    return SigningScope.with_hosts(arguments.sign_for_host)


def slice_managers_of(arguments: argparse.Namespace) -> SliceManagers:
    return SliceManagers.with_extra(arguments.endpoint_slice_manager)


def _host_flag(text: str) -> str:
    try:
        return sign_for_host(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error


def _secret_flag(text: str) -> SecretLocation:
    try:
        return secret_location(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error


def traffic_key_secret_of(arguments: argparse.Namespace) -> SecretLocation:
    return arguments.traffic_key_secret or secret_location(None)


@contextlib.asynccontextmanager
async def watching_cluster(
    arguments: argparse.Namespace,
    apply: Callable[[RouteTable], None],
    metrics: FeedMetrics | None,
    stop: asyncio.Event,
    *,
    inference_pools: bool = False,
) -> AsyncIterator[TableFeed | None]:
    """The cluster's route tables handed to `apply` while inside; yields the feed once its first
    table is applied, or None when `stop` came first. Raises why, when the watches die before.
    `inference_pools`: mirror InferencePools too (the xDS server's `--inference-pools`)."""
    api = await KubeApi.from_kubeconfig(arguments.kubeconfig, budget=ApiBudget(qps=20, burst=40))
    events = EventRecorder(api, host=socket.gethostname(), component="vk-provider-router")
    feed = TableFeed(
        api,
        apply,
        namespace=arguments.namespace,
        check_settings=check_settings_of(arguments),
        metrics=metrics,
        events=events,
        signing_scope=signing_scope_of(arguments),
        slice_managers=slice_managers_of(arguments),
        traffic_key_secret=traffic_key_secret_of(arguments),
        accept_unsigned=arguments.accept_unsigned_traffic_addresses,
        inference_pools=inference_pools,
    )
    feed_task = asyncio.create_task(feed.run(), name="route-feed")
    events_task = asyncio.create_task(events.run(), name="router-events")
    try:
        synced = asyncio.create_task(feed.synced.wait())
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({synced, stopping, feed_task}, return_when=asyncio.FIRST_COMPLETED)
        synced.cancel()
        stopping.cancel()
        if feed_task.done():
            feed_task.result()  # the watches died before loading: raise why
        yield None if stop.is_set() else feed
    finally:
        feed_task.cancel()
        events_task.cancel()
        await asyncio.gather(feed_task, events_task, return_exceptions=True)
        await api.close()
