"""The Markdown of a time_to_train result: the table (variant, cold start, wait, failed requests), the
Offload's phases as seen, the targets, and what could not run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
