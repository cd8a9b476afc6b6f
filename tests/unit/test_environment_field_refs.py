"""fieldRef: every path the kubelet supports, its rendering of label and annotation maps, and clear errors."""

from __future__ import annotations

import pytest

from tests.unit.environment_fakes import (
    HOST_IP,
    NAMESPACE,
    POD_IP,
    env_from_field,
    make_container,
    make_pod,
    resolve,
)
from vk_provider.environment import InvalidEnvironmentError
from vk_provider.environment.field_refs import go_quote

LABELS = {"tier": "web", "app": "shop", "example.com/team": "payments"}
ANNOTATIONS = {"note": 'say "hi"\nbye', "Example.com/Owner": "ops", "path": "C:\\temp"}


def pod_reading(path: str) -> dict[str, object]:
    container = make_container(env=[env_from_field("VALUE", path)])
    return make_pod(
        container,
        metadata={"labels": LABELS, "annotations": ANNOTATIONS},
        nodeName="virtual-node-1",
        serviceAccountName="shop-runner",
    )


async def value_of(path: str, *, pod_ip: str = POD_IP) -> str:
    resolved = await resolve(pod_reading(path), pod_ip=pod_ip)
    assert resolved.events == ()
    ((name, value),) = resolved.variables
    assert name == "VALUE"
    return value


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        pytest.param("metadata.name", "web-0", id="the pod name"),
        pytest.param("metadata.namespace", NAMESPACE, id="the pod namespace"),
        pytest.param("metadata.uid", "uid-1234", id="the pod uid"),
        pytest.param("spec.nodeName", "virtual-node-1", id="the node name"),
        pytest.param("spec.host", "virtual-node-1", id="the old spec.host alias of the node name"),
        pytest.param("spec.serviceAccountName", "shop-runner", id="the service account name"),
        pytest.param("status.podIP", POD_IP, id="the pod IP given by the caller"),
        pytest.param("status.podIPs", POD_IP, id="the pod IPs are the one pod IP"),
        pytest.param("status.hostIP", HOST_IP, id="the host IP given by the caller"),
        pytest.param("status.hostIPs", HOST_IP, id="the host IPs are the one host IP"),
        pytest.param("metadata.labels['app']", "shop", id="one label"),
        pytest.param("metadata.labels['example.com/team']", "payments", id="one prefixed label"),
        pytest.param("metadata.labels['missing']", "", id="a missing label is empty"),
        pytest.param("metadata.annotations['Example.com/Owner']", "ops", id="one annotation with capitals"),
        pytest.param("metadata.annotations['note']", 'say "hi"\nbye', id="one annotation unquoted"),
        pytest.param("metadata.annotations['missing']", "", id="a missing annotation is empty"),
    ],
)
async def test_a_field_path_gives_the_pods_value(path: str, expected: str) -> None:
    assert await value_of(path) == expected


async def test_whole_labels_render_as_sorted_quoted_lines() -> None:
    assert await value_of("metadata.labels") == 'app="shop"\nexample.com/team="payments"\ntier="web"'


async def test_whole_annotations_render_with_go_escapes_in_byte_order_of_keys() -> None:
    assert await value_of("metadata.annotations") == (
        'Example.com/Owner="ops"\nnote="say \\"hi\\"\\nbye"\npath="C:\\\\temp"'
    )


async def test_a_pod_without_labels_renders_them_as_empty_text() -> None:
    pod = make_pod(make_container(env=[env_from_field("LABELS", "metadata.labels")]))
    assert (await resolve(pod)).variables == (("LABELS", ""),)


async def test_an_unknown_pod_ip_gives_an_empty_value() -> None:
    assert await value_of("status.podIP", pod_ip="") == ""


async def test_an_absent_api_version_means_v1() -> None:
    container = make_container(env=[{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}])
    assert (await resolve(make_pod(container))).variables == (("N", "web-0"),)


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        pytest.param("plain", '"plain"', id="plain text is only wrapped in quotes"),
        pytest.param('a"b\\c', '"a\\"b\\\\c"', id="quotes and backslashes are escaped"),
        pytest.param("\a\b\f\n\r\t\v", '"\\a\\b\\f\\n\\r\\t\\v"', id="control characters use short escapes"),
        pytest.param("\x01\x1f\x7f", '"\\x01\\x1f\\x7f"', id="other ASCII control characters use hex"),
        pytest.param("żółw ✓ 日本", '"żółw ✓ 日本"', id="printable non-ASCII text is kept"),
        pytest.param("a\u00a0b\u200bc", '"a\\u00a0b\\u200bc"', id="invisible characters use u escapes"),
        pytest.param("\U000e0001", '"\\U000e0001"', id="invisible astral characters use long escapes"),
        pytest.param("\ud800", '"\ufffd"', id="a lone surrogate becomes the replacement character"),
    ],
)
def test_map_values_are_quoted_as_go_quotes_them(text: str, quoted: str) -> None:
    assert go_quote(text) == quoted


@pytest.mark.parametrize(
    ("path", "detail"),
    [
        pytest.param("status.phase", 'unsupported fieldPath "status.phase"', id="the pod phase"),
        pytest.param(
            "spec.restartPolicy", 'unsupported fieldPath "spec.restartPolicy"', id="the restart policy"
        ),
        pytest.param(
            "spec.schedulerName", 'unsupported fieldPath "spec.schedulerName"', id="the scheduler name"
        ),
        pytest.param(
            "metadata.generateName", 'unsupported fieldPath "metadata.generateName"', id="a made-up path"
        ),
        pytest.param("", 'unsupported fieldPath ""', id="an empty path"),
        pytest.param(
            "spec.containers['app']",
            "fieldPath \"spec.containers['app']\" does not support a subscript",
            id="a subscript on a path without keys",
        ),
        pytest.param(
            "metadata.labels['bad key!']",
            "invalid key subscript in fieldPath \"metadata.labels['bad key!']\": not a qualified name",
            id="a label subscript that is not a qualified name",
        ),
        pytest.param(
            "metadata.labels['Example.com/x']",
            "invalid key subscript in fieldPath \"metadata.labels['Example.com/x']\": not a qualified name",
            id="a label subscript with an upper-case prefix",
        ),
        pytest.param(
            "metadata.annotations['a/b/c']",
            "invalid key subscript in fieldPath \"metadata.annotations['a/b/c']\": not a qualified name",
            id="an annotation subscript with two slashes",
        ),
        pytest.param(
            f"metadata.labels['{'x' * 64}']",
            f"invalid key subscript in fieldPath \"metadata.labels['{'x' * 64}']\": not a qualified name",
            id="a label subscript longer than 63 characters",
        ),
    ],
)
async def test_an_unsupported_field_path_raises_an_error_naming_container_variable_and_path(
    path: str, detail: str
) -> None:
    with pytest.raises(InvalidEnvironmentError) as raised:
        await resolve(pod_reading(path))
    assert str(raised.value) == f'container "app", environment variable "VALUE": {detail}'
    assert (raised.value.container, raised.value.variable) == ("app", "VALUE")
    assert isinstance(raised.value, ValueError)


async def test_a_field_ref_for_another_api_version_is_refused() -> None:
    selector = {"apiVersion": "v2", "fieldPath": "metadata.name"}
    container = make_container(env=[{"name": "N", "valueFrom": {"fieldRef": selector}}])
    with pytest.raises(InvalidEnvironmentError, match='unsupported fieldRef apiVersion "v2"'):
        await resolve(make_pod(container))


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("metadata.labels[app]", id="brackets without quotes"),
        pytest.param("['app']", id="a subscript without a path"),
        pytest.param("metadata.labels['app'", id="an unclosed subscript"),
    ],
)
async def test_malformed_subscripts_are_unsupported_paths(path: str) -> None:
    with pytest.raises(InvalidEnvironmentError, match="unsupported fieldPath"):
        await resolve(pod_reading(path))
