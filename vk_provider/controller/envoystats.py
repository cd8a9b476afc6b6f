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
    """The counters of one route side in one Envoy's `/stats/prometheus` text (all zero if absent)."""
    return envoy_side_samples(text).get(envoy_side_key(namespace, name, side), SideSample())


def envoy_side_key(namespace: str, name: str, side: str) -> str:
    """The cluster's name as Envoy's statistics spell it: the key of `envoy_side_samples`."""
    return envoy_stat_name(envoy_cluster(namespace, name, side))


def envoy_side_samples(text: str) -> dict[str, SideSample]:
    """Every cluster's counters in one Envoy's `/stats/prometheus` text, by `envoy_side_key`."""
    responses: dict[str, float] = {}
    proxy_errors: dict[str, float] = {}
    by_class: dict[str, dict[str, float]] = {}
    buckets: dict[str, dict[float, float]] = {}
    for family in text_string_to_metric_families(text):
        if family.name not in (RESPONSE_CLASSES, NONE_HEALTHY, RESPONSE_TIME):
            continue
        for sample in family.samples:
            cluster = sample.labels.get(CLUSTER_LABEL)
            if cluster is None:
                continue
            if family.name == RESPONSE_CLASSES:
                responses[cluster] = responses.get(cluster, 0.0) + sample.value
                classes = by_class.setdefault(cluster, {})
                status_class = f"{sample.labels.get('envoy_response_code_class', '')}xx"
                classes[status_class] = classes.get(status_class, 0.0) + sample.value
            elif family.name == NONE_HEALTHY:
                proxy_errors[cluster] = proxy_errors.get(cluster, 0.0) + sample.value
            elif sample.name.endswith("_bucket"):
                bound = float(sample.labels["le"]) / 1000.0  # +Inf stays +Inf
                bounds = buckets.setdefault(cluster, {})
                bounds[bound] = bounds.get(bound, 0.0) + sample.value
    clusters = {*responses, *proxy_errors, *buckets}
    return {
        cluster: SideSample(
            responses.get(cluster, 0.0),
            tuple(sorted(by_class.get(cluster, {}).items())),
            proxy_errors.get(cluster, 0.0),
            tuple(sorted(buckets.get(cluster, {}).items())),
        )
        for cluster in clusters
    }
