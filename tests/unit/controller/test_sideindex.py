"""Route-side counters read once per scrape: the line reader against prometheus_client's parser, and
the index kept while a replica's text stays the same."""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from vk_provider.controller.dataplanes import BuiltinRouters
from vk_provider.controller.gates import METRIC_PREFIX, RETRIED_REASONS, SideSample
from vk_provider.controller.sideindex import RouteSide, SideIndexes, router_side_samples
from vk_provider.offload.spec import parse_offload
from vk_provider.router.metrics import RouterMetrics


def busy_exposition(routes: int) -> str:
    """A router's exposition after traffic on `routes` routes: both sides, several status classes,
    latencies across the buckets, and proxy errors of each kind (a retried `connect` among them)."""
    metrics = RouterMetrics()
    for number in range(routes):
        name = f"svc-{number}"
        for index in range(number % 7 + 3):
            side = "home" if index % 3 else "away"
            metrics.response("ml", name, side, (200, 200, 503, 404)[index % 4], 0.002 * (index + 1) ** 3)
        for reason in ("upstream", "connect", "upstream_broken")[: number % 4]:
            metrics.error("ml", name, "home", reason)
    metrics.response('we"ird', "a\\b", "home", 200, 0.01)  # label values the text must escape
    return metrics.exposition().decode()


def reference_samples(text: str) -> dict[RouteSide, SideSample]:
    """What prometheus_client's general parser reads, summed the way the gates sum."""
    found: dict[RouteSide, dict[str, Any]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            if not sample.name.startswith(METRIC_PREFIX) or "side" not in labels:
                continue
            key = (labels["namespace"], labels["name"], labels["side"])
            if sample.name == f"{METRIC_PREFIX}requests_total":
                counts = found.setdefault(
                    key, {"responses": 0.0, "errors": 0.0, "classes": {}, "buckets": {}}
                )
                counts["responses"] += sample.value
                classes = counts["classes"]
                classes[labels["code"]] = classes.get(labels["code"], 0.0) + sample.value
            elif sample.name == f"{METRIC_PREFIX}errors_total":
                counts = found.setdefault(
                    key, {"responses": 0.0, "errors": 0.0, "classes": {}, "buckets": {}}
                )
                if labels["reason"] not in RETRIED_REASONS:
                    counts["errors"] += sample.value
            elif sample.name == f"{METRIC_PREFIX}response_header_seconds_bucket":
                counts = found.setdefault(
                    key, {"responses": 0.0, "errors": 0.0, "classes": {}, "buckets": {}}
                )
                bound = float(labels["le"])
                counts["buckets"][bound] = counts["buckets"].get(bound, 0.0) + sample.value
    return {
        key: SideSample(
            counts["responses"],
            tuple(sorted(counts["classes"].items())),
            counts["errors"],
            tuple(sorted(counts["buckets"].items())),
        )
        for key, counts in found.items()
    }


def test_the_line_reader_reads_what_the_general_parser_reads() -> None:
    text = busy_exposition(40)
    ours = router_side_samples(text)
    assert ours == reference_samples(text)
    assert len(ours) == 40 * 2 + 1
    assert ours[('we"ird', "a\\b", "home")].responses == 1
    assert ours[("ml", "svc-3", "home")].proxy_errors == 2  # upstream and connect: connect was retried


def test_lines_it_cannot_read_cost_only_themselves() -> None:
    good = busy_exposition(2)
    broken = f'{METRIC_PREFIX}requests_total{{code="2xx",namespace="ml",name="svc-9",side="home"}} many\n'
    broken += f'{METRIC_PREFIX}requests_total{{code="2xx",namespace="ml"}} 3.0\n'
    assert router_side_samples(good + broken) == router_side_samples(good)


def test_an_index_is_built_once_per_text_of_a_replica() -> None:
    built: list[str] = []

    def index(text: str) -> dict[str, SideSample]:
        built.append(text)
        return {text: SideSample(responses=1.0)}

    indexes: SideIndexes[str] = SideIndexes(index)
    for _ in range(100):
        indexes.of("http://router-a", "first")
        indexes.of("http://router-b", "first")
    assert built == ["first", "first"]
    assert indexes.of("http://router-a", "second") == {"second": SideSample(responses=1.0)}
    indexes.keep_only({"http://router-a"})
    indexes.of("http://router-b", "first")
    assert built == ["first", "first", "second", "first"]


class OneRouter:
    """The two reads `BuiltinRouters.samples` makes of its directory, answered from memory."""

    def __init__(self, text: str) -> None:
        self.text = text

    async def urls(self) -> list[str]:
        return ["http://router-a"]

    async def metrics(self) -> list[str]:
        return [self.text]


async def test_a_hundred_offloads_sampled_from_one_scrape_parse_it_once(monkeypatch: Any) -> None:
    parsed: list[int] = []

    def counted(text: str) -> dict[RouteSide, SideSample]:
        parsed.append(len(text))
        return router_side_samples(text)

    monkeypatch.setattr("vk_provider.controller.dataplanes.router_side_samples", counted)
    routers = BuiltinRouters(OneRouter(busy_exposition(100)))  # type: ignore[arg-type]
    for number in range(100):
        spec = parse_offload(
            {
                "metadata": {"namespace": "ml", "name": f"svc-{number}"},
                "spec": {
                    "home": {"deployment": "d", "service": "s"},
                    "placement": "home",
                    "route": {"hosts": [f"svc-{number}.test"]},
                },
            }
        )
        samples = await routers.samples(spec, "home")
        assert samples["http://router-a"].responses > 0
    assert len(parsed) == 1
