"""The Markdown of a time_to_train result: the table (variant, cold start, wait, failed requests, the
Workload's admission when queued through Kueue), the Offload's phases as seen, the last stage, the
Kueue Workloads' steps, the targets, and what could not run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from time_to_train_last_stage import summary

from benchkit import cell, describe_machine, markdown_table

PHASES = ("Preparing", "Shifting", "Finalizing", "Succeeded")
STAGES = (
    ("to the flip", None, "Preparing"),
    ("warming the away side", "Preparing", "Shifting"),
    ("shifting traffic", "Shifting", "Succeeded"),
    ("home pods leaving, scheduling", "Succeeded", None),
)
"""The wait split at the Offload's phases: (name, from phase, to phase); None is the Job's creation at
the start and all pods bound at the end."""


def verdict(met: bool | None) -> str:
    return {True: "met", False: "NOT met", None: "not measured"}[met]


KUEUE_STEPS = (
    ("Workload", "workload"),
    ("quota reserved", "quota_reserved"),
    ("check Pending", "check_Pending"),
    ("check Ready", "check_Ready"),
    ("admitted", "admitted"),
    ("first pod", "first_pod"),
)
"""The Workload's steps as time_to_train_kueue.WorkloadWatch records them: (column, key)."""


def table_rows(variants: list[dict[str, Any]]) -> list[list[str]]:
    rows = []
    for variant in variants:
        if "wait_seconds" not in variant:
            rows.append(
                [f"({variant['variant']}) {variant['title']}", "—", "could not run", "—", "—", "—", "—", "—"]
            )
            continue
        warmth = variant.get("warmth") or {}
        before = warmth.get("lead_seconds", warmth.get("warm_seconds"))
        against = variant.get("wait_ratio_to_peer")
        rows.append(
            [
                f"({variant['variant']}) {variant['title']}",
                cell(variant["cold_start_seconds"], "{:.0f} s"),
                cell(variant["wait_seconds"], "{:.1f} s"),
                "—" if against is None else f"{against:.2f} ({variant['peer']})",
                f"{variant['failed']} of {variant['requests']:,}",
                cell(variant.get("admitted_seconds"), "{:.1f} s"),
                cell(variant.get("shift_seconds"), "{:.1f} s"),
                cell(before, "{:.0f} s"),
            ]
        )
    return rows


def kueue_rows(variants: list[dict[str, Any]]) -> list[list[str]]:
    rows = []
    for variant in variants:
        queued = variant.get("kueue")
        if queued is None:
            continue
        seen = queued["seen_seconds_after_job"]
        admitted = seen.get("admitted")
        rows.append(
            [
                f"({variant['variant']})",
                *(cell(seen.get(key), "{:.1f}") for _, key in KUEUE_STEPS),
                cell(variant["wait_seconds"], "{:.1f}"),
                cell(variant["wait_seconds"] - admitted if admitted is not None else None, "{:.1f}"),
                cell(queued.get("check_ready_api_seconds_after_job"), "{:.0f}"),
                cell(queued.get("admitted_api_seconds_after_job"), "{:.0f}"),
            ]
        )
    return rows


def check_messages(variants: list[dict[str, Any]]) -> list[str]:
    """Each Kueue variant's check states and messages as they changed, one line a variant."""
    lines = []
    for variant in variants:
        changes = (variant.get("kueue") or {}).get("check_changes")
        if changes:
            said = "; ".join(f'{c["seconds"]:.1f} s {c["state"]}: "{c["message"]}"' for c in changes)
            lines += [f"- ({variant['variant']}) {said}"]
    return lines


def stage_seconds(variant: dict[str, Any], start: str | None, end: str | None) -> float | None:
    seen = variant["phases_seconds_after_job"]
    began = 0.0 if start is None else seen.get(f"away/{start}")
    ended = variant["wait_seconds"] if end is None else seen.get(f"away/{end}")
    if began is None or ended is None:
        return None
    return float(ended - began)


def phase_rows(variants: list[dict[str, Any]]) -> list[list[str]]:
    rows = []
    for variant in variants:
        seen = variant.get("phases_seconds_after_job")
        if seen is None:
            continue
        bound = variant.get("bound_seconds_podscheduled") or []
        rows.append(
            [
                f"({variant['variant']})",
                *(cell(seen.get(f"away/{phase}"), "{:.1f}") for phase in PHASES),
                f"{bound[0]}-{bound[-1]}" if bound else "—",
                *(cell(stage_seconds(variant, start, end), "{:.1f}") for _, start, end in STAGES),
            ]
        )
    return rows


def last_stage_rows(variants: list[dict[str, Any]]) -> list[list[str]]:
    rows = []
    for variant in variants:
        last_stage = variant.get("last_stage")
        if last_stage is None:
            continue
        moments = summary(last_stage, variant["phases_seconds_after_job"].get("away/Succeeded"))
        deleting = list(last_stage.get("home_pods_deleting_seen_seconds", {}).values())
        retries = last_stage.get("gang_retries_seconds")
        gone, bound = moments["home_pods_gone"], moments["all_bound_seen"]
        rows.append(
            [
                f"({variant['variant']})",
                cell(moments["succeeded"], "{:.1f}"),
                cell(min(deleting) if deleting else None, "{:.1f}"),
                cell(gone, "{:.1f}"),
                cell(bound, "{:.1f}"),
                cell(bound - gone if bound is not None and gone is not None else None, "{:.1f}"),
                "no gang (queued)"
                if retries is None
                else ", ".join(f"{moment:.1f}" for moment in retries) or "—",
            ]
        )
    return rows


def freed_earlier(variants: list[dict[str, Any]], early_key: str, today_key: str) -> str | None:
    """How much earlier the early warm-up `early_key` freed the home GPUs than `today_key`, to set
    beside how much earlier it was bound."""
    seen = {
        variant["variant"]: summary(variant["last_stage"], None)
        for variant in variants
        if variant.get("last_stage") is not None
    }
    today, early = seen.get(today_key), seen.get(early_key)
    if today is None or early is None:
        return None
    gone_today, gone_early = today["home_pods_gone"], early["home_pods_gone"]
    bound_today, bound_early = today["all_bound_seen"], early["all_bound_seen"]
    if gone_today is None or gone_early is None or bound_today is None or bound_early is None:
        return None
    return (
        f"({early_key}) against ({today_key}): the home GPUs free {gone_today - gone_early:.1f} s earlier, "
        f"all pods bound {bound_today - bound_early:.1f} s earlier (seen)."
    )


def kueue_section(variants: list[dict[str, Any]]) -> list[str]:
    """The Kueue variants' Workload steps and our check's messages; nothing when none ran."""
    rows = kueue_rows(variants)
    if not rows:
        return []
    return [
        "The Kueue Workload's steps, seconds after the Job's creation as first seen (0.5 s polling): the "
        "Workload made, its quota reserved, our check Pending and Ready, the Workload admitted (the Job "
        "unsuspended), its first pod seen; then all pods bound, admitted -> all bound, and the API's own "
        "times (whole seconds, after the Job's creationTimestamp) of the check's Ready and the admission:",
        "",
        *markdown_table(
            [
                "variant",
                *(name for name, _ in KUEUE_STEPS),
                "all pods bound",
                "admitted -> bound",
                "check Ready (API)",
                "admitted (API)",
            ],
            rows,
        ),
        "",
        "Our check's state and message as they changed (seconds after the Job's creation):",
        "",
        *check_messages(variants),
        "",
    ]


def warm_up_pairs(variants: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(early warm-up variant, its peer) for each early warm-up that ran."""
    return [
        (variant["variant"], variant["peer"])
        for variant in variants
        if variant.get("warm") == "warm-up" and "peer" in variant
    ]


def write_markdown(path: Path, report: dict[str, Any]) -> None:
    settings = report["settings"]
    variants = report["variants"]
    comparisons = [
        line
        for early_key, today_key in warm_up_pairs(variants)
        if (line := freed_earlier(variants, early_key, today_key))
    ]
    lines = [
        f"# time_to_train, {report['started_at']}",
        "",
        f"{describe_machine(report['machine'])}; shared with other sessions' tests. `uptime` at the start: "
        f"`{report['uptime_at_start']}`; at the end: `{report['uptime_at_end']}`.",
        "",
        "A training Job of 8 pods x 1 GPU (a gang) on a home node of 8 GPUs, 2 of which the example "
        "service holds; the away side on the RunPod stand-in's REALISTIC profile scaled by "
        f"{settings['scale_of_realistic_profiles']:.3f} (RunPod's 420 s cold start to "
        f"{settings['cold_start_seconds_runpod']:.0f} s; SageMaker's 525 s by the same factor), its rate "
        f"limits left out. Load: {settings['rate']:g} requests/s through the router, "
        f"{settings['stream_share']:.0%} streaming, from before the Job (before the warm-up in b, c and g) "
        f"to {settings['tail_seconds']:g} s after the service is served away. Early warm-up's lead: "
        f"{settings['lead_seconds']:g} s. kube-scheduler's podMaxBackoffSeconds: "
        f"{scheduler_backoff(settings)}. Variants a-e: the Job's pods a native gang (PodGroup); f and g: "
        "the Job queued through Kueue behind our AdmissionCheck (manifests/examples/kueue.yaml and "
        "kueue-job.yaml, no PodGroup: its pods are created when Kueue admits the Workload). Each wait is "
        "set against its peer's: (a) for a-e, (f) for f and g.",
        "",
        *markdown_table(
            [
                "variant",
                "cold start",
                "wait (Job created -> all pods bound)",
                "wait / peer",
                "failed requests",
                "Workload admitted (seen)",
                "traffic shift",
                "warm before the Job",
            ],
            table_rows(variants),
        ),
        "",
        "Offload phases (away), seconds after the Job's creation, as first seen (0.5 s polling; a phase "
        "shorter than that may not be seen), the pods' PodScheduled times (whole seconds), and the wait "
        "split at those phases (seconds):",
        "",
        *markdown_table(
            ["variant", *PHASES, "pods bound (PodScheduled)", *(name for name, _, _ in STAGES)],
            phase_rows(variants),
        ),
        "",
        "The last stage taken apart, seconds after the Job's creation (0.5 s polling): the move's end "
        "(Succeeded seen), the home pods first seen marked for deletion and the last of them gone (their "
        "GPUs free), the last Job pod seen bound, and kube-scheduler's failed attempts at the gang (its "
        "log's `Error scheduling pod; retrying` lines for the PodGroup; the attempt that binds logs none):",
        "",
        *markdown_table(
            [
                "variant",
                "Succeeded",
                "home pods deleting",
                "home pods gone",
                "all pods bound (seen)",
                "gone -> bound",
                "gang's failed attempts",
            ],
            last_stage_rows(variants),
        ),
        "",
        *kueue_section(variants),
        *(part for line in comparisons for part in (line, "")),
        *(
            f"({variant['variant']}): the first member refused {variant['capacity_refusals_at_first']} "
            "creates for capacity; the second served them."
            for variant in variants
            if variant.get("capacity_refusals_at_first") is not None
        ),
        "",
        "Targets (issue 33):",
        "",
        *(
            f"- {target['target']}: {target['measured']}: **{verdict(target['met'])}**"
            for target in report["targets"]
        ),
        "",
    ]
    failed = [variant for variant in variants if "error" in variant]
    if failed:
        lines += [
            "Could not run:",
            "",
            *(f"- ({v['variant']}) {v['title']}: {v['error']}" for v in failed),
            "",
        ]
    path.write_text("\n".join(lines))


def scheduler_backoff(settings: dict[str, Any]) -> str:
    """The planes' podMaxBackoffSeconds, and what it makes of a gang of 8's longest backoff (x sqrt 8)."""
    seconds = settings.get("scheduler_pod_max_backoff_seconds")
    stock = seconds is None
    value = 10 if seconds is None else int(seconds)
    gang = value * 8**0.5
    where = "upstream default" if stock else "set"
    return f"{value} s ({where}: a gang of 8 retried at most {gang:.1f} s apart)"
