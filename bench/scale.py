"""Scale: what the controller (with its policy), the router and the node daemons cost as the cluster grows.

For each size N (`--offloads 10,100,1000`) a development plane of its own (`vk-provider dev up
--no-local-node`), and on it the scale rig (vk_devtools.scale): N services (a Deployment of
`--replicas` pods of one GPU, a Service, an Offload each, away on mock away nodes), one OffloadPolicy
selecting them all, a home GPU pool of M nodes (`--pool-nodes`; `--pool-daemons` of them are mock node
daemons carrying the services' home pods, the others registered Node objects whose Leases the rig
renews, each busy with an 8-GPU training pod: 200 Python daemons do not fit two cores), and P pods in all
(`--pods`: the home replicas, the training pods, then filler pods bound to `--filler-daemons` mock
daemons). Every mock pod's address reaches one shared token server, so requests through the router
are served. The router and the controller watch the whole cluster, as deployed.

Measured at each size:

- at rest (a `--rest-seconds` window once every service is served at home and the components' writes
  reached a steady rate: Lease renewals never stop): each component's apiserver requests per second,
  WATCH left out, by verb. Attribution: each component runs as a user of its own, and a FlowSchema per
  (user, verb) at a precedence ahead of the built-in ones makes API Priority and Fairness count its
  requests (`apiserver_flowcontrol_dispatched_requests_total{flow_schema}`): exact, with everything
  running at once, no window differences. By resource, `apiserver_request_total` for all clients, less
  the plane's own rate in a `--background-seconds` window before anything of the rig ran. Memory (VmRSS
  of the process tree) and CPU (utime + stime over the window, from /proc) per component; the node
  daemons summed. The data plane is the builtin router (no xDS server runs);
- the policy's decision time: a training Job of one GPU on the full pool; the time from its creation
  to the policy's first flip (the Offload's spec.placement, seen by polling every 0.25 s, and the
  FlipOutStarted Event's own time);
- a wave: `--wave` Offloads (100, or all those still home when fewer) flipped away at once with the
  patch `kubectl offload flip --to away` sends, under `--wave-rate` requests/s spread evenly over
  their hosts: the wave's total time, each step's time to be applied at the router (a first step from
  the flip, a later one from when it was due: the previous weight's stepStartedAt plus the 2 s step
  interval), and the failed requests;
- memory per Offload: the controller's and the router's RSS difference between consecutive sizes over
  the difference in N.

The router's own figures (table rebuild time, memory per route, latency with 10 and 1,000 routes) are
bench/scale_router.py's: measured once per run beside the planes (`--no-router` skips them) and judged
in the same table.

Targets (issue 35): at rest at most 1 request/s per component at the largest N, and independent of N
(at most 0.5/s above the smallest N's); at most 50 KB per Offload in the controller (and the router);
the later steps' median at the largest N at most twice the smallest N's; growth at most linear (the
controller's memory per Offload between the two largest sizes at most twice that between the two
smallest). Results go to bench/results/scale-<time>.{json,md}.

Run as root (the pod network's local route): `.venv/bin/python bench/scale.py --offloads 10,100`.
Each size's plane and logs are in <--plane-dir>/n<N> until the next run.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import itertools
import json
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import scale_router

from benchkit import (
    BenchError,
    add_results_dir_option,
    cell,
    markdown_table,
    report_head,
    run_main,
    run_text,
    run_vk_provider,
    write_report,
)
from vk_devtools.devcluster import cluster, podnetwork, traffic
from vk_devtools.scale import attribution
from vk_devtools.scale.rig import RigError, RigSettings, ScaleRig
from vk_provider.kit.kube import KubeApi, KubeApiError

NAMESPACE = "scale"
SYSTEM_NAMESPACE_MANIFEST = traffic.MANIFESTS / "base" / "namespace.yaml"
REST_TARGET = 1.0
GROWTH_ALLOWANCE = 0.5
MEMORY_TARGET_KB = 50.0
STEP_RATIO_TARGET = 2.0
ROUTER_SIZES = (10, 100, 1000)
"""The router's own figures (`scale_router.measure`: table rebuild, memory per route, p99 with 10 and
1,000 routes) need no plane: measured once per run, beside the planes, not once per size."""


POD_CIDRS = [str(network) for network in ipaddress.IPv4Network("198.19.128.0/17").subnets(new_prefix=20)]
"""Eight /20s of the development pod network (4,094 pods each), one per mock daemon."""


PLANE_TIMEOUT_SECONDS = 900.0
"""`dev up` and `dev down` of a plane with a thousand services' objects in it."""


def say(message: str) -> None:
    print(f"{datetime.now(UTC):%H:%M:%S} {message}", flush=True)


def start_plane(directory: Path) -> cluster.ClusterState:
    # An earlier run's plane there, if any.
    run_vk_provider("dev", "down", "--dir", str(directory), timeout=PLANE_TIMEOUT_SECONDS)
    if directory.exists():
        shutil.rmtree(directory)
    up = run_vk_provider(
        "dev",
        "up",
        "--no-local-node",
        "--any-free-ports",
        "--dir",
        str(directory),
        timeout=PLANE_TIMEOUT_SECONDS,
    )
    state = cluster.ClusterState.load(directory)
    if up.returncode != 0 or state is None:
        raise BenchError(f"dev up in {directory} failed: {up.stderr.strip()[-2000:]}")
    traffic.install_crds(state.bin_dir, state.kubeconfig)
    traffic.kubectl_apply(state.bin_dir, state.kubeconfig, "apply", "-f", str(SYSTEM_NAMESPACE_MANIFEST))
    return state


async def background(api: KubeApi, seconds: float) -> attribution.Rates:
    before = await attribution.scrape(api, time.monotonic())
    await asyncio.sleep(seconds)  # the plane's own traffic, nothing of the rig running (noqa: sleep-ok)
    return (await attribution.scrape(api, time.monotonic())).rates_since(before)


async def run_size(offloads: int, args: argparse.Namespace) -> dict[str, Any]:
    directory = args.plane_dir / f"n{offloads}"
    say(f"N={offloads}: plane in {directory}")
    state = start_plane(directory)
    api = await KubeApi.from_kubeconfig(str(state.kubeconfig))
    settings = RigSettings(
        folder=directory / "rig",
        namespace=NAMESPACE,
        pod_cidrs=POD_CIDRS,
        max_services=offloads,
        pool_daemons=args.pool_daemons,
        pool_nodes=args.pool_nodes,
        away_daemons=args.away_daemons,
        filler_daemons=args.filler_daemons,
        pods=args.pods,
        replicas=args.replicas,
    )
    rig = ScaleRig(settings, api, directory / "pki", state.server)
    result: dict[str, Any] = {"offloads": offloads, "plane": str(directory)}
    try:
        say(f"N={offloads}: the plane's background over {args.background_seconds:g} s")
        plane_rates = await background(api, args.background_seconds)
        began = time.monotonic()
        await rig.start()
        await rig.add_services(offloads)
        result["pods_created"] = await rig.add_pods()
        result["pods"] = offloads * args.replicas + result["pods_created"]
        result["setup_seconds"] = time.monotonic() - began
        say(f"N={offloads}: {result['pods']} pods; settling")
        result["settle"] = await rig.settle(timeout_seconds=args.settle_timeout)
        say(f"N={offloads}: settled {result['settle']}; at rest for {args.rest_seconds:g} s")
        rates, result["at_rest"] = await rig.at_rest(args.rest_seconds)
        result["at_rest"]["by_resource_less_background"] = rates.minus(plane_rates)
        result["background_per_second"] = sum(plane_rates.by_resource().values())
        say(f"N={offloads}: at rest {summary_of(result['at_rest'])}")
        try:
            result["decision"] = await rig.decision(timeout_seconds=args.decision_timeout)
        except RigError as error:  # the wave is still worth measuring
            result["decision"] = {"error": str(error)}
        say(f"N={offloads}: decision {result['decision']}")
        home = [
            item["metadata"]["name"]
            for item in sorted(await rig.offloads(), key=lambda item: str(item["metadata"]["name"]))
            if (item.get("spec") or {}).get("placement") == "home"
        ][: args.wave]
        say(f"N={offloads}: a wave of {len(home)} Offloads")
        result["wave"] = await rig.wave(home, rate=args.wave_rate, timeout_seconds=args.wave_timeout)
        say(f"N={offloads}: wave {result['wave']['wave_seconds']} s, {result['wave']['failed']} failed")
    except (RigError, TimeoutError, KubeApiError) as error:
        result["error"] = str(error)
        say(f"N={offloads}: {error}")
    finally:
        await rig.close()
        await api.close()
        run_vk_provider("dev", "down", "--dir", str(directory), timeout=PLANE_TIMEOUT_SECONDS)
    return result


def summary_of(rest: dict[str, Any]) -> str:
    parts = [
        f"{name} {entry['requests_per_second']:.2f}/s {entry['rss_kib'] / 1024:.0f} MiB"
        for name, entry in rest["components"].items()
        if entry.get("requests_per_second") is not None
    ]
    return ", ".join(parts)


# --- targets --------------------------------------------------------------------------------------


def rest_rate(size: dict[str, Any], component: str) -> float | None:
    entry = ((size.get("at_rest") or {}).get("components") or {}).get(component)
    if entry is None:
        return None
    key = "requests_per_second_per_daemon" if component == "nodes" else "requests_per_second"
    return float(entry[key])


def rss(size: dict[str, Any], component: str) -> int | None:
    entry = ((size.get("at_rest") or {}).get("components") or {}).get(component)
    return None if entry is None else int(entry["rss_kib"])


def memory_per_offload(sizes: list[dict[str, Any]], component: str) -> list[dict[str, Any]]:
    """KB per Offload between consecutive measured sizes."""
    done = [size for size in sizes if rss(size, component) is not None]
    slopes = []
    for small, large in itertools.pairwise(done):
        delta = (rss(large, component) or 0) - (rss(small, component) or 0)
        slopes.append(
            {
                "between": [small["offloads"], large["offloads"]],
                "kb_per_offload": delta * 1.024 / (large["offloads"] - small["offloads"]),
            }
        )
    return slopes


def judge(sizes: list[dict[str, Any]], router: dict[str, Any] | None) -> list[dict[str, Any]]:
    done = [size for size in sizes if "at_rest" in size]
    targets: list[dict[str, Any]] = []
    if not done:
        return [{"target": "anything measured", "measured": "no size completed", "met": False}]
    small, large = done[0], done[-1]
    for component in attribution.COMPONENTS:
        label = "per node daemon" if component == "nodes" else component
        at_large = rest_rate(large, component)
        at_small = rest_rate(small, component)
        if at_large is None or at_small is None:
            continue
        targets.append(
            {
                "target": f"at rest, {label}: <= {REST_TARGET:g} request/s at N={large['offloads']}",
                "measured": f"{at_large:.2f}/s",
                "met": at_large <= REST_TARGET,
            }
        )
        if large is not small:
            targets.append(
                {
                    "target": f"at rest, {label}: independent of N (N={large['offloads']} at most "
                    f"{GROWTH_ALLOWANCE:g}/s above N={small['offloads']})",
                    "measured": f"{at_small:.2f}/s -> {at_large:.2f}/s",
                    "met": at_large <= at_small + GROWTH_ALLOWANCE,
                }
            )
    for component in ("controller", "router"):
        slopes = memory_per_offload(done, component)
        if slopes:
            last = slopes[-1]
            targets.append(
                {
                    "target": f"memory per Offload, {component}: <= {MEMORY_TARGET_KB:g} KB "
                    f"(N={last['between'][0]}..{last['between'][1]})",
                    "measured": f"{last['kb_per_offload']:.1f} KB",
                    "met": last["kb_per_offload"] <= MEMORY_TARGET_KB,
                }
            )
    slopes = memory_per_offload(done, "controller")
    if len(slopes) >= 2:
        first, last = slopes[0]["kb_per_offload"], slopes[-1]["kb_per_offload"]
        targets.append(
            {
                "target": "linear growth: the controller's memory per Offload between the largest "
                "sizes at most twice that between the smallest",
                "measured": f"{first:.1f} KB -> {last:.1f} KB",
                "met": last <= 2 * max(first, 1.0),
            }
        )
    steps: list[tuple[int, float]] = []
    for size in done:
        p50 = ((size.get("wave") or {}).get("later_step_seconds") or {}).get("p50")
        if p50 is not None:
            steps.append((int(size["offloads"]), float(p50)))
    if len(steps) >= 2:
        (n_small, at_small), (n_large, at_large) = steps[0], steps[-1]
        targets.append(
            {
                "target": f"step latency (median of later steps) at N={n_large} <= "
                f"{STEP_RATIO_TARGET:g}x N={n_small}",
                "measured": f"{at_small:.2f} s -> {at_large:.2f} s",
                "met": at_large <= STEP_RATIO_TARGET * max(at_small, 0.25),
            }
        )
    for size in done:
        wave = size.get("wave")
        if wave is not None:
            targets.append(
                {
                    "target": f"N={size['offloads']}: 0 failed requests in the wave",
                    "measured": f"{wave['failed']} of {wave['requests']}",
                    "met": wave["failed"] == 0,
                }
            )
    targets.extend(router_targets(router))
    return targets


def router_targets(router: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The router's targets as `scale_router.measure` judged them, in this report's rows."""
    if router is None:
        return [{"target": "router: rebuild, memory per route, p99", "measured": "not run", "met": None}]
    found = router["targets"]
    p99 = found["p99_ratio"]
    rows = [
        {
            "target": f"router: memory per Offload <= {found['memory_per_offload']['limit_kib']:.0f} KiB",
            "measured": f"{found['memory_per_offload']['value_kib']:.1f} KiB at "
            f"{found['memory_per_offload']['at_routes']} routes",
            "met": found["memory_per_offload"]["met"],
        },
        {
            "target": f"router: p99 with {p99['compared']} routes <= {p99['limit']}x",
            "measured": "—" if p99["value"] is None else f"{p99['value']:.2f}x",
            "met": p99["met"],
        },
    ]
    for key, what in (
        ("rebuild_growth", "table rebuild after one change"),
        ("xds_update_growth", "xDS update"),
    ):
        growth = found.get(key)
        if growth is not None:
            rows.append(
                {
                    "target": f"router: {what} grows at most linearly",
                    "measured": f"{growth['time_ratio']:.1f}x from {growth['from_routes']} to "
                    f"{growth['to_routes']} routes",
                    "met": growth.get("met"),
                }
            )
    return rows


# --- the report -----------------------------------------------------------------------------------


def verdict(met: bool | None) -> str:
    return {True: "met", False: "missed", None: "—"}[met]


def write_markdown(path: Path, report: dict[str, Any]) -> None:
    settings = report["settings"]
    lines = [
        f"# scale, {report['started_at']}",
        "",
        f"M = {settings['pool_nodes']} pool nodes ({settings['pool_daemons']} mock daemons, the rest "
        "registered), "
        f"P = {settings['pods']} pods wanted, {settings['replicas']} replica(s) per service, "
        f"at rest over {settings['rest_seconds']:g} s, a wave of up to {settings['wave']} at "
        f"{settings['wave_rate']:g} requests/s. Load: {report['uptime_at_start']}.",
        *(f"N={size['offloads']} is from {size['from']}." for size in report["sizes"] if size.get("from")),
        "",
        "## At rest",
        "",
    ]
    rows = []
    for size in report["sizes"]:
        components = (size.get("at_rest") or {}).get("components") or {}
        for name, entry in components.items():
            rows.append(
                [
                    f"N={size['offloads']} {name}",
                    cell(
                        entry.get("requests_per_second_per_daemon", entry.get("requests_per_second")),
                        "{:.2f}",
                    ),
                    cell(entry.get("requests_per_second"), "{:.2f}"),
                    ", ".join(f"{verb} {rate:.2f}" for verb, rate in (entry.get("by_verb") or {}).items())
                    or "—",
                    cell(entry["rss_kib"] / 1024, "{:.0f}"),
                    cell(entry["cpu_cores"] * 100, "{:.1f}"),
                ]
            )
    lines += markdown_table(
        [
            "size, component",
            "req/s (per daemon)",
            "req/s (all)",
            "by verb (incl. watch starts)",
            "RSS MiB",
            "CPU %",
        ],
        rows,
    )
    lines += ["", "## Decision, wave", ""]
    rows = []
    for size in report["sizes"]:
        decision, wave = size.get("decision") or {}, size.get("wave") or {}
        later, first = wave.get("later_step_seconds") or {}, wave.get("first_step_seconds") or {}
        rows.append(
            [
                f"N={size['offloads']}",
                str(size.get("pods", "—")),
                cell(decision.get("seconds_seen"), "{:.1f}"),
                cell(decision.get("seconds_by_event"), "{:.1f}"),
                str(wave.get("offloads", "—")),
                cell(wave.get("wave_seconds"), "{:.1f}"),
                cell(first.get("p50"), "{:.2f}"),
                cell(later.get("p50"), "{:.2f}"),
                cell(later.get("p99"), "{:.2f}"),
                cell((wave.get("later_step_controller_seconds") or {}).get("p50"), "{:.2f}"),
                cell((wave.get("later_step_router_seconds") or {}).get("p50"), "{:.2f}"),
                f"{wave['failed']}/{wave['requests']}" if wave else "—",
                size.get("error", ""),
            ]
        )
    lines += markdown_table(
        [
            "size",
            "pods",
            "decision s (seen)",
            "decision s (Event)",
            "wave",
            "wave s",
            "first step p50 s",
            "later step p50 s",
            "later step p99 s",
            "of which controller p50 s",
            "of which routers p50 s",
            "failed",
            "error",
        ],
        rows,
    )
    lines += ["", "## The controller's work queue during the wave (its own metrics)", ""]
    rows = []
    for size in report["sizes"]:
        queue = (size.get("wave") or {}).get("controller_queue")
        if not queue:
            continue
        waited, passes = queue["queue_wait_seconds"], queue["pass_seconds"]
        rows.append(
            [
                f"N={size['offloads']}",
                str(passes["count"]),
                cell(waited["p50"], "{:.3f}"),
                cell(waited["p99"], "{:.3f}"),
                cell(passes["p50"], "{:.3f}"),
                cell(passes["p99"], "{:.3f}"),
                cell(queue["api_budget_wait_seconds"], "{:.1f}"),
                str(queue["max_queue_depth"]),
            ]
        )
    lines += markdown_table(
        [
            "size",
            "passes",
            "queue wait p50 s",
            "queue wait p99 s",
            "pass p50 s",
            "pass p99 s",
            "API budget wait s (all passes)",
            "deepest queue",
        ],
        rows,
    )
    lines += ["", "## Targets", ""]
    lines += markdown_table(
        ["target", "measured", "verdict"],
        [[target["target"], target["measured"], verdict(target["met"])] for target in report["targets"]],
    )
    lines += ["", "## The busiest request rows at rest (all clients less the plane's background)", ""]
    for size in report["sizes"]:
        rows_at = ((size.get("at_rest") or {}).get("by_resource_less_background") or {}).items()
        top = sorted(rows_at, key=lambda kv: -kv[1])[:8]
        lines.append(
            f"- N={size['offloads']}: " + (", ".join(f"{key} {rate:.2f}/s" for key, rate in top) or "—")
        )
    lines.append("")
    path.write_text("\n".join(lines))


async def main(args: argparse.Namespace) -> int:
    podnetwork.ensure_local_route()
    started_at = datetime.now(UTC)
    uptime_at_start = run_text(["uptime"]).stdout.strip()
    sizes = [await run_size(offloads, args) for offloads in args.offloads]
    router = None if args.no_router else scale_router.measure(ROUTER_SIZES)
    sizes = sorted(
        [*earlier_sizes(args.previous, args.offloads), *sizes], key=lambda size: int(size["offloads"])
    )
    report = report_head("scale", started_at) | {
        "settings": {
            "offloads": args.offloads,
            "pool_nodes": args.pool_nodes,
            "pool_daemons": args.pool_daemons,
            "away_daemons": args.away_daemons,
            "filler_daemons": args.filler_daemons,
            "pods": args.pods,
            "replicas": args.replicas,
            "rest_seconds": args.rest_seconds,
            "background_seconds": args.background_seconds,
            "wave": args.wave,
            "wave_rate": args.wave_rate,
            "previous": [str(path) for path in args.previous],
        },
        "uptime_at_start": uptime_at_start,
        "sizes": sizes,
        "memory_per_offload": {
            component: memory_per_offload([s for s in sizes if "at_rest" in s], component)
            for component in ("controller", "router", "nodes")
        },
        "router": router,
    }
    report["targets"] = judge(sizes, router)
    json_path, markdown_path = write_report(args.results_dir, report, write_markdown)
    print(markdown_path.read_text())
    print(f"wrote {json_path} and {markdown_path}")
    return 0 if all("error" not in size for size in sizes) else 1


def earlier_sizes(paths: list[Path], measured_now: list[int]) -> list[dict[str, Any]]:
    """The sizes of earlier results (`--previous`) this run does not measure again, each marked with
    its file: the figures across sizes (memory per Offload, growth, step latency) then span both runs."""
    found: dict[int, dict[str, Any]] = {}
    for path in paths:
        try:
            report = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            raise BenchError(f"--previous {path}: {error}") from None
        for size in report.get("sizes") or ():
            if "at_rest" in size and size["offloads"] not in measured_now:
                found[int(size["offloads"])] = {**size, "from": path.name}
    return list(found.values())


def sizes_list(text: str) -> list[int]:
    try:
        sizes = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--offloads: not a comma-separated list of integers: {text!r}"
        ) from None
    if not sizes or sizes[0] < 1:
        raise argparse.ArgumentTypeError(f"--offloads: sizes must be positive, not {text!r}")
    return sizes


def bounded_int(name: str, low: int, high: int) -> Any:
    def parse(text: str) -> int:
        value = int(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{name}: {value} is outside {low}..{high}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--offloads", type=sizes_list, default=[10, 100, 1000], help="sizes N (default 10,100,1000)"
    )
    parser.add_argument(
        "--pool-nodes", type=bounded_int("--pool-nodes", 1, 200), default=200, help="M (default 200)"
    )
    parser.add_argument(
        "--pool-daemons", type=bounded_int("--pool-daemons", 1, 4), default=2, help="of M, mock daemons"
    )
    parser.add_argument("--away-daemons", type=bounded_int("--away-daemons", 1, 2), default=1)
    parser.add_argument("--filler-daemons", type=bounded_int("--filler-daemons", 0, 4), default=1)
    parser.add_argument(
        "--pods", type=bounded_int("--pods", 0, 10_000), default=2000, help="P (default 2000)"
    )
    parser.add_argument(
        "--replicas", type=bounded_int("--replicas", 1, 4), default=1, help="home replicas per service"
    )
    parser.add_argument("--rest-seconds", type=float, default=60.0, help="the at-rest window")
    parser.add_argument("--background-seconds", type=float, default=30.0, help="the plane's own window")
    parser.add_argument(
        "--settle-timeout", type=float, default=900.0, help="how long N services may take to serve"
    )
    parser.add_argument(
        "--wave", type=bounded_int("--wave", 1, 1000), default=100, help="Offloads in the wave"
    )
    parser.add_argument("--decision-timeout", type=float, default=600.0, help="seconds for the policy's flip")
    parser.add_argument("--wave-timeout", type=float, default=1800.0, help="seconds for the wave to end")
    parser.add_argument(
        "--no-router", action="store_true", help="skip the router's own figures (bench/scale_router.py)"
    )
    parser.add_argument("--wave-rate", type=float, default=50.0, help="requests/s over the wave's hosts")
    parser.add_argument(
        "--plane-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "bench-scale",
        help="each size's plane goes to <plane-dir>/n<N> (its logs stay there)",
    )
    parser.add_argument(
        "--previous",
        type=Path,
        action="append",
        default=[],
        help="an earlier scale result (JSON) whose other sizes join this report's figures across sizes",
    )
    add_results_dir_option(parser)
    return parser


if __name__ == "__main__":
    sys.exit(run_main(main(build_parser().parse_args()), interrupted="the scale benchmark"))
