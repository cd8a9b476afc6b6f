"""The `local` provider: pods bound to the virtual node run as processes on this host.

It plays the home GPU nodes of a development cluster that has no real kubelets. Each pod gets a
loopback address of its own (127.x.y.z), each container's `command` + `args` runs under a small
monitor process (so containers, logs and exit codes survive the daemon), and restarts, probes, graceful
deletion, logs and usage behave as a kubelet's. See `vk_providers.local.provider` for the state folder.

Settings (the provider's section of the node configuration):
- `address_range` (default 127.1.0.0/16): where pod addresses come from; never 127.0.0.1;
- `restart_backoff_initial_seconds` (10) and `restart_backoff_max_seconds` (300): crash-loop back-off;
- `terminated_pod_retention_seconds` (600): how long a deleted, stopped pod is kept if the node does
  not delete it again;
- `capacity`: resources to advertise, e.g. {"nvidia.com/gpu": "8"};
- `inherited_env` (PATH, HOME, LANG, LC_ALL, TZ, TMPDIR, USER, LOGNAME): daemon variables passed on to
  containers that do not set them;
- `unhealthy_marker_file`: while this file exists the health check fails (to test provider outages);
- `image_entrypoints`: image name -> argv standing in for its ENTRYPOINT, run (with `args`) by a
  container of that image that sets no `command` (like pods meant for RunPod, which takes `args` only).
- `mount_volumes` (false): bind each container's volumes at their mount paths in a mount namespace of
  its own, the ServiceAccount token the node requests and rotates among them (needs root; see `mounts`
  and `volumes`).

This module stays light on purpose: `python -m vk_providers.local.monitor` imports it before the
monitor, at every container start, so the provider itself is imported only when it is created.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vk_provider.provider import ProviderContext
    from vk_providers.local.provider import LocalProvider


def create_provider(context: ProviderContext) -> LocalProvider:
    from vk_providers.local.provider import LocalProvider  # noqa: PLC0415 -- kept out of the monitor's start

    return LocalProvider(context)


__all__ = ["create_provider"]
