"""resourceFieldRef: requests and limits with divisors, the kubelet's rounding, and its fallbacks."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.environment_fakes import make_container, make_pod, resolve
from vk_provider.environment import InvalidEnvironmentError

NODE = {"cpu": "4", "memory": "8Gi", "ephemeral-storage": "100Gi", "hugepages-2Mi": "1Gi"}


def resource_ref(
    resource: str, divisor: str | None = None, container_name: str | None = None, *, variable: str = "VALUE"
) -> dict[str, Any]:
    selector: dict[str, Any] = {"resource": resource}
    if divisor is not None:
        selector["divisor"] = divisor
    if container_name is not None:
        selector["containerName"] = container_name
    return {"name": variable, "valueFrom": {"resourceFieldRef": selector}}


async def value_of(
    container_resources: dict[str, Any] | None,
    resource: str,
    divisor: str | None = None,
    *,
    node: dict[str, str] | None = None,
    pod_resources: dict[str, Any] | None = None,
) -> str:
    """The value of `resource` for a container with `container_resources` in a pod with `pod_resources`."""
    container = make_container(env=[resource_ref(resource, divisor)], resources=container_resources)
    spec: dict[str, Any] = {} if pod_resources is None else {"resources": pod_resources}
    resolved = await resolve(make_pod(container, **spec), node_allocatable=NODE if node is None else node)
    ((_, value),) = resolved.variables
    return value


@pytest.mark.parametrize(
    ("amount", "divisor", "expected"),
    [
        pytest.param("250m", None, "1", id="250m cpu without a divisor rounds up to one core"),
        pytest.param("250m", "1", "1", id="250m cpu with divisor 1 rounds up to one core"),
        pytest.param("250m", "1m", "250", id="250m cpu with divisor 1m is 250"),
        pytest.param("1.5", None, "2", id="one and a half cores round up to two"),
        pytest.param("2", "1m", "2000", id="two cores are 2000 millicores"),
        pytest.param("2", "0", "2", id="a zero divisor means 1"),
        pytest.param("1", "300m", "4", id="a divisor that does not divide rounds up"),
        pytest.param("100u", "1m", "1", id="less than a millicore counts as a whole millicore"),
        pytest.param("1", "1u", "1000", id="a divisor below a millicore counts as a whole millicore"),
    ],
)
async def test_cpu_is_divided_in_thousandths_and_rounded_up(
    amount: str, divisor: str | None, expected: str
) -> None:
    assert await value_of({"limits": {"cpu": amount}}, "limits.cpu", divisor) == expected
    assert await value_of({"requests": {"cpu": amount}}, "requests.cpu", divisor) == expected


@pytest.mark.parametrize(
    ("amount", "divisor", "expected"),
    [
        pytest.param("64Mi", None, str(64 * 2**20), id="memory without a divisor is in bytes"),
        pytest.param("64Mi", "1Mi", "64", id="64Mi in mebibytes is 64"),
        pytest.param("64Mi", "1Gi", "1", id="64Mi in gibibytes rounds up to 1"),
        pytest.param("1G", "1Mi", "954", id="a decimal gigabyte in mebibytes rounds up"),
        pytest.param("1.5k", "1", "1500", id="a decimal amount with a suffix"),
        pytest.param("1500m", "1", "2", id="a fraction of a byte rounds up"),
        pytest.param(
            "9007199254740993", "1", "9007199254740993", id="past 2 to the 53 the value stays exact"
        ),
    ],
)
async def test_memory_and_storage_are_divided_in_whole_units_and_rounded_up(
    amount: str, divisor: str | None, expected: str
) -> None:
    assert await value_of({"limits": {"memory": amount}}, "limits.memory", divisor) == expected
    assert await value_of({"requests": {"memory": amount}}, "requests.memory", divisor) == expected
    assert (
        await value_of({"limits": {"ephemeral-storage": amount}}, "limits.ephemeral-storage", divisor)
        == expected
    )
    assert (
        await value_of({"requests": {"ephemeral-storage": amount}}, "requests.ephemeral-storage", divisor)
        == expected
    )


async def test_hugepages_requests_and_limits_are_supported() -> None:
    resources = {"requests": {"hugepages-2Mi": "100Mi"}, "limits": {"hugepages-2Mi": "100Mi"}}
    assert await value_of(resources, "requests.hugepages-2Mi", "1Mi") == "100"
    assert await value_of(resources, "limits.hugepages-2Mi", "1Mi") == "100"


async def test_a_request_that_is_not_set_is_zero() -> None:
    assert await value_of(None, "requests.cpu") == "0"
    assert await value_of({"requests": {}}, "requests.memory") == "0"


@pytest.mark.parametrize(
    ("resource", "divisor", "expected"),
    [
        pytest.param("limits.cpu", None, "4", id="cpu"),
        pytest.param("limits.cpu", "1m", "4000", id="cpu in millicores"),
        pytest.param("limits.memory", "1Mi", "8192", id="memory"),
        pytest.param("limits.ephemeral-storage", "1Gi", "100", id="ephemeral storage"),
    ],
)
async def test_a_limit_that_is_not_set_is_the_nodes_allocatable(
    resource: str, divisor: str | None, expected: str
) -> None:
    assert await value_of(None, resource, divisor) == expected


async def test_a_zero_limit_is_the_nodes_allocatable_too() -> None:
    assert await value_of({"limits": {"cpu": "0"}}, "limits.cpu") == "4"


async def test_a_limit_that_is_not_set_is_zero_when_the_node_does_not_say_either() -> None:
    assert await value_of(None, "limits.cpu", node={}) == "0"


async def test_hugepages_limits_never_fall_back_to_the_node() -> None:
    assert await value_of(None, "limits.hugepages-2Mi") == "0"


async def test_a_pod_level_limit_comes_before_the_nodes_allocatable_for_cpu_and_memory() -> None:
    pod_resources = {"limits": {"cpu": "2", "memory": "1Gi", "ephemeral-storage": "1Gi"}}
    assert await value_of(None, "limits.cpu", pod_resources=pod_resources) == "2"
    assert await value_of(None, "limits.memory", "1Mi", pod_resources=pod_resources) == "1024"
    assert await value_of(None, "limits.ephemeral-storage", "1Gi", pod_resources=pod_resources) == "100"
    assert (
        await value_of({"limits": {"cpu": "500m"}}, "limits.cpu", "1m", pod_resources=pod_resources) == "500"
    )


async def test_a_pod_level_limit_is_used_only_where_the_node_reports_the_resource() -> None:
    pod_resources = {"limits": {"cpu": "2"}}
    assert await value_of(None, "limits.cpu", pod_resources=pod_resources, node={}) == "0"


async def test_container_name_reads_another_container_of_the_pod() -> None:
    sidecar = make_container("sidecar", resources={"limits": {"memory": "32Mi"}})
    setup = make_container("setup", resources={"requests": {"cpu": "300m"}})
    app = make_container(
        "app",
        env=[
            resource_ref("limits.memory", "1Mi", "sidecar", variable="SIDECAR_MEMORY"),
            resource_ref("requests.cpu", "1m", "setup", variable="SETUP_CPU"),
            resource_ref("limits.cpu", None, "sidecar", variable="SIDECAR_CPU"),
        ],
        resources={"limits": {"memory": "1Gi"}},
    )
    pod = make_pod(app, sidecar, initContainers=[setup])
    resolved = await resolve(pod, node_allocatable=NODE)
    assert resolved.variables == (("SIDECAR_MEMORY", "32"), ("SETUP_CPU", "300"), ("SIDECAR_CPU", "4"))


@pytest.mark.parametrize(
    ("entry", "detail"),
    [
        pytest.param(
            resource_ref("limits.nvidia.com/gpu"),
            'unsupported container resource "limits.nvidia.com/gpu"',
            id="an extended resource",
        ),
        pytest.param(
            resource_ref("cpu"),
            'unsupported container resource "cpu"',
            id="a resource without requests or limits",
        ),
        pytest.param(
            resource_ref("usage.cpu"), 'unsupported container resource "usage.cpu"', id="an unknown bucket"
        ),
        pytest.param(
            resource_ref("requests.pods"),
            'unsupported container resource "requests.pods"',
            id="a node-only resource",
        ),
        pytest.param(
            resource_ref("limits.cpu", None, "ghost"),
            'resourceFieldRef names container "ghost", which the pod does not have',
            id="a container the pod does not have",
        ),
        pytest.param(
            resource_ref("limits.cpu", "lots"), "'lots' is not a valid quantity", id="an invalid divisor"
        ),
        pytest.param(resource_ref("limits.cpu", "-1"), 'divisor "-1" is negative', id="a negative divisor"),
    ],
)
async def test_a_resource_selector_that_cannot_be_evaluated_raises_an_error_naming_container_and_variable(
    entry: dict[str, Any], detail: str
) -> None:
    container = make_container(env=[entry], resources={"limits": {"cpu": "1"}})
    with pytest.raises(InvalidEnvironmentError) as raised:
        await resolve(make_pod(container), node_allocatable=NODE)
    assert str(raised.value).startswith(f'container "app", environment variable "VALUE": {detail}')


async def test_an_invalid_quantity_in_the_container_raises_an_error_naming_it() -> None:
    container = make_container(env=[resource_ref("limits.memory")], resources={"limits": {"memory": "lots"}})
    with pytest.raises(InvalidEnvironmentError, match="'lots' is not a valid quantity") as raised:
        await resolve(make_pod(container), node_allocatable=NODE)
    assert raised.value.variable == "VALUE"


async def test_a_quantity_given_as_a_json_number_is_read_like_its_text() -> None:
    container = make_container(env=[resource_ref("limits.cpu", "1m")], resources={"limits": {"cpu": 2}})
    assert (await resolve(make_pod(container))).variables == (("VALUE", "2000"),)
