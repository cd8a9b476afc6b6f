"""The pods-to-Running report: the issue's table, the target lines and the requests by verb and resource.

Everything here reads the report dict `pods_to_running.py` builds (and writes as JSON), so a result
file can be re-rendered; nothing here measures. The text about client-side limits is made from what
each run actually had (`subjects[...]["budget"]`: flags passed, or defaults read from --help), never a
fixed sentence.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchkit import cell, describe_machine, ratio

VK = "virtual-kubelet"
OURS = "vk-provider"

COLUMNS = (
    # result key, column heading, format
    ("throughput_pods_per_s", "pods/s to Running", "{:.1f}"),
    ("p99_s", "p99 (s)", "{:.1f}"),
    ("peak_rss_mib", "peak RSS (MiB)", "{:.0f}"),
    ("pod_watch_events_per_pod", "pod watch events per pod", "{:.2f}"),
    ("requests_per_pod", "requests per pod", "{:.2f}"),
)

# Rows of the by-verb table below this many requests per pod in every run are folded into "other".
SMALL_ROW = 0.005


def entry(report: dict[str, Any], key: str | None, size: int) -> dict[str, Any]:
    """One run's result (empty when it did not run or failed)."""
    if key is None:
        return {}
    found: dict[str, Any] = report["results"].get(key, {}).get(str(size), {})
    return {} if found.get("error") else found


def subject_for(report: dict[str, Any], daemon: str, variant: str) -> str | None:
    """The key of the run of `daemon` that stands for `variant` (virtual-kubelet as shipped is also at
    its own budget), or None."""
    for key, subject in report["subjects"].items():
        if subject["daemon"] == daemon and variant in subject["serves"]:
            return str(key)
    return None


def table_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for size in report["settings"]["sizes"]:
        for key, subject in report["subjects"].items():
            result = report["results"].get(key, {}).get(str(size))
            if result is None:
                continue
            row: dict[str, Any] = {"size": size, "subject": key, "label": subject["label"]}
            row["error"] = result.get("error")
            row["settled"] = result.get("settled", True)
            for column, _, _ in COLUMNS:
                row[column] = result.get(column)
            rows.append(row)
    return rows


def targets(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's four targets per size, each a ratio with its limit and verdict (None: not measured)."""
    found = []
    for size in report["settings"]["sizes"]:
        vk_budget = entry(report, subject_for(report, VK, "same-budget"), size)
        vk_shipped = entry(report, subject_for(report, VK, "as-shipped"), size)
        ours_budget = entry(report, subject_for(report, OURS, "same-budget"), size)
        ours_shipped = entry(report, subject_for(report, OURS, "as-shipped"), size)
        ours_free = entry(report, subject_for(report, OURS, "unthrottled"), size)
        lines = (
            (
                "at virtual-kubelet's budget, throughput ours / virtual-kubelet's",
                ours_budget.get("throughput_pods_per_s"),
                vk_budget.get("throughput_pods_per_s"),
                ">=",
                1.0,
            ),
            (
                "as shipped, throughput ours / our unthrottled run's",
                ours_shipped.get("throughput_pods_per_s"),
                ours_free.get("throughput_pods_per_s"),
                ">=",
                0.8,
            ),
            (
                "requests per pod to Running, ours as shipped / virtual-kubelet's",
                ours_shipped.get("requests_per_pod"),
                vk_shipped.get("requests_per_pod"),
                "<=",
                1.0,
            ),
            (
                "peak RSS, ours as shipped / virtual-kubelet's as shipped",
                ours_shipped.get("peak_rss_mib"),
                vk_shipped.get("peak_rss_mib"),
                "<=",
                1.0,
            ),
        )
        # A count that did not settle is a lower bound: the reference's still decides a "met", ours never.
        requests_open = (not ours_shipped.get("settled", True), not vk_shipped.get("settled", True))
        for label, ours, theirs, op, limit in lines:
            value = ratio(ours, theirs)
            verdict = None if value is None else (value >= limit if op == ">=" else value <= limit)
            if label.startswith("requests") and verdict is not None:
                ours_open, reference_open = requests_open
                if ours_open or (reference_open and not verdict):
                    verdict = None
            found.append(
                {
                    "size": size,
                    "target": f"{label} {op} {limit}",
                    "ours": ours,
                    "reference": theirs,
                    "ratio": value,
                    "met": verdict,
                }
            )
    return found


def verdict_text(met: bool | None, measured: bool) -> str:
    if met is None:
        return "open (a count that did not settle, see *)" if measured else "not measured"
    return "met" if met else "MISSED"


def request_rows(
    report: dict[str, Any], size: int
) -> tuple[list[str], list[str], dict[str, dict[str, float]]]:
    """(subject keys with requests at this size, rows shown, per-pod value by row then subject)."""
    keys = [key for key in report["subjects"] if entry(report, key, size).get("requests")]
    values: dict[str, dict[str, float]] = {}
    for key in keys:
        for row, counts in entry(report, key, size)["requests"]["rows"].items():
            if row.startswith("WATCH "):
                continue
            values.setdefault(row, {})[key] = counts["daemon_per_pod"]
    shown = sorted(
        (row for row, by_key in values.items() if max(by_key.values()) >= SMALL_ROW),
        key=lambda row: -max(values[row].values()),
    )
    return keys, shown, values


def requests_markdown(report: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    background = report["background"]
    for size in report["settings"]["sizes"]:
        keys, shown, values = request_rows(report, size)
        if not keys:
            continue
        short = [report["subjects"][key]["short"] for key in keys]
        lines += [
            "",
            f"Requests per pod to Running by verb and resource, N = {size} (the daemon's share):",
            "",
            "| verb resource | " + " | ".join(short) + " |",
            "|---|" + "---:|" * len(keys),
        ]
        for row in shown:
            cells = [cell(values[row].get(key), "{:.3f}") for key in keys]
            lines.append(f"| {row} | " + " | ".join(cells) + " |")
        other = [
            sum(by_key.get(key, 0.0) for row, by_key in values.items() if row not in shown) for key in keys
        ]
        lines.append("| other rows | " + " | ".join(f"{value:.3f}" for value in other) + " |")
        totals = [entry(report, key, size)["requests"] for key in keys]
        lines.append("| **total** | " + " | ".join(f"**{t['per_pod']:.2f}**" for t in totals) + " |")
        lines.append(
            "| apiserver's count before subtraction | "
            + " | ".join(f"{t['apiserver_total_per_pod']:.2f}" for t in totals)
            + " |"
        )
        lines.append(
            "| pod watch events sent to all watchers | "
            + " | ".join(f"{t['pod_watch_events_all_watchers_per_pod']:.2f}" for t in totals)
            + " |"
        )
    if lines:
        lines += [
            "",
            "How requests are counted: kube-apiserver's `apiserver_request_total` (GET /metrics, admin "
            "kubeconfig) summed by verb and resource/subresource, read just before the bench's list+watch "
            "of the run's namespace starts and, after the last pod is seen Running, once the daemon's "
            "requests on pods and Events have stopped for 3 s (at most --settle-seconds; a daemon at 5 QPS "
            "still sends queued Events then; each run's wait is in the JSON, and a run marked * had not "
            "stopped, or was not waited for, so its count is a lower bound). From each row the "
            "bench subtracts (1) its own requests, which it counts (the pod creates, retries included, and "
            "its list of the namespace; the LimitRanger admission plugin's LIST of limitranges for the "
            "new namespace is the bench's too), and (2) the rest of the plane (controller-manager's and "
            "scheduler's leader-election Leases, the apiserver's own Lease) as the row's rate over "
            f"{background['seconds']:.0f} s with no daemon running times the run's window; never below "
            "zero. What is left is the daemon's: its pod status and metadata writes, Events, its Node, "
            "Lease and any reads. WATCH requests are left out: the apiserver counts a watch when it ends, "
            "and a watch's cost is its events. `pod watch events per pod` is what the bench's own watch "
            "of the namespace received over the same window (ADDED and MODIFIED): what every watcher "
            "of those pods receives; `sent to all watchers` is the apiserver's "
            "`apiserver_watch_events_total` for pods over the window, less the background, per pod.",
        ]
    return lines


def write_markdown(path: Path, report: dict[str, Any]) -> None:
    versions = report["versions"]
    settings = report["settings"]
    lines = [
        f"# Pods to Running: vk-provider vs virtual-kubelet ({report['started_at']})",
        "",
        f"Machine: {describe_machine(report['machine'])}; Kubernetes {versions.get('kubernetes', '?')} "
        "control plane on the same machine (it shares the CPUs with the daemon under test).",
        "",
        f"Daemons: virtual-kubelet {versions.get(VK, '—')} (mock provider); "
        f"vk-provider {versions.get(OURS, '—')} (mock provider). Variants: {', '.join(settings['variants'])}"
        + (
            f"; above {settings['detail_max_pods']} pods no same-budget run and no settle"
            if settings.get("detail_max_pods")
            else ""
        )
        + ".",
        f"Pods created with at most {settings['concurrency']} requests in flight, spec.nodeName set at "
        "creation; latency = first watch event with phase Running minus the creation's 201 response "
        "(client-side clock). Throughput = N / (last Running - first creation).",
        "",
        "| N | daemon, client budget | " + " | ".join(heading for _, heading, _ in COLUMNS) + " |",
        "|---:|---|" + "---:|" * len(COLUMNS),
    ]
    for row in table_rows(report):
        if row["error"]:
            lines.append(f"| {row['size']} | {row['label']} | FAILED: {row['error'].splitlines()[0]} |")
            continue
        cells = [cell(row[column], fmt) for column, _, fmt in COLUMNS]
        if not row["settled"]:
            cells[-1] += "*"
        lines.append(f"| {row['size']} | {row['label']} | " + " | ".join(cells) + " |")
    lines += ["", "Targets:", ""]
    for target in targets(report):
        lines.append(
            f"- N = {target['size']}: {target['target']}: {cell(target['ratio'], '{:.2f}')} "
            f"({cell(target['ours'], '{:.2f}')} / {cell(target['reference'], '{:.2f}')}), "
            f"{verdict_text(target['met'], target['ratio'] is not None)}"
        )
    lines += requests_markdown(report)
    lines += ["", "Client-side limits, as each run had them:", ""]
    for subject in report["subjects"].values():
        budget = subject["budget"]
        lines.append(f"- {subject['label']}: {budget['how']}")
    lines += ["", "What the daemons' --help says about client-side limits:", ""]
    lines += [f"- {name}: {text}" for name, text in report["findings"].items()]
    skipped = [f"- {key}: {reason.splitlines()[0]}" for key, reason in report["skipped"].items()]
    skipped += [f"- {name}: {reason.splitlines()[0]}" for name, reason in report["unavailable"].items()]
    if skipped:
        lines += ["", "Not run:", "", *skipped]
    lines += [
        "",
        "Raw numbers (p50, creation rate, server-side cross-check, memory detail, every request row "
        "with the bench's and the background's share) are in the JSON file.",
    ]
    path.write_text("\n".join(lines) + "\n")


def print_summary(report: dict[str, Any]) -> None:
    print("\nresults:")
    for row in table_rows(report):
        if row["error"]:
            print(f"  N={row['size']:<5} {row['label']}: FAILED")
            continue
        cells = "  ".join(f"{heading} {cell(row[column], fmt)}" for column, heading, fmt in COLUMNS)
        cells += "" if row["settled"] else " (requests: a lower bound, did not settle)"
        print(f"  N={row['size']:<5} {row['label']}\n      {cells}")
    print("\ntargets:")
    for target in targets(report):
        print(
            f"  N={target['size']:<5} {target['target']}: {cell(target['ratio'], '{:.2f}')} "
            f"{verdict_text(target['met'], target['ratio'] is not None)}"
        )
