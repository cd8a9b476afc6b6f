"""Argument parsing for the migration commands, shared by `kubectl offload` and `vk-provider migrate`.

Everything that can be checked without a cluster (steps, durations, directions) is checked here, so a
typo exits 2 with the reason before any request is sent.
"""

from __future__ import annotations

import argparse
import re

from vk_provider.offload.plan import validate_steps
from vk_provider.offloadcli.controllerlease import DEFAULT_LEASE, parse_lease
from vk_provider.offloadcli.dryrun import CLIENT, MODES, add_dry_run_flag, parse_dry_run
from vk_provider.offloadcli.leftovers import VIRTUAL_NODES
from vk_provider.offloadcli.outputs import OUTPUT_HELP, OUTPUTS

MAX_INTERVAL_SECONDS = 2**31 - 1
_DURATION = re.compile(r"(?:(?P<h>\d+)h)?(?:(?P<m>\d+)m)?(?:(?P<s>\d+)s)?")
COMMANDS = ("list", "status", "flip", "pause", "resume", "abort", "promote", "auto", "policy", "uninstall")
DEFAULT_UNINSTALL_TIMEOUT_SECONDS = 600


def parse_steps(text: str) -> tuple[int, ...]:
    """`10,25,50,100` as a tuple of weights, checked like the CRD checks them."""
    parts = [part.strip() for part in text.split(",")]
    try:
        steps = [int(part) for part in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of whole numbers (e.g. 10,25,50,100)"
        ) from None
    try:
        return validate_steps(steps)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def parse_duration(text: str) -> int:
    """`30s`, `2m`, `1h30m` or plain seconds (`90`) as whole seconds, at least one."""
    stripped = text.strip()
    seconds: int | None = None
    if stripped.isdigit():
        seconds = int(stripped)
    else:
        match = _DURATION.fullmatch(stripped)
        if stripped and match is not None:
            seconds = sum(
                int(match[unit] or 0) * factor for unit, factor in (("h", 3600), ("m", 60), ("s", 1))
            )
    if seconds is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 30s, 2m, 1h30m or 90")
    if not 1 <= seconds <= MAX_INTERVAL_SECONDS:
        raise argparse.ArgumentTypeError(f"{text!r} must be between 1 second and {MAX_INTERVAL_SECONDS}s")
    return seconds


def parse_hold(text: str) -> int:
    """`--hold 2h`, `90m`, `1h30m` (or seconds) as whole seconds: how long the policy keeps its hands off."""
    try:
        return parse_duration(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a hold duration like 2h, 90m or 1h30m (at least 1s, at most "
            f"{MAX_INTERVAL_SECONDS}s); without --hold the hold lasts until the next flip by a person"
        ) from None


def parse_timeout(text: str) -> int:
    """`--timeout 10m` (or 1h, 90s, 600) as whole seconds."""
    try:
        return parse_duration(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a timeout like 10m, 1h30m or 600") from None


def parse_lease_flag(text: str) -> tuple[str, str]:
    try:
        return parse_lease(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


AFTER_WINS = "; also accepted before the command, where this one wins over it"


def _connection_flags() -> argparse.ArgumentParser:
    connection = argparse.ArgumentParser(add_help=False)
    connection.add_argument(
        "--kubeconfig", help=f"kubeconfig file (default: $KUBECONFIG or ~/.kube/config{AFTER_WINS})"
    )
    connection.add_argument(
        "--context", help=f"the kubeconfig context to use (default: its current context{AFTER_WINS})"
    )
    return connection


def _common_flags() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False, parents=[_connection_flags()])
    common.add_argument(
        "-n",
        "--namespace",
        help=f"the Offload's namespace (default: the context's namespace or default{AFTER_WINS})",
    )
    return common


def _output_flag() -> argparse.ArgumentParser:
    output = argparse.ArgumentParser(add_help=False)
    output.add_argument("-o", "--output", choices=OUTPUTS, help=OUTPUT_HELP)
    return output


def add_migration_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add list, status, flip, pause, resume, abort, promote, auto and policy; each sets
    `migration_command` (`policy list` and `policy status` for the policy's two)."""
    common = _common_flags()
    output = _output_flag()

    def add(name: str, help_text: str, *, with_output: bool = False) -> argparse.ArgumentParser:
        parents = [common, output] if with_output else [common]
        parser = subparsers.add_parser(name, help=help_text, description=help_text, parents=parents)
        parser.set_defaults(migration_command=name)
        return parser

    listing = add("list", "list the Offloads with their placement, phase and away weight", with_output=True)
    listing.add_argument(
        "-A", "--all-namespaces", action="store_true", help="list Offloads in every namespace"
    )

    status = add("status", "show one Offload in detail", with_output=True)
    status.add_argument("name", metavar="NAME")
    status.add_argument(
        "-w",
        "--watch",
        action="store_true",
        help="re-render on each change until interrupted (Ctrl-C), whether a migration runs or not",
    )

    flip = add(
        "flip",
        "start a migration: set the desired placement (optionally with steps and an interval for this "
        "migration alone)",
    )
    flip.add_argument("name", metavar="NAME")
    flip.add_argument("--to", required=True, choices=("home", "away"), help="the placement to move to")
    flip.add_argument(
        "--steps",
        type=parse_steps,
        metavar="W1,W2,...",
        help="weights on the receiving side, each 1..100, strictly increasing, ending at 100",
    )
    flip.add_argument(
        "--interval", type=parse_duration, metavar="DURATION", help="time per step, e.g. 30s, 2m, 90"
    )
    flip.add_argument(
        "--save",
        action="store_true",
        help="write --steps and --interval into the Offload's spec.strategy, for every later migration "
        "too (an OffloadPolicy's included); without it they apply to the migration this flip starts only",
    )
    flip.add_argument(
        "--hold",
        type=parse_hold,
        metavar="DURATION",
        help="keep every OffloadPolicy from moving it for this long, e.g. 2h, 90m, 1h30m "
        "(default: until the next flip by a person)",
    )
    flip.add_argument(
        "--wait",
        action="store_true",
        help="wait for the migration to end: exit 0 on Succeeded, 1 on RolledBack or Failed",
    )
    flip.add_argument(
        "--timeout",
        type=parse_timeout,
        metavar="DURATION",
        help="with --wait: give up waiting after this long, e.g. 10m, 1h30m, 600 (exit 1, saying where the "
        "migration is; it goes on); default: wait as long as it takes",
    )
    add_dry_run_flag(flip)

    for name, help_text in (
        ("pause", "pause the running migration at its current weight"),
        ("resume", "resume a paused migration"),
        ("abort", "end the running migration back at its starting placement"),
        ("promote", "skip the remaining steps of the running migration"),
    ):
        simple = add(name, help_text)
        simple.add_argument("name", metavar="NAME")
        add_dry_run_flag(simple)

    auto = add("auto", "let OffloadPolicies move the Offload (on, which also ends a hold) or not (off)")
    auto.add_argument("state", choices=("on", "off"), help="on: policies may move it; off: they leave it")
    auto.add_argument("name", metavar="NAME")
    add_dry_run_flag(auto)

    _add_policy_commands(subparsers, output)
    _add_uninstall_command(subparsers)


def _add_policy_commands(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser], output: argparse.ArgumentParser
) -> None:
    """`policy list` and `policy status NAME`: OffloadPolicies are cluster-scoped, so no -n."""
    policy = subparsers.add_parser(
        "policy",
        help="show the OffloadPolicies: training demand, the home GPU pool and what they decided",
        description="Show the OffloadPolicies (cluster-scoped): list them, or one in detail.",
    )
    commands = policy.add_subparsers(dest="policy_command", required=True, metavar="COMMAND")
    parents = [_connection_flags(), output]
    listing = commands.add_parser(
        "list", help="list the OffloadPolicies", description="List the OffloadPolicies.", parents=parents
    )
    listing.set_defaults(migration_command="policy list", namespace=None)
    status = commands.add_parser(
        "status",
        help="show one OffloadPolicy in detail",
        description="Show one OffloadPolicy: demand per gang, the home pool's GPUs, its Offloads, "
        "its last decisions and its conditions.",
        parents=parents,
    )
    status.set_defaults(migration_command="policy status", namespace=None)
    status.add_argument("name", metavar="NAME")
    status.add_argument(
        "-w", "--watch", action="store_true", help="re-render on each change until interrupted (Ctrl-C)"
    )


def _add_uninstall_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    help_text = (
        "before removing the install: bring every Offload home, delete it, and wait until no workload "
        "is left at a provider (the controller and the nodes must still run)"
    )
    uninstall = subparsers.add_parser(
        "uninstall",
        help=help_text,
        description=help_text[0].upper() + help_text[1:] + ". Exits 0 once nothing is left, 1 with a "
        "list of what is left otherwise. It does not remove the controller: do that after.",
        parents=[_connection_flags()],
    )
    uninstall.set_defaults(migration_command="uninstall")
    uninstall.add_argument(
        "-n",
        "--namespace",
        help=f"only the Offloads and pods of this namespace (default: every namespace{AFTER_WINS})",
    )
    uninstall.add_argument(
        "--timeout",
        type=parse_timeout,
        default=DEFAULT_UNINSTALL_TIMEOUT_SECONDS,
        metavar="DURATION",
        help="give up after this long, listing what is left, e.g. 10m, 1h (default: 10m)",
    )
    uninstall.add_argument(
        "--dry-run",
        nargs="?",
        const=CLIENT,
        type=parse_dry_run,
        choices=MODES,
        metavar="client|server",
        help="list what it would do, and change nothing; server: the apiserver also checks each Offload's "
        "patch home and deletion (a bare --dry-run is client)",
    )
    uninstall.add_argument(
        "--force",
        action="store_true",
        help="only when the controller does not run: remove its finalizers without bringing Offloads "
        "home, and delete their away Deployments (traffic still served away stops being routed)",
    )
    uninstall.add_argument(
        "--controller-lease",
        type=parse_lease_flag,
        default=parse_lease(DEFAULT_LEASE),
        metavar="NAMESPACE/NAME",
        help=f"the controller's leader Lease, which says whether it runs (default: {DEFAULT_LEASE}; "
        "the chart's is in the release's namespace)",
    )
    uninstall.add_argument(
        "--virtual-nodes",
        default=VIRTUAL_NODES,
        metavar="SELECTOR",
        help=f"the label selector of the nodes whose pods are provider workloads (default: {VIRTUAL_NODES})",
    )
