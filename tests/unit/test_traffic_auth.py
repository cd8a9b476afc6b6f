"""The traffic-auth marker: what the node writes for SigV4 endpoints, and how strictly the router reads it."""

from __future__ import annotations

import pytest

from vk_provider.kit.traffic_auth import AwsSigV4, parse_traffic_auth

RUNTIME = "https://runtime.sagemaker.eu-west-1.amazonaws.com/endpoints/vk-1/invocations"
LOCAL = "http://127.0.0.1:9000/endpoints/vk-1/invocations"


def test_a_marker_reads_back_as_what_wrote_it() -> None:
    auth = AwsSigV4(region="ap-southeast-2", service="sagemaker")
    assert auth.marker() == "aws-sigv4; service=sagemaker; region=ap-southeast-2"
    assert parse_traffic_auth(auth.marker(), LOCAL) == auth


@pytest.mark.parametrize(
    ("marker", "address", "expected"),
    [
        ("aws-sigv4", RUNTIME, AwsSigV4(region="eu-west-1")),
        ("AWS-SigV4;region=us-east-2", RUNTIME, AwsSigV4(region="us-east-2")),  # the marker wins
        (
            "aws-sigv4",
            "https://runtime.sagemaker.cn-north-1.amazonaws.com.cn/endpoints/e/invocations",
            AwsSigV4(region="cn-north-1"),
        ),
        (
            "aws-sigv4",
            "https://runtime-fips.sagemaker.us-gov-west-1.amazonaws.com/endpoints/e/invocations",
            AwsSigV4(region="us-gov-west-1"),
        ),
        ("aws-sigv4; region=us-west-2; service=sagemaker", LOCAL, AwsSigV4(region="us-west-2")),
    ],
)
def test_region_and_service_come_from_the_marker_else_from_a_runtime_host(
    marker: str, address: str, expected: AwsSigV4
) -> None:
    assert parse_traffic_auth(marker, address) == expected


@pytest.mark.parametrize(
    ("marker", "address", "message"),
    [
        ("bearer", RUNTIME, "unknown traffic authentication 'bearer'"),
        ("aws-sigv4; colour=blue", RUNTIME, "unknown aws-sigv4 parameter"),
        ("aws-sigv4; region", RUNTIME, "unknown aws-sigv4 parameter"),
        ("aws-sigv4", LOCAL, "needs a region and a service"),
        ("aws-sigv4; region=us-west-2", LOCAL, "needs a region and a service"),
        ("aws-sigv4; region=US West", RUNTIME, "is not lower-case letters"),
    ],
)
def test_a_marker_the_router_cannot_act_on_is_refused(marker: str, address: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_traffic_auth(marker, address)
