"""`kubectl offload version`: this client's version and, when the cluster answers, the controller's.

The controller publishes its version on its leader Lease (`VERSION_ANNOTATION`): a Lease is readable
with ordinary rights from wherever kubectl works, where the controller's /metrics usually is not. A
cluster that cannot be read is an answer too ("unreachable" and why), not a failure: the client's
version is what a person asking for versions needs first, and a bug report wants both lines anyway.
"""

from __future__ import annotations

import argparse
import asyncio

from vk_provider import __version__
from vk_provider.kit.kube import KubeApi, KubeApiError, resource_path
from vk_provider.offload.names import CONTROLLER_LEASE, CONTROLLER_NAMESPACE, VERSION_ANNOTATION
from vk_provider.offloadcli import connection
from vk_provider.offloadcli.arguments import parse_timeout

DEFAULT_TIMEOUT_SECONDS = 10


def add_version_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    version = subparsers.add_parser(
        "version",
        help="print this client's version and the controller's",
        description="Print this client's version and, when the cluster can be read, the version of the "
        "controller that leads (from its leader Lease).",
    )
    version.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    version.add_argument("--context", help="the kubeconfig context to use (default: its current context)")
    version.add_argument(
        "--controller-namespace",
        default=CONTROLLER_NAMESPACE,
        help="the controller's namespace (default: %(default)s)",
    )
    version.add_argument(
        "--lease-name", default=CONTROLLER_LEASE, help="the controller's leader Lease (default: %(default)s)"
    )
    version.add_argument(
        "--request-timeout",
        type=parse_timeout,
        default=DEFAULT_TIMEOUT_SECONDS,
        metavar="DURATION",
        help="give up on the cluster after this long, e.g. 5s, 1m or 30 (default: %(default)ss)",
    )
    version.set_defaults(run_command=run_version)


def describe_lease(lease: dict[str, object], where: str) -> str:
    """The controller line's text for the Lease `lease` (at `where`, for the messages)."""
    metadata = lease.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    version = annotations.get(VERSION_ANNOTATION) if isinstance(annotations, dict) else None
    if not version:
        return f"unknown (the Lease {where} carries no {VERSION_ANNOTATION} annotation)"
    spec = lease.get("spec")
    holder = spec.get("holderIdentity") if isinstance(spec, dict) else None
    if holder:
        return f"{version} (leader {holder})"
    return f"{version} (no leader now: the last one ran it)"


async def controller_version(api: KubeApi, namespace: str, lease_name: str) -> str:
    """The controller line's text, or raise what kept the Lease from being read."""
    path = resource_path("coordination.k8s.io/v1", "leases", namespace=namespace, name=lease_name)
    return describe_lease(await api.get(path), f"{namespace}/{lease_name}")


async def _read(arguments: argparse.Namespace, target: connection.Target) -> str:
    async with asyncio.timeout(arguments.request_timeout):
        api = await connection.connect(target)
        try:
            return await controller_version(api, arguments.controller_namespace, arguments.lease_name)
        finally:
            await api.close()


def unreachable_reason(
    error: BaseException, namespace: str, lease_name: str, server: str | None = None
) -> str:
    if isinstance(error, KubeApiError) and error.not_found:
        return f"no Lease {namespace}/{lease_name}: is the controller installed and running?"
    if isinstance(error, KubeApiError):
        return f"the apiserver answered {error.status} {error.reason}: {error.message}"
    if isinstance(error, TimeoutError):
        return "no answer from the apiserver in time"
    if isinstance(error, connection.ConfigurationError):
        return str(error)
    return connection.unreachable_message(error, server)


def run_version(arguments: argparse.Namespace) -> int:
    print(f"client: {__version__}")
    server = None
    try:
        target = connection.resolve(arguments.kubeconfig, arguments.context, None)
        server = target.server
        controller = asyncio.run(_read(arguments, target))
    except (connection.ConfigurationError, KubeApiError, *connection.UNREACHABLE) as error:
        reason = unreachable_reason(error, arguments.controller_namespace, arguments.lease_name, server)
        controller = f"unreachable ({reason})"
    print(f"controller: {controller}")
    return 0
