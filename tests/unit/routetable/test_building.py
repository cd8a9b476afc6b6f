"""Building the route table from raw Offload, EndpointSlice, pod and Node JSON."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from vk_provider.kit.traffic_auth import AwsSigV4
from vk_provider.kit.traffic_signature import TrafficKey
from vk_provider.offload.homeslices import ENDPOINTSLICE_CONTROLLER, MANAGED_BY_LABEL, SliceManagers
from vk_provider.offload.names import (
    OFFLOAD_LABEL,
    TRAFFIC_ADDRESS_ANNOTATION,
    TRAFFIC_ADDRESS_CONDITION,
    TRAFFIC_AUTH_ANNOTATION,
    TRAFFIC_AUTH_CONDITION,
    TRAFFIC_SIGNATURE_CONDITION,
)
from vk_provider.offload.retained import RetainedRoute
from vk_provider.router import Endpoint, RouteMatch
from vk_provider.routetable import building
from vk_provider.routetable.building import (
    SERVICE_NAME_LABEL,
    BuildResult,
    CheckTarget,
    ForeignNodePod,
    SkippedOffload,
    UntrustedPod,
    UntrustedSlice,
    UnverifiedPod,
)
from vk_provider.routetable.signingscope import SigningScope
from vk_provider.routetable.table import EndpointPicker, RouteTable

from .sealing import OTHER_KEY, TEST_KEY, seal_condition


def build_routes(*objects: Any, **settings: Any) -> BuildResult:
    """`building.build_routes` with the key the test pods are sealed with."""
    return building.build_routes(*objects, **{"traffic_keys": (TEST_KEY,), **settings})


def build_table(*objects: Any, **settings: Any) -> RouteTable:
    """`building.build_table` with the key the test pods are sealed with."""
    return building.build_table(*objects, **{"traffic_keys": (TEST_KEY,), **settings})


VIRTUAL_NODE = "vk-away"


OUR_LABELS = {"type": "virtual-kubelet", "node-restriction.kubernetes.io/vk-provider": "true"}
AKS_LABELS = {"type": "virtual-kubelet", "kubernetes.azure.com/managed": "false"}
"""What every virtual-kubelet carries, AKS's virtual node (ACI) too: `type=virtual-kubelet`, not ours."""


def _node(
    name: str = VIRTUAL_NODE,
    *,
    ready: str | None = "True",
    virtual: bool = True,
    since: str | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    conditions = [] if ready is None else [{"type": "Ready", "status": ready, "lastTransitionTime": since}]
    if labels is None:
        labels = OUR_LABELS if virtual else {"type": "gpu"}
    return {"metadata": {"name": name, "labels": labels}, "status": {"conditions": conditions}}


def _table(
    offloads: list[dict[str, Any]],
    slices: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    *,
    nodes: list[dict[str, Any]] | None = None,
    checks: dict[str, bool] | None = None,
) -> RouteTable:
    """The table with one Ready virtual node, `vk-away`, that the test pods are bound to."""
    return build_table(
        offloads, slices, pods, virtual_nodes=[_node()] if nodes is None else nodes, active_checks=checks
    )


def _offload(
    name: str = "chat",
    namespace: str = "ml",
    *,
    service: str = "chat-svc",
    hosts: list[str] | None = None,
    prefix: str | None = "/v1",
    generation: int | None = 3,
    away_weight: int | None = 25,
) -> dict[str, Any]:
    route: dict[str, Any] = {}
    if hosts is not None:
        route["hosts"] = hosts
    if prefix is not None:
        route["pathPrefix"] = prefix
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if generation is not None:
        metadata["generation"] = generation
    result: dict[str, Any] = {
        "apiVersion": "offload.vk-provider.dev/v1alpha1",
        "kind": "Offload",
        "metadata": metadata,
        "spec": {"home": {"deployment": name, "service": service}, "placement": "away", "route": route},
    }
    if away_weight is not None:
        result["status"] = {"awayWeight": away_weight, "phase": "Shifting"}
    return result


def _endpoint(
    address: str, *, ready: bool | None = True, serving: bool | None = None, terminating: bool | None = None
) -> dict[str, Any]:
    conditions: dict[str, Any] = {}
    for key, value in (("ready", ready), ("serving", serving), ("terminating", terminating)):
        if value is not None:
            conditions[key] = value
    return {"addresses": [address], "conditions": conditions}


def _slice(
    endpoints: list[dict[str, Any]],
    *,
    service: str = "chat-svc",
    namespace: str = "ml",
    ports: list[dict[str, Any]] | None = None,
    address_type: str = "IPv4",
    name: str = "chat-svc-abcde",
    manager: str | None = ENDPOINTSLICE_CONTROLLER,
) -> dict[str, Any]:
    """A slice of `service`, written by `manager` (default: Kubernetes' EndpointSlice controller)."""
    labels = {SERVICE_NAME_LABEL: service} | ({MANAGED_BY_LABEL: manager} if manager is not None else {})
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": labels},
        "addressType": address_type,
        "ports": [{"name": "", "port": 8080, "protocol": "TCP"}] if ports is None else ports,
        "endpoints": endpoints,
    }


def _pod(
    name: str,
    *,
    offload: str = "chat",
    namespace: str = "ml",
    address: str | None = "http://10.9.0.1:9000",
    ready: bool = True,
    containers_ready: bool | None = None,
    deleting: bool = False,
    auth: str | None = None,
    node: str = VIRTUAL_NODE,
    probe_path: str | None = None,
    ready_since: str | None = None,
    seal_key: TrafficKey | None = TEST_KEY,
) -> dict[str, Any]:
    """An away pod as its node publishes it: address and marker in status conditions, sealed with
    `seal_key` (None: unsealed)."""
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "labels": {OFFLOAD_LABEL: offload},
    }
    if deleting:
        metadata["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    conditions: list[dict[str, Any]] = [
        {"type": "PodScheduled", "status": "True"},
        {
            "type": "ContainersReady",
            "status": "True" if containers_ready or (containers_ready is None and ready) else "False",
        },
        {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": ready_since},
    ]
    for kind, value in ((TRAFFIC_ADDRESS_CONDITION, address), (TRAFFIC_AUTH_CONDITION, auth)):
        if value is not None:
            conditions.append({"type": kind, "status": "True", "reason": "Published", "message": value})
    if address is not None and seal_key is not None:
        conditions.append(seal_condition(metadata["uid"], address, auth or "", key=seal_key))
    container: dict[str, Any] = {"name": "app", "image": "img"}
    if probe_path is not None:
        container["readinessProbe"] = {"httpGet": {"path": probe_path, "port": 8080}}
    return {
        "metadata": metadata,
        "spec": {"nodeName": node, "containers": [container]},
        "status": {"phase": "Running", "conditions": conditions},
    }


def test_an_offload_becomes_one_route_with_its_identity_weight_and_match() -> None:
    table = build_table([_offload(hosts=["Chat.Example.com"], prefix="/v1")], [], [])
    (route,) = table.routes
    assert route.key == "ml/chat"
    assert route.generation == 3
    assert route.away_weight == 25
    assert route.match == RouteMatch(hosts=("chat.example.com",), path_prefix="/v1")
    assert route.home == ()
    assert route.away == ()


def test_an_offload_without_status_or_generation_defaults_to_zero() -> None:
    (route,) = build_table([_offload(generation=None, away_weight=None)], [], []).routes
    assert route.away_weight == 0
    assert route.generation == 0


def test_ready_home_endpoints_are_live_and_terminating_serving_ones_drain() -> None:
    endpoints = [
        _endpoint("10.0.0.1"),
        _endpoint("10.0.0.2", ready=False, serving=True, terminating=True),
        _endpoint("10.0.0.3", ready=False, serving=False, terminating=True),
        _endpoint("10.0.0.4", ready=False, serving=False),
        _endpoint("10.0.0.5", ready=False),
    ]
    (route,) = build_table([_offload()], [_slice(endpoints)], []).routes
    assert route.home == (
        Endpoint("http://10.0.0.1:8080"),
        Endpoint("http://10.0.0.2:8080", terminating=True),
    )


def test_missing_endpoint_conditions_read_as_the_api_documents() -> None:
    endpoints = [
        {"addresses": ["10.0.0.1"]},
        _endpoint("10.0.0.2", ready=False, terminating=True),
        _endpoint("10.0.0.3", ready=None, terminating=True),
    ]
    (route,) = build_table([_offload()], [_slice(endpoints)], []).routes
    assert route.home == (
        Endpoint("http://10.0.0.1:8080"),
        Endpoint("http://10.0.0.3:8080", terminating=True),
    )


def test_the_port_named_http_is_preferred_over_the_first_port() -> None:
    ports = [{"name": "metrics", "port": 9090}, {"name": "http", "port": 8000}]
    (route,) = build_table([_offload()], [_slice([_endpoint("10.0.0.1")], ports=ports)], []).routes
    assert route.home == (Endpoint("http://10.0.0.1:8000"),)


def test_the_first_port_is_used_when_none_is_named_http() -> None:
    ports = [{"name": "grpc", "port": 7000}, {"name": "metrics", "port": 9090}]
    (route,) = build_table([_offload()], [_slice([_endpoint("10.0.0.1")], ports=ports)], []).routes
    assert route.home == (Endpoint("http://10.0.0.1:7000"),)


def test_a_slice_without_a_port_gives_no_endpoints() -> None:
    slices = [
        _slice([_endpoint("10.0.0.1")], ports=[]),
        _slice([_endpoint("10.0.0.2")], ports=[{"name": "x"}]),
    ]
    (route,) = build_table([_offload()], slices, []).routes
    assert route.home == ()


def test_ipv6_addresses_are_bracketed() -> None:
    slices = [_slice([_endpoint("fd00::5")], address_type="IPv6")]
    (route,) = build_table([_offload()], slices, []).routes
    assert route.home == (Endpoint("http://[fd00::5]:8080"),)


def test_an_address_in_two_slices_is_listed_once_and_live_wins() -> None:
    slices = [
        _slice([_endpoint("10.0.0.1", ready=False, serving=True, terminating=True)], name="a"),
        _slice([_endpoint("10.0.0.1")], name="b"),
    ]
    (route,) = build_table([_offload()], slices, []).routes
    assert route.home == (Endpoint("http://10.0.0.1:8080"),)


def test_a_home_services_slice_from_anyone_but_the_endpointslice_controller_is_ignored_and_reported() -> None:
    slices = [
        _slice([_endpoint("10.0.0.1")], name="chat-svc-abcde"),
        _slice([_endpoint("10.6.6.6")], name="hand-made", manager=None),
        _slice([_endpoint("10.6.6.7")], name="forged-manager", manager="someone"),
        # Mirrored from hand-written Endpoints: whoever wrote them chose the addresses.
        _slice([_endpoint("10.6.6.8")], name="mirrored", manager="endpointslicemirroring-controller.k8s.io"),
    ]
    result = build_routes([_offload()], slices, [])
    (route,) = result.table.routes
    assert route.home == (Endpoint("http://10.0.0.1:8080"),)
    assert result.untrusted_slices == (
        UntrustedSlice("ml", "forged-manager", "uid-forged-manager", "someone"),
        UntrustedSlice("ml", "hand-made", "uid-hand-made", ""),
        UntrustedSlice("ml", "mirrored", "uid-mirrored", "endpointslicemirroring-controller.k8s.io"),
    )


def test_a_manager_the_operator_names_is_trusted_too() -> None:
    slices = [
        _slice([_endpoint("10.0.0.1")]),
        _slice([_endpoint("10.0.0.2")], name="mesh", manager="mesh.io"),
    ]
    managers = SliceManagers.with_extra(["mesh.io"])
    result = build_routes([_offload()], slices, [], slice_managers=managers)
    (route,) = result.table.routes
    assert route.home == (Endpoint("http://10.0.0.1:8080"), Endpoint("http://10.0.0.2:8080"))
    assert result.untrusted_slices == ()


def test_untrusted_slices_of_services_no_route_reads_are_not_reported() -> None:
    """A router watching the whole cluster sees every selector-less Service's slices: not its business."""
    slices = [_slice([_endpoint("10.0.0.9")], service="unrelated", name="unrelated", manager=None)]
    assert build_routes([_offload()], slices, []).untrusted_slices == ()


def test_a_kept_routes_service_ignores_untrusted_slices_too() -> None:
    slices = [
        _slice([_endpoint("10.0.0.1")]),
        _slice([_endpoint("10.6.6.6")], name="hand-made", manager=None),
    ]
    result = build_routes([], slices, [], kept_routes=[_kept("ml", "chat-svc", "2026-01-01T10:00:00Z")])
    (route,) = result.table.routes
    assert route.home == (Endpoint("http://10.0.0.1:8080"),)
    assert [found.name for found in result.untrusted_slices] == ["hand-made"]


def test_ready_away_pods_with_an_address_are_away_endpoints() -> None:
    pods = [
        _pod("a", address="http://10.9.0.1:9000/"),
        _pod("b", address="http://10.9.0.2:9000", ready=False),
        _pod("c", address=None),
        _pod("d", address="http://10.9.0.4:9000", deleting=True),
        _pod("e", address="http://10.9.0.5:9000", deleting=True, ready=False),
        _pod("f", address="10.9.0.6:9000"),
    ]
    (route,) = _table([_offload()], [], pods).routes
    assert route.away == (
        Endpoint("http://10.9.0.1:9000"),
        Endpoint("http://10.9.0.4:9000", terminating=True),
    )


SAGEMAKER_URL = "https://runtime.sagemaker.eu-west-1.amazonaws.com/endpoints/vk-1/invocations"


def test_the_traffic_auth_marker_carries_into_the_away_endpoint() -> None:
    pods = [
        _pod("a", address=SAGEMAKER_URL, auth="aws-sigv4; service=sagemaker; region=eu-west-1"),
        _pod("b", address="http://127.0.0.1:9000/endpoints/x/invocations", auth="aws-sigv4;region=us-east-2"),
        _pod("c", address="http://10.9.0.3:9000"),
    ]
    result = build_routes([_offload()], [], pods, virtual_nodes=[_node()])
    (route,) = result.table.routes
    # b is left out: its marker names no service, and its address is no SageMaker host to say one.
    assert route.away == (
        Endpoint("http://10.9.0.3:9000"),
        Endpoint(SAGEMAKER_URL, auth=AwsSigV4(region="eu-west-1", service="sagemaker")),
    )
    ((refused, reason),) = [((p.namespace, p.name, p.uid), p.reason) for p in result.refused_signing]
    assert refused == ("ml", "b", "uid-b")
    assert "needs a region and a service" in reason


@pytest.mark.parametrize(
    "address",
    [
        SAGEMAKER_URL,
        "https://runtime-fips.sagemaker.us-gov-west-1.amazonaws.com/endpoints/vk-1/invocations",
        "https://runtime.sagemaker.cn-north-1.amazonaws.com.cn/endpoints/vk-1/invocations",
    ],
)
def test_the_router_signs_for_sagemaker_at_its_runtime_hosts(address: str) -> None:
    result = build_routes(
        [_offload()], [], [_pod("a", address=address, auth="aws-sigv4")], virtual_nodes=[_node()]
    )
    (route,) = result.table.routes
    assert [endpoint.url for endpoint in route.away] == [address]
    assert result.refused_signing == ()


@pytest.mark.parametrize(
    ("address", "marker", "why"),
    [
        (
            "https://my-bucket.s3.eu-west-1.amazonaws.com/object",
            "aws-sigv4; service=s3; region=eu-west-1",
            "only for the sagemaker service",
        ),
        (SAGEMAKER_URL, "aws-sigv4; service=iam; region=eu-west-1", "not 'iam'"),
        (
            "https://attacker.example/endpoints/vk-1/invocations",
            "aws-sigv4; service=sagemaker; region=eu-west-1",
            "'attacker.example' is not a SageMaker runtime host",
        ),
        (
            # Looks like SageMaker's until the last label: only the whole host counts.
            "https://runtime.sagemaker.eu-west-1.amazonaws.com.attacker.example/endpoints/x/invocations",
            "aws-sigv4; service=sagemaker; region=eu-west-1",
            "is not a SageMaker runtime host",
        ),
    ],
)
def test_a_marker_outside_the_signing_scope_is_left_out_and_reported(
    address: str, marker: str, why: str
) -> None:
    pods = [_pod("a", address=address, auth=marker), _pod("b", address="http://10.9.0.2:9000")]
    result = build_routes([_offload()], [], pods, virtual_nodes=[_node()])
    (route,) = result.table.routes
    assert route.away == (Endpoint("http://10.9.0.2:9000"),)
    ((name, reason),) = [(pod.name, pod.reason) for pod in result.refused_signing]
    assert name == "a"
    assert why in reason
    assert address not in {target.url for target in result.check_targets}


def test_a_host_the_operator_names_is_signed_for_sagemaker_only() -> None:
    stand_in = "http://127.0.0.1:9000/endpoints/x/invocations"
    pods = [
        _pod("a", address=stand_in, auth="aws-sigv4; service=sagemaker; region=us-east-2"),
        _pod("b", address="http://127.0.0.1:9001/bucket/key", auth="aws-sigv4; service=s3; region=us-east-2"),
    ]
    scope = SigningScope.with_hosts(["127.0.0.1"])
    result = build_routes([_offload()], [], pods, virtual_nodes=[_node()], signing_scope=scope)
    (route,) = result.table.routes
    assert route.away == (Endpoint(stand_in, auth=AwsSigV4(region="us-east-2")),)
    assert [(pod.name, "s3" in pod.reason) for pod in result.refused_signing] == [("b", True)]


def test_a_bare_marker_takes_region_and_service_from_a_sagemaker_runtime_host() -> None:
    (route,) = _table([_offload()], [], [_pod("a", address=SAGEMAKER_URL, auth="aws-sigv4")]).routes
    assert route.away == (Endpoint(SAGEMAKER_URL, auth=AwsSigV4(region="eu-west-1")),)


@pytest.mark.parametrize(
    "marker",
    ["bearer", "aws-sigv4; colour=blue", "aws-sigv4; region=EU WEST", "aws-sigv4; region"],
)
def test_a_pod_with_a_marker_the_router_cannot_act_on_is_left_out(marker: str) -> None:
    pods = [_pod("a", address=SAGEMAKER_URL, auth=marker), _pod("b", address="http://10.9.0.2:9000")]
    result = build_routes([_offload()], [], pods, virtual_nodes=[_node()])
    (route,) = result.table.routes
    assert route.away == (Endpoint("http://10.9.0.2:9000"),)
    assert [pod.name for pod in result.refused_signing] == ["a"]


def test_a_pod_without_the_offload_label_is_not_an_away_endpoint() -> None:
    pod = _pod("a")
    del pod["metadata"]["labels"]
    (route,) = _table([_offload()], [], [pod]).routes
    assert route.away == ()


def test_the_old_annotations_are_never_read_and_their_pods_are_reported() -> None:
    forged = {TRAFFIC_ADDRESS_ANNOTATION: "http://attacker.example", TRAFFIC_AUTH_ANNOTATION: "aws-sigv4"}
    spoofed = _pod("a", address="http://10.9.0.1:9000")
    spoofed["metadata"]["annotations"] = dict(forged)
    annotated_only = _pod("b", address=None)
    annotated_only["metadata"]["annotations"] = {TRAFFIC_ADDRESS_ANNOTATION: "http://10.9.0.2:9000"}
    result = build_routes([_offload()], [], [spoofed, annotated_only], virtual_nodes=[_node()])
    (route,) = result.table.routes
    assert route.away == (Endpoint("http://10.9.0.1:9000"),)  # the node's address, unsigned
    assert result.untrusted == (
        UntrustedPod("ml", "a", "uid-a", (TRAFFIC_ADDRESS_ANNOTATION, TRAFFIC_AUTH_ANNOTATION)),
        UntrustedPod("ml", "b", "uid-b", (TRAFFIC_ADDRESS_ANNOTATION,)),
    )


def test_only_pods_bound_to_a_virtual_node_are_away_endpoints() -> None:
    pods = [
        _pod("a", address="http://10.9.0.1:9000"),
        _pod("b", address="http://10.9.0.2:9000", node="gpu-1"),
        _pod("c", address="http://10.9.0.3:9000", node="nowhere"),
        _pod("d", address="http://10.9.0.4:9000", node=""),
    ]
    nodes = [_node(), _node("gpu-1", virtual=False)]
    (route,) = _table([_offload()], [], pods, nodes=nodes).routes
    assert route.away == (Endpoint("http://10.9.0.1:9000"),)


def test_a_pod_on_another_virtual_kubelet_is_no_endpoint_and_is_reported() -> None:
    """An AKS virtual node carries `type=virtual-kubelet` as ours do: even handed in, it is not ours."""
    pods = [
        _pod("a", address="http://10.9.0.1:9000"),
        _pod("aci", address="http://10.9.0.9:9000", node="virtual-node-aci-linux"),
        _pod("plain", address="http://10.9.0.8:9000", node="gpu-1"),
        _pod("quiet", address=None, node="virtual-node-aci-linux"),  # no address: nothing to ignore
    ]
    nodes = [_node(), _node("virtual-node-aci-linux", labels=AKS_LABELS), _node("gpu-1", virtual=False)]
    result = build_routes([_offload()], [], pods, virtual_nodes=nodes)
    (route,) = result.table.routes
    assert route.away == (Endpoint("http://10.9.0.1:9000"),)
    assert result.foreign == (
        ForeignNodePod("ml", "aci", "uid-aci", "virtual-node-aci-linux"),
        ForeignNodePod("ml", "plain", "uid-plain", "gpu-1"),
    )
    assert [target.url for target in result.check_targets] == ["http://10.9.0.1:9000"]


def _with_condition(pod: dict[str, Any], kind: str, message: str) -> dict[str, Any]:
    """`pod` with the condition `kind` set to `message`, as a `pods/status` patch would leave it."""
    conditions = [c for c in pod["status"]["conditions"] if c["type"] != kind]
    pod["status"]["conditions"] = [*conditions, {"type": kind, "status": "True", "message": message}]
    return pod


def test_only_addresses_with_a_seal_the_router_verifies_are_away_endpoints() -> None:
    """Whoever may write pod status or label Nodes, an address without our node's seal gets nothing."""
    copied_seal = seal_condition("uid-a", "http://10.9.0.1:9000")["message"]
    pods = [
        _pod("a", address="http://10.9.0.1:9000"),
        _pod("unsealed", address="http://10.9.0.2:9000", seal_key=None),
        _pod("other-key", address="http://10.9.0.3:9000", seal_key=OTHER_KEY),
        # A sealed pod whose address was then rewritten by someone with pods/status rights.
        _with_condition(
            _pod("rewritten", address="http://10.9.0.4:9000"), TRAFFIC_ADDRESS_CONDITION, "http://evil"
        ),
        # A marker written beside a sealed address (signing for S3 with the router's credentials).
        _with_condition(
            _pod("marked", address="http://10.9.0.5:9000"),
            TRAFFIC_AUTH_CONDITION,
            "aws-sigv4; service=sagemaker; region=eu-west-1",
        ),
        # Pod a's seal, copied onto a pod of the attacker's with a's address.
        _with_condition(
            _pod("copy", address="http://10.9.0.1:9000", seal_key=None),
            TRAFFIC_SIGNATURE_CONDITION,
            copied_seal,
        ),
        _with_condition(_pod("garbled", address="http://10.9.0.6:9000"), TRAFFIC_SIGNATURE_CONDITION, "v1 x"),
    ]
    result = build_routes([_offload()], [], pods, virtual_nodes=[_node()])
    (route,) = result.table.routes
    assert route.away == (Endpoint("http://10.9.0.1:9000"),)
    assert [target.url for target in result.check_targets] == ["http://10.9.0.1:9000"]
    reasons = {pod.name: pod.reason for pod in result.unverified}
    assert reasons == {
        "unsealed": "it carries no seal (no TrafficSignature condition)",
        "other-key": f"its seal was made with key {OTHER_KEY.key_id}, which the router does not hold",
        "rewritten": "its seal does not match its address, marker and UID",
        "marked": "its seal does not match its address, marker and UID",
        "copy": "its seal does not match its address, marker and UID",
        "garbled": "its seal is not 'v1 <key id> <signature>'",
    }
    assert result.unverified[0] == UnverifiedPod("ml", "copy", "uid-copy", reasons["copy"])


def test_a_sealed_marker_is_read_and_the_previous_key_still_verifies() -> None:
    marker = "aws-sigv4; service=sagemaker; region=eu-west-1"
    address = "https://runtime.sagemaker.eu-west-1.amazonaws.com/endpoints/e/invocations"
    pods = [_pod("a", address=address, auth=marker, seal_key=OTHER_KEY)]
    result = build_routes([_offload()], [], pods, virtual_nodes=[_node()], traffic_keys=(TEST_KEY, OTHER_KEY))
    (route,) = result.table.routes
    assert route.away == (Endpoint(address, auth=AwsSigV4("eu-west-1")),)
    assert result.unverified == ()


def test_without_a_key_no_away_pod_is_taken() -> None:
    result = build_routes([_offload()], [], [_pod("a")], virtual_nodes=[_node()], traffic_keys=())
    (route,) = result.table.routes
    assert route.away == ()
    assert [pod.reason for pod in result.unverified] == ["the router holds no traffic key to verify it with"]


def test_accepting_unsigned_addresses_takes_a_pod_without_a_seal_never_one_with_a_bad_seal() -> None:
    pods = [
        _pod("unsealed", address="http://10.9.0.2:9000", seal_key=None),
        _pod("other-key", address="http://10.9.0.3:9000", seal_key=OTHER_KEY),
    ]
    result = build_routes([_offload()], [], pods, virtual_nodes=[_node()], accept_unsigned=True)
    (route,) = result.table.routes
    assert route.away == (Endpoint("http://10.9.0.2:9000"),)
    assert [pod.name for pod in result.unverified] == ["other-key"]


@pytest.mark.parametrize("node_ready", ["False", "Unknown", None])
def test_a_not_ready_nodes_pods_stay_while_the_active_checks_pass(node_ready: str | None) -> None:
    """The node lifecycle controller marks the pods of an Unknown node Ready=False: not the pods' fault."""
    pods = [
        _pod("a", address="http://10.9.0.1:9000", ready=False, containers_ready=True),
        _pod("b", address="http://10.9.0.2:9000", ready=False, containers_ready=True),
        _pod("c", address="http://10.9.0.3:9000", ready=False, containers_ready=True),
        _pod("d", address="http://10.9.0.4:9000", ready=False, containers_ready=False),
        _pod("e", address="http://10.9.0.5:9000", ready=False, containers_ready=True, deleting=True),
    ]
    checks = {
        "http://10.9.0.1:9000": True,
        "http://10.9.0.2:9000": False,  # c has no verdict yet
        "http://10.9.0.4:9000": True,
        "http://10.9.0.5:9000": True,
    }
    (route,) = _table([_offload()], [], pods, nodes=[_node(ready=node_ready)], checks=checks).routes
    assert route.away == (
        Endpoint("http://10.9.0.1:9000", kept_on_active_checks=True),
        Endpoint("http://10.9.0.5:9000", terminating=True, kept_on_active_checks=True),
    )


def test_a_ready_nodes_not_ready_pod_is_left_out_whatever_the_checks_say() -> None:
    pods = [_pod("a", address="http://10.9.0.1:9000", ready=False, containers_ready=True)]
    (route,) = _table([_offload()], [], pods, checks={"http://10.9.0.1:9000": True}).routes
    assert route.away == ()


def test_a_node_back_keeps_its_pods_until_it_has_rewritten_their_status() -> None:
    """Between the node's return and its first status patch of a pod, the pod still says Ready=False."""
    node = _node(since="2026-12-03T13:20:37Z")
    pods = [
        _pod(
            "a",
            address="http://10.9.0.1:9000",
            ready=False,
            containers_ready=True,
            ready_since="2026-12-03T13:19:40Z",
        ),
        # Turned not Ready after the node came back, containers ready: the node's own word (a gate).
        _pod(
            "b",
            address="http://10.9.0.2:9000",
            ready=False,
            containers_ready=True,
            ready_since="2026-12-03T13:20:40Z",
        ),
        _pod("c", address="http://10.9.0.3:9000", ready=False, containers_ready=True, ready_since=None),
    ]
    checks = dict.fromkeys(("http://10.9.0.1:9000", "http://10.9.0.2:9000", "http://10.9.0.3:9000"), True)
    (route,) = _table([_offload()], [], pods, nodes=[node], checks=checks).routes
    assert route.away == (Endpoint("http://10.9.0.1:9000", kept_on_active_checks=True),)


def test_every_unsigned_away_address_is_checked_at_its_readiness_probe_path() -> None:
    pods = [
        _pod("a", address="http://10.9.0.1:9000/", probe_path="/healthz"),
        _pod("b", address="http://10.9.0.2:9000/base", ready=False),
        _pod("c", address=SAGEMAKER_URL, auth="aws-sigv4"),
        _pod("d", address="http://10.9.0.4:9000", node="gpu-1"),
    ]
    result = build_routes([_offload()], [], pods, virtual_nodes=[_node()])
    assert result.check_targets == (
        CheckTarget("http://10.9.0.1:9000", "http://10.9.0.1:9000/healthz"),
        CheckTarget("http://10.9.0.2:9000/base", "http://10.9.0.2:9000/base/"),
    )


def test_offloads_in_several_namespaces_do_not_mix_endpoints() -> None:
    offloads = [
        _offload("chat", "ml"),
        _offload("chat", "prod", hosts=["prod.test"]),  # the same path: a host apart, no conflict
        _offload("embed", "ml", service="embed-svc", prefix="/embed"),
    ]
    slices = [
        _slice([_endpoint("10.0.0.1")], namespace="ml"),
        _slice([_endpoint("10.1.0.1")], namespace="prod"),
        _slice([_endpoint("10.0.0.9")], namespace="ml", service="embed-svc"),
    ]
    pods = [
        _pod("a", namespace="ml", address="http://10.9.0.1:9000"),
        _pod("b", namespace="prod", address="http://10.9.1.1:9000"),
        _pod("c", namespace="ml", offload="embed", address="http://10.9.0.9:9000"),
    ]
    table = _table(offloads, slices, pods)
    routes = {route.key: route for route in table.routes}
    assert [route.key for route in table.routes] == ["ml/chat", "ml/embed", "prod/chat"]
    assert routes["ml/chat"].home == (Endpoint("http://10.0.0.1:8080"),)
    assert routes["ml/chat"].away == (Endpoint("http://10.9.0.1:9000"),)
    assert routes["prod/chat"].home == (Endpoint("http://10.1.0.1:8080"),)
    assert routes["prod/chat"].away == (Endpoint("http://10.9.1.1:9000"),)
    assert routes["ml/embed"].home == (Endpoint("http://10.0.0.9:8080"),)
    assert routes["ml/embed"].away == (Endpoint("http://10.9.0.9:9000"),)


@pytest.mark.parametrize(
    ("offload", "reason"),
    [
        (_offload("bad", hosts=None, prefix=None), "needs hosts"),
        (_offload("bad", prefix="v1"), "must start with /"),
        (_offload("bad", service=""), "spec.home.service"),
        (_offload("bad", away_weight=150), "outside 0..100"),
        (_offload("bad", hosts=[""]), "spec.route.hosts"),
    ],
)
def test_an_offload_with_an_invalid_route_is_skipped_and_reported(
    offload: dict[str, Any], reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    result = build_routes([offload, _offload("good")], [], [])
    assert [route.key for route in result.table.routes] == ["ml/good"]
    (skipped,) = result.skipped
    assert isinstance(skipped, SkippedOffload)
    assert skipped.key == "ml/bad"
    assert reason in skipped.reason

    with caplog.at_level(logging.WARNING, logger="vk_provider.routetable.building"):
        table = build_table([offload, _offload("good")], [], [])
    assert table == result.table
    assert "ml/bad" in caplog.text


def test_two_builds_of_the_same_objects_in_any_order_are_equal() -> None:
    offloads = [
        _offload("chat", "ml", hosts=["b.example", "a.example"]),
        _offload("embed", "ml", prefix="/e"),
    ]
    slices = [
        _slice([_endpoint("10.0.0.2"), _endpoint("10.0.0.1")], name="a"),
        _slice([_endpoint("10.0.0.3", ready=False, serving=True, terminating=True)], name="b"),
    ]
    pods = [_pod("x", address="http://10.9.0.2:9000"), _pod("y", address="http://10.9.0.1:9000")]
    first = _table(offloads, slices, pods)
    second = _table(list(reversed(offloads)), list(reversed(slices)), list(reversed(pods)))
    assert first == second
    assert [endpoint.url for endpoint in first.routes[0].home] == [
        "http://10.0.0.1:8080",
        "http://10.0.0.2:8080",
        "http://10.0.0.3:8080",
    ]


def _created(offload: dict[str, Any], at: str) -> dict[str, Any]:
    offload["metadata"]["creationTimestamp"] = at
    return offload


def test_a_younger_offload_with_the_same_route_in_another_namespace_gets_no_traffic() -> None:
    older = _created(_offload("tokens", "default", hosts=["chat.test"]), "2026-01-01T10:00:00Z")
    younger = _created(_offload("tokens", "attacker", hosts=["chat.test"]), "2026-01-01T10:00:01Z")
    slices = [
        _slice([_endpoint("10.0.0.1")], namespace="default"),
        _slice([_endpoint("10.6.6.6")], namespace="attacker"),
    ]
    result = build_routes([younger, older], slices, [])
    assert [route.key for route in result.table.routes] == ["default/tokens"]
    (skipped,) = result.skipped
    assert skipped.key == "attacker/tokens"
    assert "default/tokens" in skipped.reason
    # The winner deleted: the next build gives the route to the one that lost it.
    (route,) = build_routes([younger], slices, []).table.routes
    assert route.key == "attacker/tokens"


def test_a_broken_older_offload_does_not_block_a_valid_one() -> None:
    broken = _created(_offload("broken", service="", hosts=["chat.test"]), "2026-01-01T10:00:00Z")
    valid = _created(_offload("valid", hosts=["chat.test"]), "2026-01-01T10:00:01Z")
    result = build_routes([broken, valid], [], [])
    assert [route.key for route in result.table.routes] == ["ml/valid"]
    assert [item.key for item in result.skipped] == ["ml/broken"]


def _created(offload: dict[str, Any], at: str) -> dict[str, Any]:
    offload["metadata"]["creationTimestamp"] = at
    return offload


def test_another_namespace_takes_no_path_of_an_owned_host_not_even_a_longer_prefix() -> None:
    owner = _created(
        _offload("tokens", "default", service="tokens", hosts=["tokens.demo"], prefix=None), "T1"
    )
    rival = _created(_offload("tokens", "team", service="tokens", hosts=["tokens.demo"], prefix="/v1"), "T2")
    catch_all = _created(_offload("all", "team", service="tokens", hosts=None, prefix="/"), "T3")
    slices = [_slice([_endpoint("10.0.0.1")], namespace=ns, service="tokens") for ns in ("default", "team")]
    result = build_routes([rival, owner, catch_all], slices, [], virtual_nodes=[_node()])
    assert [route.key for route in result.table.routes] == ["default/tokens", "team/all"]
    (skipped,) = result.skipped
    assert skipped.key == "team/tokens"
    assert "belongs to namespace default" in skipped.reason
    assert result.table.host_owners == {"tokens.demo": "default"}
    for path in ("/v1/completions", "/v2/completions"):
        match = result.table.match("tokens.demo", path)
        assert match is not None
        assert match.key == "default/tokens"
    other = result.table.match("other.demo", "/v1")
    assert other is not None
    assert other.key == "team/all"


def _kept(namespace: str, service: str, since: str) -> dict[str, Any]:
    return RetainedRoute(namespace, service, "chat", ("chat.test",), "/v1", (), since).to_object("uid")


def test_a_kept_route_sends_its_hosts_home_until_an_offload_takes_it_over() -> None:
    kept_route = _kept("ml", "chat-svc", "2026-01-01T10:00:00Z")
    slices = [_slice([_endpoint("10.0.0.1")])]
    rival = _created(_offload("chat", "team", hosts=["chat.test"], prefix="/v1/chat"), "2026-01-01T11:00:00Z")
    result = build_routes([rival], slices, [], virtual_nodes=[_node()], kept_routes=[kept_route])
    (kept,) = result.table.routes
    assert (kept.key, kept.away_weight, kept.away) == ("ml/chat", 0, ())
    assert kept.match == RouteMatch(hosts=("chat.test",), path_prefix="/v1")
    assert kept.home == (Endpoint("http://10.0.0.1:8080"),)
    assert [item.key for item in result.skipped] == ["team/chat"]
    # A new Offload of the same Service routes in its place, with its own weight and away side.
    heir = _created(_offload("chat-2", "ml", hosts=["chat.test"]), "2026-01-02T00:00:00Z")
    pods = [_pod("a", offload="chat-2", address="http://10.9.0.1:9000")]
    result = build_routes([heir, rival], slices, pods, virtual_nodes=[_node()], kept_routes=[kept_route])
    (route,) = result.table.routes
    assert (route.key, route.away_weight) == ("ml/chat-2", 25)
    assert route.away == (Endpoint("http://10.9.0.1:9000"),)
    # A kept route that loses its claim routes nothing and is reported.
    late = _kept("team", "chat-svc", "2026-01-03T00:00:00Z")
    result = build_routes([], slices, [], virtual_nodes=[_node()], kept_routes=[kept_route, late])
    assert [route.key for route in result.table.routes] == ["ml/chat"]
    assert [item.key for item in result.skipped] == ["team/chat"]
    assert result.skipped[0].reason.startswith("kept route: ")


# --- rebuilding with a memo: only the changed objects are read, and the result is a fresh build's ---


def _cluster() -> dict[str, list[dict[str, Any]]]:
    """Two Offloads, their home slices and away pods, one virtual node: the mirrors' lists."""
    return {
        "offloads": [
            _offload(hosts=["chat.example.com"]),
            _offload("embed", service="embed-svc", hosts=["embed.example.com"]),
        ],
        "slices": [
            _slice([_endpoint("10.0.0.1"), _endpoint("10.0.0.2")]),
            _slice([_endpoint("10.0.1.1")], service="embed-svc", name="embed-svc-abcde"),
        ],
        "pods": [
            _pod("chat-away-0", address="http://10.9.0.1:9000"),
            _pod("chat-away-1", address="http://10.9.0.2:9000"),
            _pod("embed-away-0", offload="embed", address="http://10.9.1.1:9000"),
        ],
        "nodes": [_node()],
    }


def _build(
    cluster: dict[str, list[dict[str, Any]]], memo: building.BuildMemo | None = None, **settings: Any
) -> BuildResult:
    return build_routes(
        cluster["offloads"],
        cluster["slices"],
        cluster["pods"],
        virtual_nodes=cluster["nodes"],
        memo=memo,
        **settings,
    )


def test_a_build_with_a_memo_gives_what_a_fresh_build_gives_through_a_run_of_changes() -> None:
    cluster = _cluster()
    memo = building.BuildMemo()
    steps: list[tuple[str, Any]] = [
        ("start", lambda: None),
        ("a pod turns not ready", lambda: cluster["pods"].__setitem__(0, _pod("chat-away-0", ready=False))),
        ("a pod is deleted", lambda: cluster["pods"].pop(1)),
        (
            "a weight changes",
            lambda: cluster["offloads"].__setitem__(0, _offload(hosts=["chat.example.com"], away_weight=75)),
        ),
        (
            "a slice drains",
            lambda: cluster["slices"].__setitem__(
                0, _slice([_endpoint("10.0.0.1", ready=False, serving=True, terminating=True)])
            ),
        ),
        (
            "an untrusted slice appears",
            lambda: cluster["slices"].append(_slice([_endpoint("6.6.6.6")], name="forged", manager="me")),
        ),
        (
            "an Offload claims a held host",
            lambda: cluster["offloads"].append(
                _offload("thief", namespace="other", hosts=["chat.example.com"])
            ),
        ),
        ("the node goes not ready", lambda: cluster.__setitem__("nodes", [_node(ready="Unknown")])),
        (
            "an Offload goes invalid",
            lambda: cluster["offloads"].__setitem__(1, _offload("embed", service="embed-svc", prefix="v1")),
        ),
    ]
    for what, change in steps:
        change()
        # The lists are new each time (the mirrors' values), the unchanged objects the same ones.
        remembered = _build(
            {key: list(value) for key, value in cluster.items()},
            memo,
            active_checks={"http://10.9.0.1:9000": True},
        )
        fresh = _build(cluster, active_checks={"http://10.9.0.1:9000": True})
        assert remembered == fresh, what


def test_a_rebuild_reads_only_the_objects_that_changed_and_keeps_the_unchanged_routes() -> None:
    cluster = _cluster()
    memo = building.BuildMemo()
    first = _build(cluster, memo)
    assert (memo.offloads.reads, memo.endpoint_slices.reads, memo.away_pods.reads) == (2, 2, 3)
    cluster["pods"][2] = _pod("embed-away-0", offload="embed", address="http://10.9.1.9:9000")
    second = _build(cluster, memo)
    assert (memo.offloads.reads, memo.endpoint_slices.reads, memo.away_pods.reads) == (2, 2, 4)
    chat_before, embed_before = first.table.routes
    chat_after, embed_after = second.table.routes
    assert chat_after is chat_before  # nothing of it changed: the same route, compared at a glance
    assert embed_after is not embed_before
    assert [endpoint.url for endpoint in embed_after.away] == ["http://10.9.1.9:9000"]


def test_a_memo_forgets_the_objects_that_are_gone() -> None:
    cluster = _cluster()
    memo = building.BuildMemo()
    _build(cluster, memo)
    gone = cluster["pods"].pop()
    _build(cluster, memo)
    cluster["pods"].append(gone)
    _build(cluster, memo)
    assert memo.away_pods.reads == 4  # read again: the memo held it no longer


def test_new_traffic_keys_or_slice_managers_read_every_object_again() -> None:
    cluster = _cluster()
    memo = building.BuildMemo()
    _build(cluster, memo)
    rotated = _build(cluster, memo, traffic_keys=(OTHER_KEY,))
    assert rotated == _build(cluster, traffic_keys=(OTHER_KEY,))
    assert len(rotated.unverified) == 3
    assert memo.away_pods.reads == 6
    trusting = _build(
        cluster, memo, traffic_keys=(OTHER_KEY,), slice_managers=SliceManagers.with_extra(["me"])
    )
    assert trusting == _build(
        cluster, traffic_keys=(OTHER_KEY,), slice_managers=SliceManagers.with_extra(["me"])
    )
    assert memo.endpoint_slices.reads == 4


def _every_kind_of_away_pod() -> list[dict[str, Any]]:
    """Away pods in each state the table tells apart, and a few malformed ones."""
    forged = _pod("forged", address="http://10.9.0.7:9000")
    forged["metadata"]["annotations"] = {TRAFFIC_ADDRESS_ANNOTATION: "http://6.6.6.6", "team": "ml"}
    odd_containers = _pod("odd", address="http://10.9.0.8:9000")
    odd_containers["spec"]["containers"] = ["not a container", {"readinessProbe": {"httpGet": {"path": 7}}}]
    no_label = _pod("no-label", address="http://10.9.0.9:9000")
    del no_label["metadata"]["labels"]
    return [
        _pod("ready", address="http://10.9.0.1:9000", probe_path="health"),
        _pod("not-ready", address="http://10.9.0.2:9000", ready=False),
        _pod("kept", address="http://10.9.0.3:9000", ready=False, containers_ready=True),
        _pod("draining", address="http://10.9.0.4:9000", deleting=True),
        _pod("signed", address=SAGEMAKER_URL, auth="aws-sigv4; service=sagemaker; region=eu-west-1"),
        _pod("refused", address=SAGEMAKER_URL, auth="aws-sigv4; service=iam; region=eu-west-1"),
        _pod("foreign", address="http://10.9.0.5:9000", node="aks-virtual-node"),
        _pod("unsealed", address="http://10.9.0.6:9000", seal_key=None),
        _pod("bad-seal", address="http://10.9.0.10:9000", seal_key=OTHER_KEY),
        _pod("no-address", address=None),
        _pod("not-a-url", address="ftp://10.9.0.11"),
        forged,
        odd_containers,
        no_label,
    ]


@pytest.mark.parametrize("accept_unsigned", [False, True])
def test_the_fields_the_feed_keeps_of_an_away_pod_build_what_the_whole_pod_builds(
    accept_unsigned: bool,
) -> None:
    pods = _every_kind_of_away_pod()
    for pod in pods:  # what a real pod carries besides: none of it may matter
        pod["spec"]["volumes"] = [{"name": "token", "projected": {"sources": []}}]
        pod["spec"]["containers"].append({"name": "sidecar", "env": [{"name": "A", "value": "b"}]})
        pod["status"]["containerStatuses"] = [{"name": "app", "ready": True}]
        pod["metadata"]["resourceVersion"] = "42"
    kept = [building.away_pod_fields(pod) for pod in pods]
    settings: dict[str, Any] = {
        "virtual_nodes": [_node(ready="Unknown")],  # so that the checks keep the pod "kept"
        "active_checks": {"http://10.9.0.3:9000": True},
        "accept_unsigned": accept_unsigned,
    }
    whole = build_routes([_offload()], [], pods, **settings)
    assert build_routes([_offload()], [], kept, **settings) == whole
    # Each case is live: served, kept on checks, draining, signed, or reported.
    served = {endpoint.url for endpoint in whole.table.routes[0].away}
    assert len(served) == (7 if accept_unsigned else 6)
    assert any(endpoint.kept_on_active_checks for endpoint in whole.table.routes[0].away)
    assert [len(found) for found in (whole.foreign, whole.refused_signing, whole.untrusted)] == [1, 1, 1]
    assert len(whole.unverified) == (1 if accept_unsigned else 2)


def test_the_feed_keeps_an_away_pods_identity_and_not_its_spec() -> None:
    pod = _pod("chat-away-0", probe_path="/health")
    pod["spec"]["volumes"] = [{"name": "token"}]
    pod["metadata"]["resourceVersion"] = "42"
    kept = building.away_pod_fields(pod)
    assert kept["metadata"] == {
        "name": "chat-away-0",
        "namespace": "ml",
        "uid": "uid-chat-away-0",
        "resourceVersion": "42",
        "labels": {OFFLOAD_LABEL: "chat"},
    }
    assert kept["spec"] == {
        "containers": [{"readinessProbe": {"httpGet": {"path": "/health"}}}],
        "nodeName": VIRTUAL_NODE,
    }


def _pooled(pool: dict[str, str]) -> dict[str, Any]:
    offload = _offload()
    offload["spec"]["traffic"] = {"dataPlane": "inferencepool", "inferencePool": pool}
    return offload


def _pool(name: str = "chat-pool", *, picker: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": {"matchLabels": {"app": "chat"}}, "targetPorts": [{"number": 8080}]}
    if picker is not None:
        spec["endpointPickerRef"] = picker
    return {"metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}"}, "spec": spec}


def test_a_pooled_offloads_route_carries_its_pools_picker_read_from_the_pickers_service() -> None:
    picker_slice = _slice(
        [_endpoint("10.0.0.9"), _endpoint("10.0.0.10", ready=False)],
        service="chat-epp",
        name="chat-epp-x",
        ports=[{"name": "grpc", "port": 9002}],
    )
    pool = _pool(picker={"name": "chat-epp", "port": {"number": 9002}, "failureMode": "FailOpen"})
    (route,) = build_table(
        [_pooled({"name": "chat-pool"})], [picker_slice], [], inference_pools=[pool]
    ).routes
    assert route.picker == EndpointPicker("ml/chat-pool", ("10.0.0.9:9002",), fail_open=True)
    (plain,) = build_table([_offload()], [picker_slice], [], inference_pools=[pool]).routes
    assert plain.picker is None


def test_a_missing_pool_or_picker_reference_is_the_pickers_problem_never_a_skipped_route() -> None:
    (missing,) = build_table([_pooled({"name": "chat-pool"})], [], []).routes
    assert missing.picker == EndpointPicker("ml/chat-pool", problem="InferencePool ml/chat-pool not found")
    (unnamed,) = build_table([_pooled({"name": "chat-pool"})], [], [], inference_pools=[_pool()]).routes
    assert unnamed.picker is not None
    assert "names no endpoint picker Service" in unnamed.picker.problem
    elsewhere = _pooled({"name": "chat-pool", "namespace": "other"})
    (foreign,) = build_table([elsewhere], [], [], inference_pools=[_pool()]).routes
    assert foreign.picker is not None
    assert foreign.picker.problem == "InferencePool other/chat-pool not found"


def test_a_pickers_new_endpoint_makes_a_new_route_through_the_memo() -> None:
    memo = building.BuildMemo()
    offloads = [_pooled({"name": "chat-pool"})]
    pools = [_pool(picker={"name": "chat-epp"})]
    first = building.build_routes(offloads, [], [], inference_pools=pools, memo=memo).table.routes[0]
    assert first.picker == EndpointPicker("ml/chat-pool")
    picker_slice = _slice([_endpoint("10.0.0.9")], service="chat-epp", name="chat-epp-x")
    second = building.build_routes(
        offloads, [picker_slice], [], inference_pools=pools, memo=memo
    ).table.routes[0]
    assert second.picker == EndpointPicker("ml/chat-pool", ("10.0.0.9:8080",))
