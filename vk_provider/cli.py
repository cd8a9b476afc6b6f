"""Command lines: `vk-provider` and the kubectl plugin `kubectl-offload`.

Parsing only: each subcommand hands its arguments to the module that does the work.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from vk_provider import __version__
from vk_provider.controller.running import add_controller_arguments, run_controller_command
from vk_provider.devcluster import cluster, commands, demorun
from vk_provider.node.running import run_node_command
from vk_provider.node.settings import FIELDS as SETTINGS_FIELDS
from vk_provider.node.settings import SettingsError, load_settings
from vk_provider.offloadcli import commands as migration
from vk_provider.offloadcli.arguments import add_migration_commands
from vk_provider.router.running import add_router_arguments, run_router_command


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than zero")
    return value


def _add_dev_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    dev = subparsers.add_parser(
        "dev",
        help="a real local Kubernetes control plane for development and tests",
        description=(
            "Build (once) and run a real control plane, etcd, kube-apiserver, kube-controller-manager and "
            "kube-scheduler, on loopback with generated certificates."
        ),
    )
    dev_commands = dev.add_subparsers(dest="dev_command", required=True, metavar="COMMAND")

    def with_dir(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        parser.add_argument(
            "--dir",
            type=Path,
            default=None,
            help="the cluster's folder (default: $VK_PROVIDER_DEV_DIR or ~/.local/state/vk-provider/dev)",
        )
        return parser

    up = with_dir(dev_commands.add_parser("up", help="start the control plane (building it first if needed)"))
    up.add_argument(
        "--node-monitor-grace-period",
        type=_positive_int,
        default=40,
        metavar="SECONDS",
        help="seconds without a node heartbeat before it is marked Unknown (default: 40)",
    )
    up.add_argument(
        "--default-toleration-seconds",
        type=_positive_int,
        default=300,
        metavar="SECONDS",
        help="not-ready/unreachable toleration added to every pod: seconds before eviction (default: 300)",
    )
    up.add_argument(
        "--no-local-node",
        action="store_true",
        help="do not start the local-gpu virtual node (benchmarks and tests bring their own nodes)",
    )
    up.add_argument(
        "--no-demo",
        action="store_true",
        help="only the plane and the local-gpu node: no burst node, example service, router or controller",
    )
    up.add_argument(
        "--burst-provider",
        choices=cluster.BURST_PROVIDERS,
        default="local",
        help="what backs the burst-gpu node: another local node (default), or a runpod node on the "
        "offline RunPod stand-in, started as one more component (no account needed)",
    )
    up.add_argument(
        "--start-timeout",
        type=_positive_int,
        default=180,
        metavar="SECONDS",
        help="how long each component may take to become healthy (default: 180)",
    )
    with_dir(
        dev_commands.add_parser(
            "demo", help="flip the example service out to the burst node and back under load (after `up`)"
        )
    )
    with_dir(dev_commands.add_parser("down", help="stop the control plane (logs stay in its folder)"))
    with_dir(dev_commands.add_parser("status", help="show each component and whether the apiserver is ready"))
    with_dir(dev_commands.add_parser("kubeconfig", help="print the path of the admin kubeconfig"))
    with_dir(
        dev_commands.add_parser(
            "env",
            help='print shell exports for KUBECONFIG and the built kubectl: eval "$(vk-provider dev env)"',
        )
    )
    kubectl = with_dir(
        dev_commands.add_parser(
            "kubectl", help="run the plane's own kubectl against it: dev kubectl -- get nodes"
        )
    )
    kubectl.add_argument("arguments", nargs=argparse.REMAINDER, help="arguments for kubectl")
    build = dev_commands.add_parser(
        "build", help="build the control-plane binaries if they are missing or corrupt (cached)"
    )
    mode = build.add_mutually_exclusive_group()
    mode.add_argument("--background", action="store_true", help="build detached, logging to the cache folder")
    mode.add_argument(
        "--no-wait", action="store_true", help="fail at once if another build is under way instead of waiting"
    )


def _add_node_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    node = subparsers.add_parser(
        "node",
        help="run a virtual node backed by a provider",
        description=(
            "Register a virtual Node and run the pods bound to it at a provider. Every option can also be "
            "set in the YAML file given with --config (same name, with underscores) or in the environment "
            "as VK_PROVIDER_<NAME> (e.g. VK_PROVIDER_NODE_NAME); flags win over the environment, which "
            "wins over the file."
        ),
    )
    node.add_argument("--config", type=Path, help="YAML file with any of the settings below")
    node.add_argument("--kubeconfig", help="kubeconfig to use (default: the in-cluster service account)")
    node.add_argument("--node-name", help="the Node's name (default: vk-provider)")
    node.add_argument(
        "--provider", help="provider name from the vk_provider.providers entry points (default: mock)"
    )
    node.add_argument(
        "--provider-config",
        help="YAML file with the provider's own settings (or provider_config: in --config)",
    )
    node.add_argument(
        "--taint",
        help="KEY=VALUE:EFFECT (default: virtual-kubelet.io/provider=<provider>:NoSchedule)",
    )
    node.add_argument(
        "--no-taint", action="store_true", default=None, help="register the node without a taint"
    )
    node.add_argument(
        "--label", action="append", dest="labels", metavar="KEY=VALUE", help="extra node label (repeatable)"
    )
    node.add_argument(
        "--capacity",
        action="append",
        metavar="RESOURCE=QUANTITY",
        help="capacity (= allocatable), repeatable: cpu, memory, pods, nvidia.com/gpu, any extended resource",
    )
    node.add_argument(
        "--kubelet-port", type=int, help="port of the kubelet API, published on the Node (default: 10250)"
    )
    node.add_argument(
        "--address",
        action="append",
        dest="addresses",
        metavar="IP",
        help="InternalIP of the node, repeatable; the first is every pod's hostIP (default: 127.0.0.1)",
    )
    node.add_argument(
        "--state-dir", help="folder for the provider's bookkeeping (default: /var/lib/vk-provider)"
    )
    node.add_argument("--pod-workers", type=int, help="pods reconciled concurrently (default: 20)")
    node.add_argument("--log-level", help="DEBUG, INFO, WARNING or ERROR (default: INFO)")
    node.add_argument("--api-qps", help="requests a second to the apiserver, watches excluded (default: 50)")
    node.add_argument("--api-burst", help="burst above --api-qps (default: 100)")
    node.add_argument("--operating-system", help="kubernetes.io/os label and nodeInfo (default: linux)")
    node.add_argument("--lease-duration-seconds", help="Lease duration (default: 40)")
    node.add_argument("--lease-renew-interval-seconds", help="seconds between Lease renewals (default: 10)")
    node.add_argument(
        "--node-status-interval-seconds", help="seconds between node status updates (default: 60)"
    )
    node.add_argument(
        "--health-check-interval-seconds", help="seconds between provider health checks (default: 10)"
    )
    node.add_argument(
        "--status-poll-interval-seconds",
        help="seconds between pod status polls, for providers that cannot push (default: 5)",
    )
    node.add_argument("--retry-initial-seconds", help="first retry delay of a failing pod (default: 1)")
    node.add_argument("--retry-max-seconds", help="cap of a failing pod's retry delay (default: 60)")
    node.add_argument(
        "--orphan-sweep-interval-seconds", help="seconds between sweeps for provider orphans (default: 30)"
    )
    node.add_argument("--kubelet-bind-address", help="address the kubelet API listens on (default: 0.0.0.0)")
    node.add_argument(
        "--kubelet-serving-cert-file",
        help="serve this certificate (with --kubelet-serving-key-file) instead of requesting one by CSR",
    )
    node.add_argument("--kubelet-serving-key-file", help="key of --kubelet-serving-cert-file")
    node.add_argument(
        "--kubelet-client-ca-file",
        help="CA for client certificates (default: the CA the node's kubeconfig trusts)",
    )
    node.add_argument(
        "--kubelet-csr-self-approve",
        action="store_true",
        default=None,
        help="approve our own kubelet-serving CSR (needs the approve RBAC in manifests/)",
    )
    node.add_argument(
        "--insecure-kubelet-api-allow-all",
        action="store_true",
        default=None,
        help="development only: no authentication or authorization on the kubelet API",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vk-provider",
        description="A virtual-kubelet provider that offloads inference to external GPU providers.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_node_command(subparsers)
    _add_dev_commands(subparsers)
    _add_migrate_command(subparsers)
    add_router_arguments(
        subparsers.add_parser(
            "router",
            help="route each Offload's traffic between home and away by its weight",
            description="Serve the routes the cluster's Offloads describe (several replicas may run).",
        )
    )
    add_controller_arguments(
        subparsers.add_parser(
            "controller",
            help="run the migration controller that moves Offloads between home and away",
            description=(
                "Reconcile every Offload: scale the receiving side, shift the weight step by step "
                "behind the health gates, and scale the drained side to 0. Replicas elect a leader "
                "through a Lease."
            ),
        )
    )
    return parser


def _add_migrate_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    migrate = subparsers.add_parser(
        "migrate",
        help="move inference between home and away: the same commands as `kubectl offload`",
        description="List, inspect, flip, pause, resume, abort and promote Offload migrations.",
    )
    add_migration_commands(migrate.add_subparsers(dest="migration_command", required=True, metavar="COMMAND"))


def _run_dev(arguments: argparse.Namespace) -> int:
    command: str = arguments.dev_command
    if command == "build":
        return commands.build(background=arguments.background, wait=not arguments.no_wait)
    directory: Path = arguments.dir or cluster.default_directory()
    if command == "up":
        settings = cluster.ClusterSettings(
            directory=directory,
            node_monitor_grace_period_seconds=arguments.node_monitor_grace_period,
            default_toleration_seconds=arguments.default_toleration_seconds,
            start_timeout_seconds=arguments.start_timeout,
            local_node=not arguments.no_local_node,
            demo=not arguments.no_demo,
            burst_provider=arguments.burst_provider,
        )
        return commands.up(settings)
    if command == "demo":
        return demorun.run(directory)
    if command == "kubectl":
        passed: list[str] = arguments.arguments
        return commands.kubectl(directory, passed[1:] if passed[:1] == ["--"] else passed)
    by_directory = {
        "down": commands.down,
        "status": commands.status,
        "kubeconfig": commands.kubeconfig,
        "env": commands.env,
    }
    return by_directory[command](directory)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    arguments = parser.parse_args(argv)
    if arguments.command == "dev":
        return _run_dev(arguments)
    if arguments.command == "migrate":
        return migration.run(arguments)
    if arguments.command == "router":
        return run_router_command(arguments)
    if arguments.command == "controller":
        return run_controller_command(arguments)
    if arguments.command == "node":
        flags = {name: getattr(arguments, name) for name in SETTINGS_FIELDS if hasattr(arguments, name)}
        try:
            settings = load_settings(config_file=arguments.config, flags=flags)
        except SettingsError as error:
            parser.exit(2, f"vk-provider node: error: {error}\n")
        return run_node_command(settings)
    raise AssertionError(f"unhandled command {arguments.command!r}")


def build_offload_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubectl offload",
        description=(
            "Move inference between home GPU nodes and external GPU providers (kubectl plugin): "
            "list, inspect, flip, pause, resume, abort and promote Offload migrations; `dev` runs the "
            "development cluster, the same as `vk-provider dev`."
        ),
    )
    parser.add_argument("--version", action="version", version=f"kubectl-offload {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_migration_commands(subparsers)
    _add_dev_commands(subparsers)
    return parser


def offload_main(argv: Sequence[str] | None = None) -> int:
    arguments = build_offload_parser().parse_args(argv)
    if arguments.command == "dev":
        return _run_dev(arguments)
    if getattr(arguments, "migration_command", None):
        return migration.run(arguments)
    raise AssertionError(f"unhandled command {arguments.command!r}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
