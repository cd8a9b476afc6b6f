"""The Markdown of a time_to_train result: the table (variant, cold start, wait, failed requests), the
Offload's phases as seen, the targets, and what could not run."""

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


def table_rows(variants: list[dict[str, Any]]) -> list[list[str]]:
    rows = []
    for variant in variants:
        if "wait_seconds" not in variant:
            rows.append(
                [f"({variant['variant']}) {variant['title']}", "—", "could not run", "—", "—", "—", "—"]
            )
            continue
        warmth = variant.get("warmth") or {}
        before = warmth.get("lead_seconds", warmth.get("warm_seconds"))
        rows.append(
            [
                f"({variant['variant']}) {variant['title']}",
                cell(variant["cold_start_seconds"], "{:.0f} s"),
                cell(variant["wait_seconds"], "{:.1f} s"),
                cell(variant.get("wait_ratio_to_a"), "{:.2f}"),
                f"{variant['failed']} of {variant['requests']:,}",
                cell(variant.get("shift_seconds"), "{:.1f} s"),
                cell(before, "{:.0f} s"),
            ]
        )
    return rows


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
        retries = last_stage.get("gang_retries_seconds") or []
        gone, bound = moments["home_pods_gone"], moments["all_bound_seen"]
        rows.append(
            [
                f"({variant['variant']})",
                cell(moments["succeeded"], "{:.1f}"),
                cell(min(deleting) if deleting else None, "{:.1f}"),
                cell(gone, "{:.1f}"),
                cell(bound, "{:.1f}"),
                cell(bound - gone if bound is not None and gone is not None else None, "{:.1f}"),
                ", ".join(f"{moment:.1f}" for moment in retries) or "—",
            ]
        )
    return rows


def freed_earlier(variants: list[dict[str, Any]]) -> str | None:
    """How much earlier (b) freed the home GPUs than (a), to set beside how much earlier it was bound."""
    seen = {
        variant["variant"]: summary(variant["last_stage"], None)
        for variant in variants
        if variant.get("last_stage") is not None
    }
    today, early = seen.get("a"), seen.get("b")
    if today is None or early is None:
        return None
    gone_a, gone_b = today["home_pods_gone"], early["home_pods_gone"]
    bound_a, bound_b = today["all_bound_seen"], early["all_bound_seen"]
    if gone_a is None or gone_b is None or bound_a is None or bound_b is None:
        return None
    return (
        f"(b) against (a): the home GPUs free {gone_a - gone_b:.1f} s earlier, all pods bound "
        f"{bound_a - bound_b:.1f} s earlier (seen)."
    )


def write_markdown(path: Path, report: dict[str, Any]) -> None:
    settings = report["settings"]
    variants = report["variants"]
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
        f"{settings['stream_share']:.0%} streaming, from before the Job (before the warm-up in b and c) to "
        f"{settings['tail_seconds']:g} s after the service is served away. Early warm-up's lead: "
        f"{settings['lead_seconds']:g} s.",
        "",
        *markdown_table(
            [
                "variant",
                "cold start",
                "wait (Job created -> all pods bound)",
                "wait / (a)",
                "failed requests",
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
        *((line, "") if (line := freed_earlier(variants)) else ()),
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
