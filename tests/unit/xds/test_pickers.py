"""An InferencePool's endpoint picker in the resources: only the home share asks it, the home cluster
goes where it says, and a pool without a picker to ask serves home like any other route."""

from __future__ import annotations

import dataclasses

from vk_provider.routetable.table import Endpoint, EndpointPicker, Route
from vk_provider.xds.names import CLUSTER_TYPE
from vk_provider.xds.resources import build_resources

from . import cluster, load_assignment, route, route_entry, table

HOME = (Endpoint("http://10.0.0.1:8080"), Endpoint("http://10.0.0.2:8080"))
AWAY = (Endpoint("http://198.51.100.7:8080"),)
PICKER = EndpointPicker("default/chat-pool", ("10.0.0.9:9002",), fail_open=False)


def pooled(picker: EndpointPicker | None = PICKER, *, away_weight: int = 30, name: str = "chat") -> Route:
    return dataclasses.replace(route(away_weight=away_weight, home=HOME, away=AWAY, name=name), picker=picker)


def test_only_the_home_share_asks_the_pools_picker_failing_as_the_pool_says() -> None:
    resources = build_resources(table(pooled()))
    home, away = route_entry(resources, "default/chat", "chat.example.com")["route"]["weighted_clusters"][
        "clusters"
    ]
    assert (home["name"], away["name"]) == ("default/chat/home", "default/chat/away")
    assert "typed_per_filter_config" not in away
    enabled = home["typed_per_filter_config"]["envoy.filters.http.ext_proc"]
    overrides = enabled["config"]["overrides"]
    assert overrides["grpc_service"] == {"envoy_grpc": {"cluster_name": "default/chat-pool/endpoint-picker"}}
    assert overrides.get("failure_mode_allow", False) is False
    opened = build_resources(table(pooled(dataclasses.replace(PICKER, fail_open=True))))
    home = route_entry(opened, "default/chat", "chat.example.com")["route"]["weighted_clusters"]["clusters"][
        0
    ]
    assert home["typed_per_filter_config"]["envoy.filters.http.ext_proc"]["config"]["overrides"][
        "failure_mode_allow"
    ]


def test_the_home_cluster_goes_to_the_picked_pod_read_from_metadata_only() -> None:
    resources = build_resources(table(pooled()))
    home = cluster(resources, "default/chat/home")
    assert "lb_policy" not in home
    (policy,) = home["load_balancing_policy"]["policies"]
    override = policy["typed_extension_config"]["typed_config"]
    # A client can send any header; dynamic metadata only the picker writes.
    assert override["override_host_sources"] == [
        {"metadata": {"key": "envoy.lb", "path": [{"key": "x-gateway-destination-endpoint"}]}}
    ]
    assert (
        cluster(build_resources(table(route(home=HOME))), "default/chat/home")["lb_policy"] == "LEAST_REQUEST"
    )


def test_the_picker_is_one_tls_http2_eds_cluster_however_many_routes_name_its_pool() -> None:
    resources = build_resources(table(pooled(), pooled(name="chat-2")))
    picker = cluster(resources, "default/chat-pool/endpoint-picker")
    assert picker["type"] == "EDS"  # a replica's change leaves the others' streams as they are
    (endpoint,) = load_assignment(resources, "default/chat-pool/endpoint-picker")["endpoints"][0][
        "lb_endpoints"
    ]
    assert endpoint["endpoint"]["address"]["socket_address"] == {"address": "10.0.0.9", "port_value": 9002}
    options = picker["typed_extension_protocol_options"][
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
    ]
    assert "http2_protocol_options" in options["explicit_http_config"]
    assert picker["transport_socket"]["name"] == "envoy.transport_sockets.tls"


def test_a_pool_without_a_picker_to_ask_serves_home_like_any_route() -> None:
    missing = EndpointPicker("default/chat-pool", problem="InferencePool default/chat-pool not found")
    resources = build_resources(table(pooled(missing)))
    home = route_entry(resources, "default/chat", "chat.example.com")["route"]["weighted_clusters"][
        "clusters"
    ][0]
    assert "typed_per_filter_config" not in home
    assert cluster(resources, "default/chat/home")["lb_policy"] == "LEAST_REQUEST"
    assert "default/chat-pool/endpoint-picker" not in resources.of_type(CLUSTER_TYPE)


def test_a_fail_open_pools_picker_without_endpoints_is_not_asked_a_fail_close_ones_is() -> None:
    """Envoy cannot fail open a request whose body it streams to a picker; with nothing to ask, a
    FailOpen pool's home share goes to its pods by least request, a FailClose pool's fails."""
    for fail_open, asked in ((True, False), (False, True)):
        empty = EndpointPicker("default/chat-pool", (), fail_open=fail_open)
        resources = build_resources(table(pooled(empty)))
        home = route_entry(resources, "default/chat", "chat.example.com")["route"]["weighted_clusters"][
            "clusters"
        ][0]
        assert ("typed_per_filter_config" in home) is asked
