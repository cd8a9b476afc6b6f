"""Reading a pod's placement annotations and its GPU count; bad values fail the pod with the reason."""

from __future__ import annotations

import pytest

from vk_provider.errors import InvalidPodError
from vk_provider.kit.placement import (
    GPU_COUNT_ANNOTATION,
    GPU_TYPES_ANNOTATION,
    MAX_PRICE_ANNOTATION,
    PROVIDERS_ANNOTATION,
    REGIONS_ANNOTATION,
    PlacementError,
    PlacementRequest,
    gpus_of,
    parse_placement,
)
from vk_provider.provider import ContainerSpec, PodRef, PodRequest


def container(name: str = "server", *, limit: str | None = None, request: str | None = None) -> ContainerSpec:
    return ContainerSpec(
        name=name,
        image="example/server:1",
        limits={"nvidia.com/gpu": limit} if limit is not None else {},
        requests={"nvidia.com/gpu": request} if request is not None else {},
    )


def pod(
    annotations: dict[str, str] | None = None,
    *,
    containers: tuple[ContainerSpec, ...] = (),
    init_containers: tuple[ContainerSpec, ...] = (),
) -> PodRequest:
    return PodRequest(
        ref=PodRef("default", "p", "uid-1"),
        node_name="node",
        containers=containers or (container(),),
        init_containers=init_containers,
        annotations=annotations or {},
    )


def test_a_pod_without_annotations_is_tried_in_order_with_its_gpu_limit() -> None:
    assert parse_placement(pod()) == PlacementRequest()
    assert parse_placement(pod(containers=(container(limit="2"),))) == PlacementRequest(gpu_count=2)


def test_every_annotation_is_read() -> None:
    request = parse_placement(
        pod(
            {
                GPU_TYPES_ANNOTATION: " H100-80GB , A100-80GB ",
                GPU_COUNT_ANNOTATION: "4",
                MAX_PRICE_ANNOTATION: "12.50",
                REGIONS_ANNOTATION: "EU-RO-1,US-KS-2",
                PROVIDERS_ANNOTATION: "runpod,burst",
            }
        )
    )
    assert request == PlacementRequest(
        gpu_types=("H100-80GB", "A100-80GB"),
        gpu_count=4,
        max_price_per_hour=12.5,
        regions=("EU-RO-1", "US-KS-2"),
        providers=("runpod", "burst"),
        uses_catalog=True,
    )
    assert request.describe() == (
        "4 x H100-80GB or A100-80GB, at most $12.50/h, in EU-RO-1 or US-KS-2, on runpod or burst"
    )


@pytest.mark.parametrize(
    "annotation",
    [GPU_TYPES_ANNOTATION, GPU_COUNT_ANNOTATION, MAX_PRICE_ANNOTATION, REGIONS_ANNOTATION],
)
def test_any_catalog_annotation_turns_on_placement_by_price(annotation: str) -> None:
    value = {GPU_COUNT_ANNOTATION: "1", MAX_PRICE_ANNOTATION: "3"}.get(annotation, "X")
    assert parse_placement(pod({annotation: value})).uses_catalog


def test_the_providers_annotation_alone_keeps_trial_in_order() -> None:
    request = parse_placement(pod({PROVIDERS_ANNOTATION: "burst"}))
    assert request == PlacementRequest(providers=("burst",))


def test_placement_by_price_asks_for_one_gpu_when_the_pod_names_none() -> None:
    assert parse_placement(pod({GPU_TYPES_ANNOTATION: "L4"})).gpu_count == 1


def test_the_count_annotation_overrides_the_limit() -> None:
    request = parse_placement(pod({GPU_COUNT_ANNOTATION: "2"}, containers=(container(limit="8"),)))
    assert request.gpu_count == 2


def test_the_gpu_count_is_counted_as_the_scheduler_does() -> None:
    # The limit wins over the request; containers add up; init containers run one at a time.
    assert gpus_of(pod(containers=(container(limit="2", request="1"),))) == 2
    assert gpus_of(pod(containers=(container(request="3"),))) == 3
    assert gpus_of(pod(containers=(container("a", limit="1"), container("b", limit="2")))) == 3
    assert gpus_of(pod(containers=(container(limit="1"),), init_containers=(container("i", limit="4"),))) == 4
    assert gpus_of(pod(containers=(container(limit="0"),))) == 0


def test_names_lose_blanks_and_repeats_but_keep_their_order() -> None:
    request = parse_placement(
        pod(
            {
                GPU_TYPES_ANNOTATION: "A100-80GB,,h100 80gb,A100_80GB,H100-80GB",
                REGIONS_ANNOTATION: "eu-ro-1,EU-RO-1,US-KS-2,",
                PROVIDERS_ANNOTATION: "burst,runpod,Burst",
            }
        )
    )
    assert request.gpu_types == ("A100-80GB", "h100 80gb")
    assert request.regions == ("eu-ro-1", "US-KS-2")
    assert request.providers == ("burst", "runpod")


@pytest.mark.parametrize(
    ("annotations", "words"),
    [
        pytest.param({GPU_COUNT_ANNOTATION: "0"}, "from 1 to 64, not '0'", id="count-zero"),
        pytest.param({GPU_COUNT_ANNOTATION: "65"}, "from 1 to 64, not '65'", id="count-too-many"),
        pytest.param({GPU_COUNT_ANNOTATION: "2.5"}, "whole number of GPUs", id="count-fraction"),
        pytest.param({GPU_COUNT_ANNOTATION: "-1"}, "whole number of GPUs", id="count-negative"),
        pytest.param({GPU_COUNT_ANNOTATION: "two"}, "whole number of GPUs", id="count-word"),
        pytest.param({MAX_PRICE_ANNOTATION: "0"}, "positive number of US dollars", id="price-zero"),
        pytest.param({MAX_PRICE_ANNOTATION: "-2"}, "positive number of US dollars", id="price-negative"),
        pytest.param({MAX_PRICE_ANNOTATION: "$2"}, "like 2.50, not '$2'", id="price-currency"),
        pytest.param({MAX_PRICE_ANNOTATION: "2/h"}, "like 2.50", id="price-unit"),
        pytest.param({MAX_PRICE_ANNOTATION: "inf"}, "like 2.50", id="price-infinite"),
        pytest.param({MAX_PRICE_ANNOTATION: "nan"}, "like 2.50", id="price-nan"),
        pytest.param({MAX_PRICE_ANNOTATION: "1e3"}, "like 2.50", id="price-exponent"),
        pytest.param({MAX_PRICE_ANNOTATION: ""}, "like 2.50", id="price-empty"),
        pytest.param({GPU_TYPES_ANNOTATION: " , "}, "at least one name", id="types-empty"),
        pytest.param({GPU_TYPES_ANNOTATION: "---"}, "'---' is not a name", id="types-punctuation"),
        pytest.param({REGIONS_ANNOTATION: ""}, "at least one name", id="regions-empty"),
        pytest.param({PROVIDERS_ANNOTATION: "run\npod"}, "is not a name", id="providers-control"),
        pytest.param({REGIONS_ANNOTATION: "x" * 101}, "is not a name", id="regions-too-long"),
    ],
)
def test_a_value_that_cannot_be_read_fails_the_pod_naming_the_annotation(
    annotations: dict[str, str], words: str
) -> None:
    with pytest.raises(PlacementError) as refused:
        parse_placement(pod(annotations))
    assert isinstance(refused.value, InvalidPodError)  # the node fails the pod with this message
    [annotation] = annotations
    assert str(refused.value).startswith(annotation)
    assert words in str(refused.value)


@pytest.mark.parametrize("quantity", ["1.5", "500m", "1Ki", "x"])
def test_a_gpu_quantity_that_is_not_whole_fails_the_pod(quantity: str) -> None:
    with pytest.raises(PlacementError, match=r"container 'server': nvidia\.com/gpu must be a whole number"):
        parse_placement(pod(containers=(container(limit=quantity),)))


def test_prices_read_as_decimal_numbers() -> None:
    for text, price in [("2", 2.0), ("2.", 2.0), (".5", 0.5), (" 0.34 ", 0.34)]:
        assert parse_placement(pod({MAX_PRICE_ANNOTATION: text})).max_price_per_hour == price
