"""What the apiserver served during a run, by verb and resource, from its own counters.

Why: a daemon's throughput under a client-side rate limit is its budget divided by the requests each
pod costs, and every pod write is also a watch event for every watcher in the cluster. So the
benchmark counts requests where they land, in kube-apiserver's `apiserver_request_total` (labels
verb, group, resource, subresource; summed here over code, scope, version and component), and pod
watch events in `apiserver_watch_events_total`, scraped from GET /metrics with the plane's admin
kubeconfig just before the first pod is created and, after the last one is seen Running, once the
daemon's requests on pods and Events have stopped (`settle`): writes a daemon queued behind its
client-side limit are part of what the pods cost.

The difference holds three things, and `attribute` separates them:

- the benchmark's own requests (its pod creates and its list of the namespace's pods), which it
  counts itself and subtracts row by row;
- the rest of the plane (kube-controller-manager's and kube-scheduler's leader-election Leases, the
  apiserver's own identity Lease and its periodic work), estimated from a window with no daemon
  running (`Background`) and subtracted as its rate times the run's window, row by row, never below
  zero;
- the daemon under test: what is left.

WATCH rows are kept apart and not counted in requests per pod: the apiserver counts a watch when it
ends, not when it starts, so whether one falls inside a window is chance, and a watch's cost is its
events, which are counted on their own. Non-resource requests (GET /metrics, /readyz) are dropped.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import time
from collections.abc import Iterator, Mapping

import aiohttp
from kubernetes_asyncio import client

REQUESTS_METRIC = "apiserver_request_total"
WATCH_EVENTS_METRIC = "apiserver_watch_events_total"
_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)\{(?P<labels>.*)\}\s+(?P<value>\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')

Row = tuple[str, str]
"""(verb, resource): e.g. ("PATCH", "pods/status"), ("PUT", "leases.coordination.k8s.io")."""


def counter_samples(text: str, name: str) -> Iterator[tuple[dict[str, str], float]]:
    """The labelled samples of one counter in Prometheus text format, as (labels, value)."""
    prefix = name + "{"
    for line in text.splitlines():
        if not line.startswith(prefix):
            continue
        match = _SAMPLE.match(line)
        if match is None or match.group("name") != name:
            continue
        labels = dict(_LABEL.findall(match.group("labels")))
        yield labels, float(match.group("value"))


def row_name(labels: Mapping[str, str]) -> str:
    """`resource[/subresource][.group]` as kubectl spells it: pods/status, leases.coordination.k8s.io."""
    resource = labels.get("resource", "")
    if labels.get("subresource"):
        resource += "/" + labels["subresource"]
    if labels.get("group"):
        resource += "." + labels["group"]
    return resource


@dataclasses.dataclass(frozen=True, slots=True)
class Snapshot:
    """The two counters at one moment (monotonic clock of this machine)."""

    at: float
    requests: dict[Row, float]
    pod_watch_events: float

    @classmethod
    def parse(cls, text: str, at: float) -> Snapshot:
        requests: dict[Row, float] = {}
        for labels, value in counter_samples(text, REQUESTS_METRIC):
            if not labels.get("resource"):
                continue  # non-resource: /metrics, /readyz, /version
            row = (labels.get("verb", "?"), row_name(labels))
            requests[row] = requests.get(row, 0.0) + value
        # Kubernetes labels watch events by kind ("Pod") up to 1.30 and by resource ("pods") since.
        events = sum(
            value
            for labels, value in counter_samples(text, WATCH_EVENTS_METRIC)
            if labels.get("group", "") == ""
            and (labels.get("kind") == "Pod" or labels.get("resource") == "pods")
        )
        return cls(at=at, requests=requests, pod_watch_events=events)

    def minus(self, earlier: Snapshot) -> dict[Row, float]:
        """Requests per row between two snapshots; a row that shrank (an apiserver restart) counts 0."""
        return {
            row: max(0.0, value - earlier.requests.get(row, 0.0))
            for row, value in self.requests.items()
            if value - earlier.requests.get(row, 0.0) > 0
        }


def pod_traffic(rows: Mapping[Row, float]) -> float:
    """Requests on pods (any subresource) and Events, WATCH excluded: what a daemon's pod work writes."""
    return sum(
        count
        for (verb, resource), count in rows.items()
        if verb != "WATCH" and resource.split("/")[0].split(".")[0] in ("pods", "events")
    )


async def settle(
    api: client.ApiClient, *, quiet_seconds: float, max_seconds: float
) -> tuple[Snapshot, float, bool]:
    """After the last pod is Running, read the counters until `quiet_seconds` pass with no request on
    pods or Events (the bench's creates are all done by then), at most `max_seconds`. A daemon whose
    writes queue behind a client-side limit (virtual-kubelet's Events at 5 QPS) sends part of each
    pod's cost after the pod is Running; this counts it.

    Returns the last snapshot, the seconds waited, and whether the writes stopped within max_seconds
    (False at once when max_seconds is 0: no settle).
    """
    started = time.monotonic()
    previous = await scrape(api)
    if max_seconds <= 0:
        return previous, 0.0, False
    while time.monotonic() - started < max_seconds:
        await asyncio.sleep(quiet_seconds)  # (noqa: sleep-ok) sampling interval of the counters
        current = await scrape(api)
        if pod_traffic(current.minus(previous)) == 0:
            return current, time.monotonic() - started, True
        previous = current
    return previous, time.monotonic() - started, False


async def scrape(api: client.ApiClient) -> Snapshot:
    """GET /metrics from the apiserver with the ApiClient's credentials (the admin kubeconfig)."""
    url = str(api.configuration.host).rstrip("/") + "/metrics"
    response = await api.rest_client.request("GET", url, _preload_content=False)
    if not isinstance(response, aiohttp.ClientResponse):
        raise TypeError(f"expected an aiohttp response, got {type(response).__name__}")
    async with response:
        body = await response.text()
        at = time.monotonic()
    if response.status != 200:
        raise RuntimeError(f"GET /metrics from the apiserver: HTTP {response.status}: {body[:300]}")
    return Snapshot.parse(body, at)


@dataclasses.dataclass(frozen=True, slots=True)
class Background:
    """The plane's own requests per second by row, measured over a window with no daemon running."""

    seconds: float
    rates: dict[Row, float]
    pod_watch_events_per_s: float

    @classmethod
    def between(cls, before: Snapshot, after: Snapshot) -> Background:
        seconds = after.at - before.at
        return cls(
            seconds=seconds,
            rates={row: count / seconds for row, count in after.minus(before).items()},
            pod_watch_events_per_s=max(0.0, after.pod_watch_events - before.pod_watch_events) / seconds,
        )

    @classmethod
    def none(cls) -> Background:
        return cls(seconds=0.0, rates={}, pod_watch_events_per_s=0.0)


def attribute(
    before: Snapshot,
    after: Snapshot,
    *,
    bench_sent: Mapping[Row, int],
    background: Background,
    pods: int,
) -> dict[str, object]:
    """Split one run's window into the bench's requests, the plane's background and the daemon's.

    Returns the JSON of `requests` in a run's result: per row the total the apiserver counted, the
    bench's own, the background estimate and the remainder (the daemon's), plus the daemon's
    requests per pod excluding WATCH, and pod watch events sent to all watchers per pod.
    """
    window = after.at - before.at
    delta = after.minus(before)
    rows: dict[str, dict[str, float]] = {}
    for row in sorted(set(delta) | set(bench_sent)):
        total = delta.get(row, 0.0)
        bench = total if row in CAUSED_BY_BENCH else float(bench_sent.get(row, 0))
        plane = background.rates.get(row, 0.0) * window
        daemon = max(0.0, total - bench - plane)
        rows[f"{row[0]} {row[1]}"] = {
            "apiserver_total": total,
            "bench": bench,
            "background_estimate": plane,
            "daemon": daemon,
            "daemon_per_pod": daemon / pods,
        }
    counted = [entry for key, entry in rows.items() if not key.startswith("WATCH ")]
    pod_events = max(0.0, after.pod_watch_events - before.pod_watch_events)
    return {
        "window_s": window,
        "per_pod": sum(entry["daemon"] for entry in counted) / pods,
        "apiserver_total_per_pod": sum(entry["apiserver_total"] for entry in counted) / pods,
        "bench_total": sum(entry["bench"] for entry in counted),
        "background_estimate_total": sum(entry["background_estimate"] for entry in counted),
        "pod_watch_events_all_watchers_per_pod": max(
            0.0, pod_events - background.pod_watch_events_per_s * window
        )
        / pods,
        "rows": rows,
    }


# The rows of the bench's own requests. The apiserver's verb for a create is POST; LIST and WATCH are
# told apart from GET by the request, not the HTTP method.
CREATE_PODS: Row = ("POST", "pods")
LIST_PODS: Row = ("LIST", "pods")
WATCH_PODS: Row = ("WATCH", "pods")
# Rows the apiserver adds itself while admitting the bench's pod creates, counted as the bench's: the
# LimitRanger admission plugin lists a new namespace's LimitRanges (a live lookup, cached 30 s).
CAUSED_BY_BENCH: frozenset[Row] = frozenset({("LIST", "limitranges")})
