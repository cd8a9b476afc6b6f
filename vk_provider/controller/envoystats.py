"""One route side's counters in an Envoy's `/stats/prometheus`, as the gates read our router's.

Each side of an Offload is an Envoy cluster (`vk_provider.offload.names.envoy_cluster`), and
Envoy counts per cluster what the gates need:

- `envoy_cluster_upstream_rq_xx{envoy_response_code_class}`: responses by class ("5" is our
  "5xx"), including those Envoy answers itself for the cluster (503 after a failed connection or
  reset, 504 after a timeout), so a failure that reached the client is a 5xx here, as in our
  router's `requests_total{code="5xx"}`;
- `envoy_cluster_upstream_cx_none_healthy`: requests that found no usable endpoint at all, which
  Envoy answers 503 without charging the cluster's response classes;
- `envoy_cluster_upstream_rq_time`: the time to the response's first byte, in MILLISECONDS (our
  router's histogram is in seconds; the bounds are converted). Envoy publishes histograms at each
  stats flush (every second with our bootstrap), so they trail the counters by up to a second.

Not seen here: a stream the endpoint breaks after its head went out (Envoy charged its 200 already).
"""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from vk_provider.controller.gates import SideSample
from vk_provider.offload.names import envoy_cluster, envoy_stat_name

# Families, as prometheus_client names them: a counter's samples get `_total` appended, so samples
# are told apart by the family they are in.
RESPONSE_CLASSES = "envoy_cluster_upstream_rq_xx"
NONE_HEALTHY = "envoy_cluster_upstream_cx_none_healthy"
RESPONSE_TIME = "envoy_cluster_upstream_rq_time"
CLUSTER_LABEL = "envoy_cluster_name"


def parse_envoy_side_sample(text: str, namespace: str, name: str, side: str) -> SideSample:
    """The counters of one route side in one Envoy's `/stats/prometheus` text."""
    cluster = envoy_stat_name(envoy_cluster(namespace, name, side))
    responses = proxy_errors = 0.0
    by_class: dict[str, float] = {}
    buckets: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name not in (RESPONSE_CLASSES, NONE_HEALTHY, RESPONSE_TIME):
            continue
        for sample in family.samples:
            if sample.labels.get(CLUSTER_LABEL) != cluster:
                continue
            if family.name == RESPONSE_CLASSES:
                responses += sample.value
                status_class = f"{sample.labels.get('envoy_response_code_class', '')}xx"
                by_class[status_class] = by_class.get(status_class, 0.0) + sample.value
            elif family.name == NONE_HEALTHY:
                proxy_errors += sample.value
            elif sample.name.endswith("_bucket"):
                bound = float(sample.labels["le"]) / 1000.0  # +Inf stays +Inf
                buckets[bound] = buckets.get(bound, 0.0) + sample.value
    return SideSample(
        responses, tuple(sorted(by_class.items())), proxy_errors, tuple(sorted(buckets.items()))
    )
