"""The `mock` provider: pods live in memory and run the moment they are created.

For conformance tests and benchmarks: it exercises the whole node (watch, queue, status writes,
deletion) with a provider that costs nothing, so what is measured is the node itself.

Settings (the provider's section of the node configuration):
- `pod_cidr` (default 10.200.0.0/16): pod IPs are handed out from here, one per pod UID;
- `capacity`: extra resources to advertise, e.g. {"nvidia.com/gpu": "8"};
- `traffic_port` (default 8080): pods publish http://<podIP>:<port> as their traffic address;
- `unhealthy_marker_file`: while this file exists the health check fails (to test provider outages);
- `log_follow_interval_seconds` (default 1): how often a followed log gets a new line.

Logs and usage are synthetic and deterministic (see `vk_providers.mock.provider`): ten log lines per
container, then one more per interval when following; 0.1 core of CPU per running container since it
started, and a working set of 64 MiB each.

A pod labelled `mock.vk-provider.dev/fail-create=<message>` fails to create (to test failure handling).
"""

from __future__ import annotations

from vk_provider.provider import ProviderContext
from vk_providers.mock.provider import MockProvider


def create_provider(context: ProviderContext) -> MockProvider:
    return MockProvider(context)


__all__ = ["MockProvider", "create_provider"]
