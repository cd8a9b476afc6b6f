"""A route table in Envoy's terms: listener, routes and weights, clusters, TLS, Host and paths, SigV4."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from google.protobuf import json_format

from vk_provider.kit.traffic_auth import AwsSigV4
from vk_provider.routetable.table import Endpoint, RouteTable
from vk_provider.xds.clusters import UpstreamTrust
from vk_provider.xds.names import LISTENER_TYPE, ROUTE_CONFIGURATION_NAME, ROUTE_CONFIGURATION_TYPE
from vk_provider.xds.resources import EnvoySettings, ResourceCache, build_resources, pack
from vk_provider.xds.routes import route_configuration
from vk_provider.xds.sides import plan_route
from vk_provider.xds.upstream_filters import METADATA_NAMESPACE

from . import as_dict, cluster, load_assignment, route, route_entry, table, virtual_hosts, weights

HOME = (Endpoint("http://10.0.0.1:8080"), Endpoint("http://10.0.0.2:8080"))
AWAY = (Endpoint("https://abc-8000.proxy.runpod.net"),)
SAGEMAKER = "https://runtime.sagemaker.eu-west-1.amazonaws.com/endpoints/chat-{}/invocations"


def test_the_listener_takes_its_routes_from_rds_over_ads_and_never_times_a_stream_out() -> None:
    resources = build_resources(table(route(home=HOME)), EnvoySettings(listener_port=8081))
    (listener,) = resources.of_type(LISTENER_TYPE).values()
    found = as_dict(listener)
    assert found["address"]["socket_address"] == {"address": "0.0.0.0", "port_value": 8081}  # noqa: S104
    manager = found["filter_chains"][0]["filters"][0]["typed_config"]
    assert manager["rds"] == {
        "config_source": {"ads": {}, "resource_api_version": "V3"},
        "route_config_name": ROUTE_CONFIGURATION_NAME,
    }
    assert manager["request_timeout"] == "0s"
    assert manager["stream_idle_timeout"] == "600s"
    # The endpoint picker's filter is there, off, for the routes whose home side is an InferencePool.
    assert [f["name"] for f in manager["http_filters"]] == [
        "envoy.filters.http.ext_proc",
        "envoy.filters.http.router",
    ]
    assert manager["http_filters"][0]["disabled"] is True
    entry = route_entry(resources, "default/chat", "chat.example.com")["route"]
    assert (entry["timeout"], entry["idle_timeout"]) == ("0s", "600s")


def test_weights_split_a_hundred_between_the_sides_by_the_away_weight() -> None:
    resources = build_resources(table(route(away_weight=30, home=HOME, away=AWAY)))
    assert weights(resources) == {"default/chat/home": 70, "default/chat/away": 30}
    assert weights(build_resources(table(route(away_weight=0, home=HOME, away=AWAY)))) == {
        "default/chat/home": 100
    }
    assert weights(build_resources(table(route(away_weight=100, home=HOME, away=AWAY)))) == {
        "default/chat/away": 100
    }


def test_a_side_without_serving_endpoints_gets_no_weight_whatever_the_table_says() -> None:
    assert weights(build_resources(table(route(away_weight=100, home=HOME)))) == {"default/chat/home": 100}
    assert weights(build_resources(table(route(away_weight=0, away=AWAY)))) == {"default/chat/away": 100}
    draining_away = (Endpoint(AWAY[0].url, terminating=True),)
    assert weights(build_resources(table(route(away_weight=50, home=HOME, away=draining_away)))) == {
        "default/chat/home": 100
    }


def test_with_neither_side_serving_the_route_answers_503_itself() -> None:
    resources = build_resources(table(route(away_weight=50)))
    entry = route_entry(resources, "default/chat", "chat.example.com")
    assert entry["direct_response"]["status"] == 503
    assert "default/chat" in entry["direct_response"]["body"]["inline_string"]


def test_home_is_an_eds_cluster_of_pod_ips_with_terminating_ones_draining() -> None:
    home = (Endpoint("http://10.0.0.1:8080"), Endpoint("http://10.0.0.2:8080", terminating=True))
    resources = build_resources(table(route(home=home)))
    found = cluster(resources, "default/chat/home")
    assert found["type"] == "EDS"
    assert found["eds_cluster_config"]["eds_config"] == {"ads": {}, "resource_api_version": "V3"}
    assert found["lb_policy"] == "LEAST_REQUEST"
    assert found["alt_stat_name"] == "default/chat/home"
    thresholds = found["circuit_breakers"]["thresholds"][0]
    assert (
        min(thresholds[key] for key in ("max_connections", "max_pending_requests", "max_requests")) >= 100_000
    )
    options = found["typed_extension_protocol_options"][
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
    ]
    assert options["explicit_http_config"] == {"http_protocol_options": {}}
    assert "http_filters" not in options
    endpoints = load_assignment(resources, "default/chat/home")["endpoints"][0]["lb_endpoints"]
    assert [
        (e["endpoint"]["address"]["socket_address"]["address"], e["health_status"]) for e in endpoints
    ] == [
        ("10.0.0.1", "HEALTHY"),
        ("10.0.0.2", "DRAINING"),
    ]
    # No hostname: the route's auto_host_rewrite leaves the client's Host for home pods.
    assert all("hostname" not in e["endpoint"] for e in endpoints)


def test_a_home_endpoint_eds_cannot_carry_is_left_out_and_reported() -> None:
    resources = build_resources(table(route(home=(Endpoint("http://chat.default.svc:8080"), *HOME))))
    assert len(load_assignment(resources, "default/chat/home")["endpoints"][0]["lb_endpoints"]) == 2
    (left_out,) = resources.left_out
    assert (left_out.route, left_out.side, left_out.url) == (
        "default/chat",
        "home",
        "http://chat.default.svc:8080",
    )
    assert "IP address" in left_out.reason


def test_https_away_endpoints_get_tls_with_their_own_server_name_and_their_own_host() -> None:
    away = (Endpoint("https://abc-8000.proxy.runpod.net"), Endpoint("https://def-8000.proxy.runpod.net"))
    resources = build_resources(
        table(route(home=HOME, away=away)), EnvoySettings(trust=UpstreamTrust("/ca.pem"))
    )
    found = cluster(resources, "default/chat/away")
    assert (found["type"], found["dns_lookup_family"]) == ("STRICT_DNS", "V4_PREFERRED")
    endpoints = found["load_assignment"]["endpoints"][0]["lb_endpoints"]
    assert [e["endpoint"]["hostname"] for e in endpoints] == [
        "abc-8000.proxy.runpod.net",
        "def-8000.proxy.runpod.net",
    ]
    assert endpoints[0]["endpoint"]["address"]["socket_address"] == {
        "address": "abc-8000.proxy.runpod.net",
        "port_value": 443,
    }
    assert endpoints[0]["metadata"]["filter_metadata"]["envoy.transport_socket_match"] == {
        "tls": "abc-8000.proxy.runpod.net"
    }
    matches = {
        m["match"]["tls"]: m["transport_socket"]["typed_config"] for m in found["transport_socket_matches"]
    }
    context = matches["def-8000.proxy.runpod.net"]
    assert context["sni"] == "def-8000.proxy.runpod.net"
    validation = context["common_tls_context"]["validation_context"]
    assert validation["trusted_ca"] == {"filename": "/ca.pem"}
    assert validation["match_typed_subject_alt_names"] == [
        {"san_type": "DNS", "matcher": {"exact": "def-8000.proxy.runpod.net"}}
    ]
    entry = route_entry(resources, "default/chat", "chat.example.com")["route"]
    assert entry["auto_host_rewrite"] is True
    assert entry["append_x_forwarded_host"] is True


def test_tls_trusts_the_system_roots_by_default_and_plain_away_endpoints_get_none() -> None:
    away = (Endpoint("https://abc-8000.proxy.runpod.net"), Endpoint("http://10.1.0.9:8000"))
    found = cluster(build_resources(table(route(home=HOME, away=away))), "default/chat/away")
    (match,) = found["transport_socket_matches"]
    assert (
        match["transport_socket"]["typed_config"]["common_tls_context"]["validation_context"][
            "system_root_certs"
        ]
        == {}
    )
    plain = found["load_assignment"]["endpoints"][0]["lb_endpoints"][1]
    assert plain["endpoint"]["hostname"] == "10.1.0.9:8000"
    assert "metadata" not in plain
    assert "transport_socket" not in found


def test_away_endpoints_with_a_base_path_have_it_prepended_by_upstream_filters() -> None:
    away = (Endpoint("http://stand-in:9000/pods/p1"), Endpoint("http://stand-in:9000/pods/p2/"))
    found = cluster(build_resources(table(route(home=HOME, away=away))), "default/chat/away")
    options = found["typed_extension_protocol_options"][
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
    ]
    assert [f["name"] for f in options["http_filters"]] == [
        "envoy.filters.http.header_mutation",
        "envoy.filters.http.lua",
        "envoy.filters.http.upstream_codec",
    ]
    endpoints = found["load_assignment"]["endpoints"][0]["lb_endpoints"]
    assert [e["metadata"]["filter_metadata"][METADATA_NAMESPACE] for e in endpoints] == [
        {"fixed_path": "", "path_prefix": "/pods/p1", "host": "stand-in:9000"},
        {"fixed_path": "", "path_prefix": "/pods/p2", "host": "stand-in:9000"},
    ]


def test_away_endpoints_without_paths_run_no_upstream_filters() -> None:
    found = cluster(build_resources(table(route(home=HOME, away=AWAY))), "default/chat/away")
    options = found["typed_extension_protocol_options"][
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
    ]
    assert "http_filters" not in options


def test_sagemaker_endpoints_are_signed_for_their_scope_at_their_own_invocation_path() -> None:
    auth = AwsSigV4(region="eu-west-1")
    away = tuple(Endpoint(SAGEMAKER.format(i), auth=auth) for i in (1, 2))
    found = cluster(build_resources(table(route(home=HOME, away=away))), "default/chat/away")
    options = found["typed_extension_protocol_options"][
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
    ]
    filters = options["http_filters"]
    # The path is rewritten before signing, so the signature covers the path SageMaker receives.
    assert [f["name"] for f in filters] == [
        "envoy.filters.http.header_mutation",
        "envoy.filters.http.lua",
        "envoy.filters.http.aws_request_signing",
        "envoy.filters.http.upstream_codec",
    ]
    signing = filters[2]["typed_config"]
    assert signing["@type"].endswith("aws_request_signing.v3.AwsRequestSigning")
    assert (signing["service_name"], signing["region"]) == ("sagemaker", "eu-west-1")
    assert signing.get("use_unsigned_payload", False) is False
    endpoints = found["load_assignment"]["endpoints"][0]["lb_endpoints"]
    assert [e["metadata"]["filter_metadata"][METADATA_NAMESPACE]["fixed_path"] for e in endpoints] == [
        "/endpoints/chat-1/invocations",
        "/endpoints/chat-2/invocations",
    ]
    assert endpoints[0]["endpoint"]["hostname"] == "runtime.sagemaker.eu-west-1.amazonaws.com"


def test_away_endpoints_disagreeing_on_authentication_keep_the_majority_scope() -> None:
    auth = AwsSigV4(region="eu-west-1")
    away = (
        Endpoint(SAGEMAKER.format(1), auth=auth),
        Endpoint("https://abc-8000.proxy.runpod.net"),
        Endpoint(SAGEMAKER.format(2), auth=auth),
    )
    resources = build_resources(table(route(home=HOME, away=away)))
    endpoints = cluster(resources, "default/chat/away")["load_assignment"]["endpoints"][0]["lb_endpoints"]
    assert len(endpoints) == 2
    (left_out,) = resources.left_out
    assert left_out.url == "https://abc-8000.proxy.runpod.net"
    assert "authentication" in left_out.reason


def test_a_host_route_beats_a_hostless_one_and_falls_back_to_it_for_other_paths() -> None:
    named = route(home=HOME, hosts=("chat.example.com",), path_prefix="/v1", name="named")
    catch_all = route(home=HOME, hosts=(), path_prefix="/", name="any")
    longer = route(home=HOME, hosts=(), path_prefix="/v2/chat", name="longer")
    found = {
        tuple(v["domains"]): [r["name"] for r in v["routes"]]
        for v in virtual_hosts(build_resources(table(named, catch_all, longer)))
    }
    assert found == {
        ("chat.example.com", "chat.example.com."): [
            "default/named",
            "default/longer",
            "default/any",
            "no route",
        ],
        ("*",): ["default/longer", "default/any", "no route"],
    }


def test_hosts_with_the_same_routes_share_a_virtual_host_and_none_is_listed_twice() -> None:
    first = route(home=HOME, hosts=("a.example.com", "b.example.com"), path_prefix="/v1", name="first")
    second = route(home=HOME, hosts=("b.example.com",), path_prefix="/v2", name="second")
    found = {
        tuple(v["domains"]): [r["name"] for r in v["routes"]]
        for v in virtual_hosts(build_resources(table(first, second)))
    }
    assert found == {
        ("a.example.com", "a.example.com."): ["default/first", "no route"],
        ("b.example.com", "b.example.com."): ["default/first", "default/second", "no route"],
        ("*",): ["no route"],
    }


def test_path_prefixes_match_whole_segments() -> None:
    resources = build_resources(
        table(
            route(home=HOME, hosts=(), path_prefix="/v1", name="segment"),
            route(home=HOME, hosts=(), path_prefix="/api/", name="slash"),
            route(home=HOME, hosts=("only.example.com",), name="host-only"),
        )
    )
    assert route_entry(resources, "default/segment")["match"] == {"path_separated_prefix": "/v1"}
    assert route_entry(resources, "default/slash")["match"] == {"prefix": "/api/"}
    assert route_entry(resources, "default/host-only", "only.example.com")["match"] == {"prefix": "/"}


def test_a_dotted_offload_name_keeps_its_whole_name_in_the_statistics() -> None:
    found = cluster(build_resources(table(route(home=HOME, name="chat.v2"))), "default/chat.v2/home")
    assert found["alt_stat_name"] == "default/chat_v2/home"


def test_equal_tables_give_equal_resources() -> None:
    first = build_resources(table(route(away_weight=30, home=HOME, away=AWAY)))
    assert first.same_as(build_resources(table(route(away_weight=30, home=HOME, away=AWAY))))
    assert not first.same_as(build_resources(table(route(away_weight=40, home=HOME, away=AWAY))))


def test_an_owned_host_falls_back_only_to_its_owners_hostless_routes_even_when_no_route_names_it() -> None:
    named = route(home=HOME, hosts=("chat.example.com",), path_prefix="/v1", name="named", namespace="a")
    own_catch_all = route(home=HOME, hosts=(), path_prefix="/", name="any", namespace="a")
    other = route(home=HOME, hosts=(), path_prefix="/v2", name="other", namespace="b")
    owners = {"chat.example.com": "a", "kept.example.com": "b"}
    found = {
        tuple(v["domains"]): [r["name"] for r in v["routes"]]
        for v in virtual_hosts(build_resources(RouteTable.of([named, own_catch_all, other], owners)))
    }
    assert found == {
        ("chat.example.com", "chat.example.com."): ["a/named", "a/any", "no route"],
        ("kept.example.com", "kept.example.com."): ["b/other", "no route"],
        ("*",): ["b/other", "a/any", "no route"],
    }


# --- building again with a cache: only what changed is parsed, and the resources are a fresh build's ---


def _tables() -> list[RouteTable]:
    """A run of tables as a cluster's changes make them, each from the one before."""
    chat = route(away_weight=30, home=HOME, away=AWAY)
    embed = route(name="embed", hosts=("embed.example.com",), home=HOME[:1], path_prefix="/v1")
    catch_all = route(name="all", hosts=(), path_prefix="/", home=HOME[1:])
    signed = route(
        name="signed",
        hosts=("signed.example.com",),
        away=(Endpoint(SAGEMAKER.format(1), auth=AwsSigV4(region="eu-west-1", service="sagemaker")),),
        away_weight=100,
    )
    return [
        table(chat, embed),
        table(chat, embed, catch_all),
        table(dataclasses.replace(chat, away_weight=60), embed, catch_all),
        table(dataclasses.replace(chat, away=()), embed, catch_all, signed),
        table(embed, signed),
        RouteTable.of([embed, signed], {"chat.example.com": "default"}),
    ]


def test_a_build_with_a_cache_gives_what_a_fresh_build_gives_through_a_run_of_tables() -> None:
    cache = ResourceCache()
    for number, current in enumerate(_tables()):
        cached = build_resources(current, EnvoySettings(), cache)
        fresh = build_resources(current, EnvoySettings())
        assert cached.same_as(fresh), number
        assert cached.left_out == fresh.left_out
        plans = [plan_route(found) for found in current.routes]
        # The configuration put together a virtual host at a time is the one its whole JSON parses to.
        (configuration,) = cached.of_type(ROUTE_CONFIGURATION_TYPE).values()
        assert configuration == pack(route_configuration(plans, current.host_owners))


def test_a_new_weight_parses_the_route_configuration_again_and_no_cluster(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    chat = route(away_weight=30, home=HOME, away=AWAY)
    others = [route(name=f"m{number}", hosts=(f"m{number}.example.com",), home=HOME) for number in range(20)]
    cache = ResourceCache()
    build_resources(table(chat, *others), EnvoySettings(), cache)
    parsed: list[str] = []
    parse = json_format.ParseDict

    def recording(js_dict: dict[str, Any], message: Any, **options: Any) -> Any:
        parsed.append(str(js_dict.get("@type") or js_dict.get("name")))
        return parse(js_dict, message, **options)

    monkeypatch.setattr(json_format, "ParseDict", recording)
    build_resources(table(dataclasses.replace(chat, away_weight=70), *others), EnvoySettings(), cache)
    # The listener (built anew each time, it is one resource) and chat's virtual host: not the 20 others'.
    assert sorted(parsed) == sorted([LISTENER_TYPE, "chat.example.com"])
