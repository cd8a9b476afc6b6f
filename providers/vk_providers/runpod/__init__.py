"""The `runpod` provider: each pod of the node runs as a RunPod GPU pod (REST API v2).

A pod must have one container (no init containers) and not set `command` or `workingDir` (RunPod runs
the image's entrypoint with `args`); its container ports, TCP only, are exposed through RunPod's HTTPS
proxy, and the traffic address is `https://<RunPod pod id>-<port>.proxy.runpod.net` for the port named
`http`, else the first. GPUs: the container's `nvidia.com/gpu` limit (or request), else `gpu_count`.

Settings (the provider's section of the node configuration; see `config.RunPodSettings`):
- `api_key_file` (a mounted Secret, re-read when it changes) or `api_key_env` (default RUNPOD_API_KEY);
  the key is sent only in the Authorization header and redacted from every message;
- `gpu_type`, `gpu_count`, `cloud` (SECURE or COMMUNITY), `data_center_ids`, `max_price_per_hour`,
  `disk_gb`: placement defaults; a pod overrides them with the annotations
  `runpod.vk-provider.dev/{gpu-type,cloud,data-centers,max-price-per-hour}`. RunPod's create call has no
  price cap, so the cap is checked against the catalog's list price before creating. `gpu-type` may
  list several types, comma-separated, in order of preference: when RunPod has no capacity for one
  (a 400 in words only), the next the freshly read catalog has in stock is tried, each refusal a
  NoCapacity pod Event (`candidates`);
- refusals: a 400 that is not about capacity fails the pod; 402 (the balance cannot pay) holds every
  create back, 60 s then doubling, and the health check reports InsufficientBalance meanwhile
  (`vk_provider.kit.resilience.refusal`); 429 waits the longer of `Retry-After` and `RateLimit`;
- `api_url` (default https://api.runpod.io/v2) and `proxy_url_template` (default
  https://{pod_id}-{port}.proxy.runpod.net): to point the provider at a stand-in
  (`vk_devtools.standins.runpod.server`);
- `call_timeout_seconds`, `max_attempts`, `backoff_initial_seconds`, `backoff_max_seconds`,
  `max_retry_after_seconds`, `breaker_failure_threshold`, `breaker_open_seconds`,
  `health_timeout_seconds`: resilience;
- `capacity`: what the node advertises, to which the catalog adds GPUs per type
  (`gpu.vk-provider.dev/<type>`, see `vk_provider.kit.placement.capacity`); `name_prefix`,
  `log_idle_seconds`, `error_log_lines`, `catalog_ttl_seconds`;
- `readiness_timeout_seconds`, `readiness_interval_seconds`: RUNNING is not ready: a container with an
  HTTP GET readiness probe is ready only while the probe answers through the proxy (`readiness`).

Capabilities: logs (RunPod's log stream), node capacity, the GPU catalog (`gpu_offers`), and offer
placement (`request_for_offer`: the pod rewritten to run on one of those offers, for the chain). No status
push (the node polls), no pod IP before creation, no usage (RunPod reports utilisation percentages,
not the cumulative CPU time and working set the kubelet's stats need).
"""

from __future__ import annotations

from vk_provider.provider import ProviderContext
from vk_providers.runpod.config import RunPodSettings, parse_settings
from vk_providers.runpod.provider import RunPodProvider


def create_provider(context: ProviderContext) -> RunPodProvider:
    return RunPodProvider(context)


__all__ = ["RunPodProvider", "RunPodSettings", "create_provider", "parse_settings"]
