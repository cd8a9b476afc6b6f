"""The route marker on a home Service: written and read back, and what a reader refuses to trust."""

from __future__ import annotations

from typing import Any

from vk_provider.offload.names import ROUTE_ANNOTATION
from vk_provider.offload.retained import RetainedRoute, retained_route, retained_routes


def service(annotation: str | None, *, created: str = "2026-01-01T09:00:00Z") -> dict[str, Any]:
    metadata: dict[str, Any] = {"namespace": "default", "name": "tokens", "creationTimestamp": created}
    if annotation is not None:
        metadata["annotations"] = {ROUTE_ANNOTATION: annotation}
    return {"metadata": metadata}


ROUTE = RetainedRoute(
    "default", "tokens", "tokens-offload", ("tokens.demo",), "/v1", ("team",), "2026-01-01T10:00:00Z"
)


def test_a_written_marker_reads_back_as_the_same_route() -> None:
    assert retained_route(service(ROUTE.to_annotation())) == ROUTE
    assert ROUTE.key == "default/tokens-offload"


def test_the_marker_claims_no_age_older_than_its_service() -> None:
    # Someone who may edit Services writes a marker with an early age onto a new Service.
    read = retained_route(service(ROUTE.to_annotation(), created="2026-03-01T00:00:00Z"))
    assert read is not None
    assert read.claimed_since == "2026-03-01T00:00:00Z"


def test_services_without_a_readable_marker_keep_no_route() -> None:
    unreadable = [
        None,
        "not json",
        "[]",
        '{"offload": "x", "claimedSince": "2026-01-01T10:00:00Z"}',  # neither hosts nor a prefix
        '{"offload": "x", "hosts": [""], "claimedSince": "2026-01-01T10:00:00Z"}',
        '{"offload": "x", "pathPrefix": "v1", "claimedSince": "2026-01-01T10:00:00Z"}',
        '{"hosts": ["a.test"], "claimedSince": "2026-01-01T10:00:00Z"}',  # whose route?
        '{"offload": "x", "hosts": ["a.test"]}',  # of what age?
    ]
    assert retained_routes([service(annotation) for annotation in unreadable]) == []
    assert retained_routes([service(ROUTE.to_annotation()), {"metadata": None}]) == [ROUTE]
