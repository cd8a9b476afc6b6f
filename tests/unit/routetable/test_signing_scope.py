"""For whom the router signs (SageMaker's runtime, and the hosts the operator names), and how the
operator names them: `--sign-for-host`, `--endpoint-slice-manager`, on the router and the xDS server."""

from __future__ import annotations

import argparse
from collections.abc import Callable

import pytest

from vk_provider.kit.traffic_auth import AwsSigV4
from vk_provider.offload.homeslices import ENDPOINTSLICE_CONTROLLER
from vk_provider.router.running import add_router_arguments
from vk_provider.routetable.running import signing_scope_of, slice_managers_of
from vk_provider.routetable.signingscope import SigningScope, sign_for_host
from vk_provider.xds.command import add_xds_arguments

SAGEMAKER = AwsSigV4(region="eu-west-1")


@pytest.mark.parametrize(
    "url",
    [
        "https://runtime.sagemaker.eu-west-1.amazonaws.com/endpoints/e/invocations",
        "https://runtime-fips.sagemaker.us-east-1.amazonaws.com/endpoints/e/invocations",
        "https://runtime.sagemaker.cn-northwest-1.amazonaws.com.cn/endpoints/e/invocations",
        "https://RUNTIME.SAGEMAKER.EU-WEST-1.AMAZONAWS.COM/endpoints/e/invocations",
    ],
)
def test_sagemakers_runtime_hosts_are_signed_for_with_no_setting(url: str) -> None:
    assert SigningScope().refusal(SAGEMAKER, url) is None


@pytest.mark.parametrize(
    ("auth", "url", "why"),
    [
        (AwsSigV4(region="eu-west-1", service="s3"), "https://b.s3.eu-west-1.amazonaws.com/k", "not 's3'"),
        (
            AwsSigV4(region="eu-west-1", service="s3"),
            "https://runtime.sagemaker.eu-west-1.amazonaws.com/endpoints/e/invocations",
            "not 's3'",
        ),
        (SAGEMAKER, "https://api.sagemaker.eu-west-1.amazonaws.com/", "not a SageMaker runtime host"),
        (SAGEMAKER, "http://127.0.0.1:9000/endpoints/e/invocations", "'127.0.0.1' is not a SageMaker"),
    ],
)
def test_anything_else_is_refused_with_the_reason(auth: AwsSigV4, url: str, why: str) -> None:
    refusal = SigningScope().refusal(auth, url)
    assert refusal is not None
    assert why in refusal


def test_a_named_host_is_signed_for_at_any_port_but_for_sagemaker_only() -> None:
    scope = SigningScope.with_hosts(["127.0.0.1", "VPCE-1.Runtime.Sagemaker.eu-west-1.vpce.amazonaws.com."])
    assert scope.refusal(SAGEMAKER, "http://127.0.0.1:9000/endpoints/e/invocations") is None
    assert scope.refusal(SAGEMAKER, "https://vpce-1.runtime.sagemaker.eu-west-1.vpce.amazonaws.com/x") is None
    assert scope.refusal(AwsSigV4(region="eu-west-1", service="s3"), "http://127.0.0.1:9000/b") is not None
    assert scope.refusal(SAGEMAKER, "http://127.0.0.2:9000/endpoints/e/invocations") is not None


@pytest.mark.parametrize(
    ("text", "host"),
    [
        ("stand-in.local", "stand-in.local"),
        ("10.0.0.7", "10.0.0.7"),
        ("[::1]", "::1"),
        ("Host.Example.", "host.example"),
    ],
)
def test_a_host_to_sign_for_is_written_as_a_url_compares_it(text: str, host: str) -> None:
    assert sign_for_host(text) == host


@pytest.mark.parametrize(
    "text",
    ["https://stand-in.local", "stand-in.local:9000", "stand-in.local/x", "*.amazonaws.com", "", "a..b"],
)
def test_anything_but_a_bare_host_is_refused_so_a_typo_cannot_widen_the_scope(text: str) -> None:
    with pytest.raises(ValueError, match="expected a host name or IP address"):
        sign_for_host(text)


@pytest.mark.parametrize("add_arguments", [add_router_arguments, add_xds_arguments], ids=["router", "xds"])
def test_the_router_and_the_xds_server_take_both_settings(
    add_arguments: Callable[[argparse.ArgumentParser], None],
) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    defaults = parser.parse_args([])
    assert signing_scope_of(defaults) == SigningScope()
    assert slice_managers_of(defaults).names == {ENDPOINTSLICE_CONTROLLER}

    arguments = parser.parse_args(
        [
            "--sign-for-host",
            "127.0.0.1",
            "--sign-for-host",
            "Stand-In.Local",
            "--endpoint-slice-manager",
            "mesh.io",
        ]
    )
    assert signing_scope_of(arguments).extra_hosts == {"127.0.0.1", "stand-in.local"}
    assert slice_managers_of(arguments).names == {ENDPOINTSLICE_CONTROLLER, "mesh.io"}
    with pytest.raises(SystemExit):
        parser.parse_args(["--sign-for-host", "https://evil.example"])
