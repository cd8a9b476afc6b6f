"""The RunPod stand-in as a process of its own: `python -m vk_devtools.standins.runpod.server` (or
`python -m vk_devtools.standins.runpod`) runs one `FakeRunPod` until it is interrupted or terminated.

The only module that knows the demo's workload: `--pod-app tokens` serves `workloads.token_pod_app`
behind each RUNNING pod, where the default is the echo app.

`--profile realistic` (or `flashboot`) runs RunPod's own timings and refusals (`profile`), and
`--time-scale` shortens its pod timings (0.1: a 42 s cold start); the control API's `/profile` changes
it while it runs. Without `--profile`, pods take 2 s in PROVISIONING and 2 s in STARTING, slow enough
to watch and fast for a development cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from vk_devtools.standins.runpod.profile import PROFILES, Profile
from vk_devtools.standins.runpod.proxy import PodAppFactory, echo_app
from vk_devtools.standins.runpod.standin import running_fake
from vk_devtools.standins.runpod.workloads import token_pod_app
from vk_provider.runtime.signals import until_signalled

DESCRIPTION = (
    "A stand-in for RunPod's REST API v2 (pods, logs, GPU catalog) and its HTTPS proxy, for offline tests."
)
POD_APPS: Mapping[str, PodAppFactory] = {"echo": echo_app, "tokens": token_pod_app}
"""What `--pod-app` chooses between: the echo app, or the demo's token server (`workloads`)."""


STANDALONE_FAST_SECONDS = 2.0
"""The fast profile's PROVISIONING and STARTING out of process: the states stay visible to a person."""


def profile_of(arguments: argparse.Namespace) -> Profile:
    """The profile the command line asks for: the named one, scaled, with any timing given outright."""
    profile = PROFILES[arguments.profile]
    if profile.name == "fast":
        profile = dataclasses.replace(
            profile,
            provisioning_seconds=STANDALONE_FAST_SECONDS,
            starting_seconds=STANDALONE_FAST_SECONDS,
        )
    profile = profile.scaled(arguments.time_scale)
    given = {
        name: getattr(arguments, name)
        for name in ("provisioning_seconds", "starting_seconds", "load_seconds")
        if getattr(arguments, name) is not None
    }
    return profile.updated(given)


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    key = parser.add_mutually_exclusive_group()
    key.add_argument("--api-key", default="rp_fake_0123456789abcdef")
    key.add_argument(
        "--api-key-file", type=Path, help="read the API key from this file (keeps it off the command line)"
    )
    parser.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default="fast",
        help="fast (the default); realistic: RunPod's cold start, proxy timeout and rate limits; flashboot",
    )
    parser.add_argument(
        "--time-scale", type=float, default=1.0, help="multiply the profile's pod timings by this"
    )
    parser.add_argument(
        "--provisioning-seconds",
        type=float,
        help=f"default: the profile's ({STANDALONE_FAST_SECONDS:g} with the fast profile)",
    )
    parser.add_argument(
        "--starting-seconds",
        type=float,
        help=f"default: the profile's ({STANDALONE_FAST_SECONDS:g} with the fast profile)",
    )
    parser.add_argument("--load-seconds", type=float, help="default: the profile's")
    parser.add_argument(
        "--pod-app",
        choices=sorted(POD_APPS),
        default="echo",
        help="what each RUNNING pod serves on its HTTP ports: an echo app, or the demo's token server",
    )
    parser.add_argument("--addresses-file", type=Path, help="also write the addresses JSON to this file")
    return parser.parse_args(argv)


async def serve(arguments: argparse.Namespace, api_key: str, stop: asyncio.Event) -> None:
    """Run the stand-in until `stop` is set; print one JSON line with its addresses first (and write
    them to `--addresses-file`)."""
    async with running_fake(
        api_key=api_key, profile=profile_of(arguments), pod_app=POD_APPS[arguments.pod_app]
    ) as fake:
        addresses = {
            "api_url": fake.api_url,
            "proxy_url_template": fake.proxy_url_template,
            "control_url": fake.control_url,
        }
        print(json.dumps(addresses), flush=True)
        if arguments.addresses_file is not None:
            _write_addresses(arguments.addresses_file, addresses)
        await stop.wait()


def _write_addresses(path: Path, addresses: Mapping[str, str]) -> None:
    """Write the JSON of addresses whole (a reader polling for the file never sees half of it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(addresses) + "\n")
    temporary.replace(path)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the fake until interrupted or terminated; print one JSON line with its addresses first.

    The ports are ephemeral; `--addresses-file` also writes that JSON to a file, once every address
    answers, so a supervisor (the development cluster) can wait for it and configure its node from it.
    """
    arguments = parse_arguments(argv)
    api_key: str = arguments.api_key
    if arguments.api_key_file is not None:
        api_key = arguments.api_key_file.read_text().strip()

    # SIGTERM (how `vk-provider dev down` stops components) or Ctrl-C closes the pods' servers cleanly.
    asyncio.run(until_signalled(lambda stop: serve(arguments, api_key, stop), slow_stop_seconds=None))


if __name__ == "__main__":
    main()
