"""Command lines: `vk-provider` and the kubectl plugin `kubectl-offload`.

Parsing only: each subcommand hands its arguments to the module that does the work.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from vk_provider import __version__
from vk_provider.devcluster import cluster, commands


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
        "--start-timeout",
        type=_positive_int,
        default=180,
        metavar="SECONDS",
        help="how long each component may take to become healthy (default: 180)",
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vk-provider",
        description="A virtual-kubelet provider that offloads inference to external GPU providers.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_dev_commands(subparsers)
    return parser


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
        )
        return commands.up(settings)
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
    arguments = build_parser().parse_args(argv)
    if arguments.command == "dev":
        return _run_dev(arguments)
    raise AssertionError(f"unhandled command {arguments.command!r}")


def build_offload_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubectl offload",
        description=(
            "Move inference between home GPU nodes and external GPU providers (kubectl plugin). "
            "The migration commands arrive with the Offload resource; today the plugin offers the "
            "development cluster commands, the same as `vk-provider dev`."
        ),
    )
    parser.add_argument("--version", action="version", version=f"kubectl-offload {__version__}")
    _add_dev_commands(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    return parser


def offload_main(argv: Sequence[str] | None = None) -> int:
    arguments = build_offload_parser().parse_args(argv)
    if arguments.command == "dev":
        return _run_dev(arguments)
    raise AssertionError(f"unhandled command {arguments.command!r}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
