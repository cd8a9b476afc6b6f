"""`vk_provider_build_info`: Prometheus' build_info idiom, one series per process, always 1.

Every component (node daemon, router, controller) exports it, so a dashboard can show which version
runs where, count the versions during a rollout, or join the version onto any other series of the
same target (`* on (instance) group_left (version) vk_provider_build_info`).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge

from vk_provider import __version__

BUILD_INFO = "vk_provider_build_info"


def register_build_info(registry: CollectorRegistry) -> None:
    Gauge(
        BUILD_INFO,
        "The running component's vk-provider version (always 1).",
        ["version"],
        registry=registry,
    ).labels(__version__).set(1)
