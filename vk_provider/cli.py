"""Command lines: `vk-provider` and the kubectl plugin `kubectl-offload`.

Parsing only: each subcommand hands its arguments to the module that does the work.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from vk_provider import __version__
from vk_provider.kit.kubeconfigs import KubeconfigError, daemon_kubeconfig
from vk_provider.kit.kubeversions import SUPPORTED_RANGE
from vk_provider.node.settings import FIELDS as SETTINGS_FIELDS
from vk_provider.node.settings import SettingsError, load_settings, load_yaml_file
from vk_provider.offloadcli.arguments import add_migration_commands
from vk_provider.offloadcli.completion import add_completion_command
from vk_provider.offloadcli.globalflags import add_global_flags, merge_global_flags
from vk_provider.offloadcli.version import add_version_command
from vk_provider.runtime.flagaliases import add_deprecated_alias
from vk_provider.runtime.flagenvironment import read_environment
from vk_provider.runtime.helpformat import DefaultsShown
from vk_provider.runtime.logsetup import add_log_arguments, configure_logging

ENVIRONMENT_NOTE = (
    "Every option can also be set in the environment as VK_PROVIDER_<OPTION> (the long option in upper "
    "case, dashes as underscores: VK_PROVIDER_LOG_LEVEL for --log-level); the command line wins."
)

COMMANDS_GROUP = "vk_provider.commands"
"""Entry points that add subcommands: each is `register(subparsers)`, which adds its parser and sets
`run_command` (arguments -> exit code) as a default. The development tools add `dev` this way, so the
product's command line never imports them and a production install has no `dev` at all."""


def versioned_parser(program: str) -> type[argparse.ArgumentParser]:
    """An ArgumentParser class whose every instance answers `--version` with `<program> <version>`.

    Subparsers are made with their parent's class (argparse's `add_subparsers` default), so the root
    parser of this class gives every subcommand at every depth, installed ones such as `dev` included,
    its `--version` without each command adding it: an operator can ask any command line they have at
    hand, `vk-provider router --version` in a container's args as well as the top-level one."""

    class VersionedParser(argparse.ArgumentParser):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.add_argument("--version", action="version", version=f"{program} {__version__}")

        def error(self, message: str) -> NoReturn:
            # One line that names the problem: a daemon's usage runs to a screenful, which would bury
            # it (`--help` shows it on demand).
            self.exit(2, f"{self.prog}: error: {message}\n")

    return VersionedParser


def _add_installed_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for entry_point in sorted(importlib.metadata.entry_points(group=COMMANDS_GROUP), key=lambda e: e.name):
        register: Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None] = entry_point.load()
        register(subparsers)


def _add_node_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    node = subparsers.add_parser(
        "node",
        help="run a virtual node backed by a provider",
        description=(
            "Register a virtual Node and run the pods bound to it at a provider. Every option can also be "
            "set in the YAML file given with --config (same name, with underscores) or in the environment "
            "as VK_PROVIDER_<NAME> (e.g. VK_PROVIDER_NODE_NAME); flags win over the environment, which "
            "wins over the file. "
            f"Supported clusters: Kubernetes {SUPPORTED_RANGE}; on an older minor than a feature needs, the "
            "node says at start what it does without it."
        ),
        formatter_class=DefaultsShown,
    )
    node.add_argument("--config", type=Path, help="YAML file with any of the settings below (default: none)")
    node.add_argument(
        "--kubeconfig",
        help="kubeconfig to use (default: $KUBECONFIG, else ~/.kube/config, else the pod's ServiceAccount)",
    )
    node.add_argument("--node-name", help="the Node's name (default: vk-provider)")
    node.add_argument(
        "--provider", help="provider name from the vk_provider.providers entry points (default: mock)"
    )
    node.add_argument(
        "--provider-config",
        help="YAML file with the provider's own settings (or provider_config: in --config) (default: none)",
    )
    node.add_argument(
        "--taint",
        help="KEY=VALUE:EFFECT (default: vk-provider.dev/virtual-node=<provider>:NoSchedule, which the "
        "Offloads' away pods tolerate)",
    )
    node.add_argument(
        "--no-taint",
        action="store_true",
        default=None,
        help="register the node without a taint (default: off, tainted as --taint says)",
    )
    node.add_argument(
        "--namespaces",
        action="append",
        metavar="NS[,NS...]",
        help="serve only the pods of these namespaces (repeatable), watching pods and Services there and "
        "never cluster-wide, so the node's RBAC can be granted in them alone "
        "(manifests/components/namespaced). A pod of another namespace bound to this node is never seen "
        "and stays Pending until deleted; the admission policy of manifests/examples/namespaced-node "
        "refuses such a binding (default: every namespace)",
    )
    node.add_argument(
        "--label",
        action="append",
        dest="labels",
        metavar="KEY=VALUE",
        help="extra node label, repeatable (default: none)",
    )
    node.add_argument(
        "--capacity",
        action="append",
        metavar="RESOURCE=QUANTITY",
        help="capacity (= allocatable), repeatable: cpu, memory, pods, nvidia.com/gpu, any extended resource "
        "(default: cpu=100, memory=512Gi, pods=1000)",
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
    node.add_argument(
        "--max-provider-pods",
        help="most pods the node may run at its provider; more are refused, OutOfBudget (default: none)",
    )
    node.add_argument(
        "--max-spend-per-hour",
        help="most US dollars an hour the node's pods may cost at list price; beyond, OutOfBudget "
        "(default: none)",
    )
    node.add_argument(
        "--allow-unpriced-pods",
        type=str,
        nargs="?",
        const="true",
        metavar="true|false",
        help="under --max-spend-per-hour, admit pods whose price is not known, counted as 0; false: refuse "
        "them, OutOfBudget (default: false)",
    )
    node.add_argument(
        "--concurrent-pod-reconciles", metavar="N", help="pods reconciled concurrently (default: 20)"
    )
    add_deprecated_alias(node, "--pod-workers", "--concurrent-pod-reconciles")
    add_log_arguments(node, defaults=False)
    node.add_argument(
        "--api-qps",
        help="hard ceiling on requests a second to the apiserver (watches and the node's Lease and status "
        "heartbeats excluded); below it the node slows down on the apiserver's 429s. 0 = no ceiling "
        "(default: 0)",
    )
    node.add_argument(
        "--api-burst", help="requests the --api-qps ceiling lets through at once (default: 0 = --api-qps)"
    )
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
    node.add_argument(
        "--token-refresh-fraction",
        help="for a provider that mounts ServiceAccount tokens: replace a token after this part of its "
        "lifetime (default: 0.8, as the kubelet)",
    )
    node.add_argument("--kubelet-bind-address", help="address the kubelet API listens on (default: 0.0.0.0)")
    node.add_argument(
        "--health-port",
        help="serve plain-HTTP /healthz and /readyz for the pod's probes on this port of the kubelet bind "
        "address (default: 0, not served)",
    )
    node.add_argument(
        "--serving-certificate",
        choices=("auto", "csr", "self-signed", "file"),
        help="where the kubelet API's serving certificate comes from: auto (a kubelet-serving CSR, and a "
        "self-signed certificate while none is issued), csr (wait for the CSR), self-signed, or file "
        "(--kubelet-serving-cert-file) (default: auto)",
    )
    node.add_argument(
        "--serving-certificate-wait-seconds",
        help="with auto: seconds a CSR may go unissued before the node serves its own certificate "
        "(default: 60)",
    )
    node.add_argument(
        "--kubelet-serving-cert-file",
        help="serve this certificate (with --kubelet-serving-key-file) instead of requesting one by CSR "
        "(default: none)",
    )
    node.add_argument("--kubelet-serving-key-file", help="key of --kubelet-serving-cert-file (default: none)")
    node.add_argument(
        "--kubelet-client-ca-file",
        help="CA for client certificates (default: the CA the node's kubeconfig trusts)",
    )
    node.add_argument(
        "--kubelet-csr-self-approve",
        action="store_true",
        default=None,
        help="approve our own kubelet-serving CSR (needs the approve RBAC in manifests/) (default: off, an "
        "operator approves it)",
    )
    node.add_argument(
        "--leader-elect",
        type=str,
        nargs="?",
        const="true",
        metavar="true|false",
        help="run the node only while holding its leader Lease, so replicas can stand by (default: true)",
    )
    node.add_argument(
        "--leader-election-namespace",
        help="namespace of the leader Lease (default: the pod's own; outside a pod, kube-node-lease, which "
        "every cluster has)",
    )
    node.add_argument(
        "--traffic-key-secret",
        metavar="NAMESPACE/NAME",
        help="the Secret of the key that seals the traffic addresses the node publishes, created if "
        "missing; the router must read the same one (default: vk-provider-traffic-key in the pod's own "
        "namespace; outside a pod, in default)",
    )
    node.add_argument(
        "--leader-election-identity", help="this replica's name in the Lease (default: host name + random)"
    )
    node.add_argument(
        "--leader-election-lease-duration-seconds",
        help="seconds a standby waits after the leader's last renewal before taking over (default: 15)",
    )
    node.add_argument(
        "--leader-election-renew-deadline-seconds",
        help="seconds the leader keeps leading without renewing the Lease (default: 10)",
    )
    node.add_argument(
        "--leader-election-retry-period-seconds",
        help="seconds between Lease renewals and takeover attempts (default: 2)",
    )
    node.add_argument(
        "--kubelet-websocket",
        type=str,
        nargs="?",
        const="true",
        metavar="true|false",
        help="declare WebSocket streaming (ExtendWebSocketsToKubelet) so that apiservers of 1.36 and "
        "later pass exec, attach and port-forward through as WebSocket; false: SPDY only (default: true)",
    )
    node.add_argument(
        "--insecure-kubelet-api-allow-all",
        action="store_true",
        default=None,
        help="development only: no authentication or authorization on the kubelet API (default: off)",
    )


def build_parser(*, only: str | None = None) -> argparse.ArgumentParser:
    """Every command's parser; `only`: that command's alone (any other value: all of them), so a daemon
    imports none of the others' modules. A running node keeps no botocore (some 8 MiB, for days), and a
    router or a controller starts some 0.4 s of CPU sooner without the node's, each other's and the xDS
    server's gRPC."""
    parser = versioned_parser("vk-provider")(
        prog="vk-provider",
        description="A virtual-kubelet provider that offloads inference to external GPU providers.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    if only in _COMMANDS:
        _COMMANDS[only](subparsers)
        return parser
    _add_node_command(subparsers)
    _add_installed_commands(subparsers)
    for name in ("migrate", "plugin", "conformance", "router", "xds", "controller", "interconnect-exporter"):
        _COMMANDS[name](subparsers)
    return parser


def _add_router_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from vk_provider.router.running import add_router_arguments  # noqa: PLC0415 (see build_parser)

    add_router_arguments(
        subparsers.add_parser(
            "router",
            formatter_class=DefaultsShown,
            epilog=ENVIRONMENT_NOTE,
            help="route each Offload's traffic between home and away by its weight",
            description="Serve the routes the cluster's Offloads describe (several replicas may run).",
        )
    )


def _add_xds_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from vk_provider.xds.command import add_xds_arguments  # noqa: PLC0415 (see build_parser)

    add_xds_arguments(
        subparsers.add_parser(
            "xds",
            formatter_class=DefaultsShown,
            epilog=ENVIRONMENT_NOTE,
            help="serve the Offloads' routes to Envoy replicas over xDS",
            description=(
                "Watch the cluster as the router does and stream its route table to Envoy replicas "
                "(aggregated xDS over gRPC): listeners, weighted routes, home and away clusters."
            ),
        )
    )


def _add_controller_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from vk_provider.controller.running import add_controller_arguments  # noqa: PLC0415 (see build_parser)

    add_controller_arguments(
        subparsers.add_parser(
            "controller",
            formatter_class=DefaultsShown,
            epilog=ENVIRONMENT_NOTE,
            help="run the migration controller that moves Offloads between home and away",
            description=(
                "Reconcile every Offload: scale the receiving side, shift the weight step by step "
                "behind the health gates, and scale the drained side to 0. Replicas elect a leader "
                "through a Lease."
            ),
        )
    )


def _add_interconnect_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from vk_provider.interconnect.command import add_interconnect_arguments  # noqa: PLC0415 (see build_parser)

    add_interconnect_arguments(
        subparsers.add_parser(
            "interconnect-exporter",
            formatter_class=DefaultsShown,
            epilog=ENVIRONMENT_NOTE,
            help="publish a GPU node's InfiniBand and NVLink error counters and their rates (a DaemonSet)",
            description=(
                "Read the InfiniBand port counters under --sysfs-root and, with --dcgm-exporter-url, the "
                "NVLink error counters of a dcgm-exporter, every --interval-seconds; serve each as a "
                "Prometheus counter (_total) and its rate over the last interval (_per_second) on /metrics."
            ),
        )
    )


def _add_plugin_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    plugin = subparsers.add_parser(
        "plugin",
        help="serve an installed provider as a plugin (the plugin API over gRPC)",
        description="Serve a provider of this installation to a `grpc` node over the plugin API.",
    )
    commands = plugin.add_subparsers(dest="plugin_command", required=True, metavar="COMMAND")
    serve = commands.add_parser(
        "serve",
        help="serve one provider for one node until stopped",
        description="Serve the provider for a node on a unix socket or a TCP port until SIGTERM.",
        formatter_class=DefaultsShown,
        epilog=ENVIRONMENT_NOTE,
    )
    serve.add_argument("--provider", required=True, help="the installed provider's name, e.g. local")
    serve.add_argument(
        "--provider-config", type=Path, help="a YAML file with the provider's settings (default: none)"
    )
    serve.add_argument("--node-name", required=True, help="the virtual node the provider serves")
    serve.add_argument(
        "--address", required=True, help="where to listen: unix:///path/to/plugin.sock or host:port"
    )
    serve.add_argument(
        "--state-dir", type=Path, required=True, help="a folder the provider keeps its files in"
    )
    serve.add_argument("--host-ip", default="127.0.0.1", help="the node's address (default: 127.0.0.1)")
    serve.add_argument(
        "--tls-cert-file",
        type=Path,
        metavar="FILE",
        help="with TCP: the plugin's certificate, for mutual TLS (default: none, plaintext)",
    )
    serve.add_argument(
        "--tls-key-file", type=Path, metavar="FILE", help="with TCP: the plugin's key (default: none)"
    )
    serve.add_argument(
        "--client-ca-file",
        type=Path,
        metavar="FILE",
        help="with TCP: the CA every node's client certificate must come from (default: none)",
    )
    add_log_arguments(serve)
    add_deprecated_alias(serve, "--tls-cert", "--tls-cert-file")
    add_deprecated_alias(serve, "--tls-key", "--tls-key-file")
    add_deprecated_alias(serve, "--tls-client-ca", "--client-ca-file")
    serve.set_defaults(run_command=_run_plugin_command)


def _run_plugin_command(arguments: argparse.Namespace) -> int:
    import asyncio  # noqa: PLC0415

    from vk_provider import plugins  # noqa: PLC0415
    from vk_provider.plugin import ServerTls, serving  # noqa: PLC0415
    from vk_provider.provider import ProviderContext  # noqa: PLC0415
    from vk_provider.runtime import eventloop  # noqa: PLC0415
    from vk_provider.runtime.signals import until_signalled  # noqa: PLC0415

    configure_logging(arguments.log_level, arguments.log_format)
    tls_files = (arguments.tls_cert_file, arguments.tls_key_file, arguments.client_ca_file)
    if any(tls_files) and not all(tls_files):
        print(
            "vk-provider plugin serve: error: --tls-cert-file, --tls-key-file and --client-ca-file go "
            "together",
            file=sys.stderr,
        )
        return 2
    try:
        config = _provider_config(arguments.provider_config)
        arguments.state_dir.mkdir(parents=True, exist_ok=True)
    except (SettingsError, OSError) as error:
        print(f"vk-provider plugin serve: error: {_one_line(error)}", file=sys.stderr)
        return 1 if isinstance(error, OSError) else 2
    context = ProviderContext(arguments.node_name, config, arguments.host_ip, arguments.state_dir)
    tls = ServerTls(*tls_files) if all(tls_files) else None

    async def serve(stop: asyncio.Event) -> None:
        provider = plugins.build(arguments.provider, context)
        try:
            async with serving(provider, arguments.address, name=arguments.provider, tls=tls):
                await stop.wait()
        finally:
            await provider.aclose()

    try:
        eventloop.run(until_signalled(serve))
    except (OSError, ValueError, plugins.UnknownProviderError) as error:
        print(f"vk-provider plugin serve: error: {error}", file=sys.stderr)
        return 1
    return 0


def _provider_config(path: Path | None) -> dict[str, Any]:
    """`--provider-config`'s settings; SettingsError (one line) when the file cannot be read or parsed."""
    return {} if path is None else load_yaml_file(path, "--provider-config")


def _one_line(error: BaseException) -> str:
    if isinstance(error, OSError) and error.filename is not None:
        return f"{error.filename}: {error.strerror or error}"
    return " ".join(str(error).split())


def _add_conformance_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    kit = subparsers.add_parser(
        "conformance",
        help="run the provider contract suite against a provider or a plugin",
        description=(
            "Run the provider contract suite against an installed provider or a plugin and report what "
            "passed, what failed and why, and what was skipped (not declared, or not something the kit "
            "can make the provider do). Exit code 0 only when nothing failed. Needs "
            "`pip install 'vk-provider[conformance]'`."
        ),
        formatter_class=DefaultsShown,
        epilog=ENVIRONMENT_NOTE,
    )
    target = kit.add_mutually_exclusive_group(required=True)
    target.add_argument("--provider", help="an installed provider's name, e.g. mock")
    target.add_argument("--plugin", metavar="ADDRESS", help="a plugin's unix:///path or host:port")
    kit.add_argument(
        "--provider-config", type=Path, help="a YAML file with the provider's settings (default: none)"
    )
    kit.add_argument(
        "--junit", type=Path, metavar="FILE", help="also write a JUnit XML report here (default: none)"
    )
    kit.add_argument(
        "--pod-image", default="conformance/server:1", help="the test pods' image (default: %(default)s)"
    )
    kit.add_argument(
        "--pod-command",
        default="",
        help="the test pods' command, split as a shell would (default: the image's own)",
    )
    kit.add_argument(
        "--ephemeral-workloads",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="override the provider's own declaration (its ephemeral_workloads attribute; mock declares "
        "it): with the flag the restart tests are skipped, with --no-ephemeral-workloads they run "
        "(default: as the provider declares)",
    )
    kit.set_defaults(run_command=_run_conformance_command)


def _run_conformance_command(arguments: argparse.Namespace) -> int:
    import shlex  # noqa: PLC0415

    try:
        import pytest  # noqa: F401, PLC0415

        from vk_provider import conformance  # noqa: PLC0415
    except ImportError as missing:
        print(f"vk-provider conformance: {missing}; pip install 'vk-provider[conformance]'", file=sys.stderr)
        return 2
    template = conformance.PodTemplate(
        image=arguments.pod_image, command=tuple(shlex.split(arguments.pod_command))
    )
    target: conformance.Target
    if arguments.plugin is not None:
        target = conformance.PluginTarget(arguments.plugin, template)
    else:
        try:
            config = _provider_config(arguments.provider_config)
        except SettingsError as error:
            print(f"vk-provider conformance: error: {error}", file=sys.stderr)
            return 2
        target = conformance.InProcessTarget(
            arguments.provider, config, template, ephemeral_workloads=arguments.ephemeral_workloads
        )
    return conformance.run(target, junit=arguments.junit)


def _add_migrate_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    migrate = subparsers.add_parser(
        "migrate",
        help="move inference between home and away: the same commands as `kubectl offload`",
        description="List, inspect, flip, pause, resume, abort and promote Offload migrations.",
    )
    add_global_flags(migrate)
    add_migration_commands(migrate.add_subparsers(dest="migration_command", required=True, metavar="COMMAND"))


_COMMANDS: dict[str, Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]] = {
    "node": _add_node_command,
    "migrate": _add_migrate_command,
    "plugin": _add_plugin_command,
    "conformance": _add_conformance_command,
    "router": _add_router_command,
    "xds": _add_xds_command,
    "controller": _add_controller_command,
    "interconnect-exporter": _add_interconnect_command,
}
"""The product's own commands, each added by itself when it is the one run (`build_parser`)."""

DAEMONS = ("node", "router", "xds", "controller")
"""The commands that talk to a cluster as daemons: each finds and checks its kubeconfig as it starts
(`vk_provider.kit.kubeconfigs`), and a KubeconfigError ends it with one line."""


ENVIRONMENT_COMMANDS = (
    ("router",),
    ("xds",),
    ("controller",),
    ("interconnect-exporter",),
    ("plugin", "serve"),
    ("conformance",),
)
"""The commands whose every option is also read from `VK_PROVIDER_<FLAG>` (`runtime.flagenvironment`).
The node reads its own, with its YAML file between the environment and its defaults
(`node.settings`)."""


def _command_parser(
    parser: argparse.ArgumentParser, words: Sequence[str]
) -> tuple[tuple[str, ...], argparse.ArgumentParser]:
    """The (sub)command the leading words name, and its parser: ("plugin", "serve") and serve's."""
    path: list[str] = []
    for word in words:
        commands = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        if commands is None or word not in commands.choices:
            break
        parser = commands.choices[word]
        path.append(word)
    return tuple(path), parser


def parse_command_line(
    words: Sequence[str], environ: Mapping[str, str] | None = None
) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    """The parser and the arguments of `vk-provider <words>`, options from `VK_PROVIDER_*` included;
    SystemExit(2) with one line on a mistake."""
    parser = build_parser(only=words[0] if words else None)
    command, command_parser = _command_parser(parser, words)
    if command in ENVIRONMENT_COMMANDS:
        read_environment(command_parser, environ)
    return parser, parser.parse_args(words)


def main(argv: Sequence[str] | None = None) -> int:
    parser, arguments = parse_command_line(list(sys.argv[1:] if argv is None else argv))
    try:
        return _run(parser, arguments)
    except KubeconfigError as error:
        # An ordinary mistake (a missing or broken kubeconfig, no cluster at all): one line, exit 1.
        print(f"vk-provider {arguments.command}: {error}", file=sys.stderr)
        return 1


def _run(parser: argparse.ArgumentParser, arguments: argparse.Namespace) -> int:
    installed: Callable[[argparse.Namespace], int] | None = getattr(arguments, "run_command", None)
    if installed is not None:
        return installed(arguments)
    if arguments.command == "migrate":
        from vk_provider.offloadcli import running as migration  # noqa: PLC0415 (see build_parser)

        return migration.run(arguments)
    if arguments.command == "router":
        from vk_provider.router.running import run_router_command  # noqa: PLC0415

        return run_router_command(arguments)
    if arguments.command == "xds":
        from vk_provider.xds.command import run_xds_command  # noqa: PLC0415

        return run_xds_command(arguments)
    if arguments.command == "controller":
        from vk_provider.controller.running import run_controller_command  # noqa: PLC0415

        return run_controller_command(arguments)
    if arguments.command == "node":
        flags = {name: getattr(arguments, name) for name in SETTINGS_FIELDS if hasattr(arguments, name)}
        try:
            settings = load_settings(config_file=arguments.config, flags=flags)
        except SettingsError as error:
            parser.exit(2, f"vk-provider node: error: {error}\n")
        settings = dataclasses.replace(settings, kubeconfig=daemon_kubeconfig(settings.kubeconfig))
        from vk_provider.node.running import run_node_command  # noqa: PLC0415 (see build_parser)

        return run_node_command(settings)
    raise AssertionError(f"unhandled command {arguments.command!r}")


def build_offload_parser() -> argparse.ArgumentParser:
    parser = versioned_parser("kubectl-offload")(
        prog="kubectl offload",
        description=(
            "Move inference between home GPU nodes and external GPU providers (kubectl plugin): "
            "list, inspect, flip, pause, resume, abort and promote Offload migrations, and uninstall "
            "(bring every Offload home and leave nothing at a provider); with the "
            "development tools installed, `dev` runs the development cluster, as `vk-provider dev` does."
        ),
    )
    add_global_flags(parser)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_migration_commands(subparsers)
    add_version_command(subparsers)
    _add_installed_commands(subparsers)
    add_completion_command(subparsers, parser)  # last: it completes every command added before
    return parser


def offload_main(argv: Sequence[str] | None = None) -> int:
    arguments = merge_global_flags(build_offload_parser().parse_args(argv))
    installed: Callable[[argparse.Namespace], int] | None = getattr(arguments, "run_command", None)
    if installed is not None:
        return installed(arguments)
    if getattr(arguments, "migration_command", None):
        from vk_provider.offloadcli import running as migration  # noqa: PLC0415 (see build_parser)

        return migration.run(arguments)
    raise AssertionError(f"unhandled command {arguments.command!r}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
