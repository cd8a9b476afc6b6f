"""The request schemas of RunPod's REST API v2 that the fake enforces, hand-written from the reference.

Source: RunPod's published OpenAPI 3.1 document (`https://api.runpod.io/v2/openapi.json`, as stored in
the runpod/docs repository, `api-reference-v2/openapi.json`, commit 098c7fb of 2026-08-18): the
`CreatePodRequest` and `UpdatePodRequest` bodies with `ContainerConfig`, `CreateGpuConfig`, `Mounts`,
`PersistentMount` and `NetworkMount`. Only the subset needed is written out, in our own words (the
document states no licence, so none of it is copied). What the schema says is a 422 here, with
messages shaped like the reference's example (`$: additional properties 'bogus' not allowed`); rules
the reference says are "enforced at the handler" are checked by `api` and answered with 400.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

Check = Callable[[str, Any], list[str]]
"""(JSON path, value) -> what is wrong with the value (empty when nothing is)."""

CUDA_VERSION = re.compile(r"^\d+\.\d+$")


def string(*, min_length: int = 0, pattern: re.Pattern[str] | None = None) -> Check:
    def check(path: str, value: Any) -> list[str]:
        if not isinstance(value, str):
            return [f"{path}: expected string, got {_kind(value)}"]
        if len(value) < min_length:
            return [f"{path}: length must be >= {min_length}"]
        if pattern is not None and not pattern.match(value):
            return [f"{path}: does not match pattern {pattern.pattern!r}"]
        return []

    return check


def integer(*, minimum: int | None = None) -> Check:
    def check(path: str, value: Any) -> list[str]:
        if isinstance(value, bool) or not isinstance(value, int):
            return [f"{path}: expected integer, got {_kind(value)}"]
        if minimum is not None and value < minimum:
            return [f"{path}: must be >= {minimum}"]
        return []

    return check


def boolean() -> Check:
    def check(path: str, value: Any) -> list[str]:
        return [] if isinstance(value, bool) else [f"{path}: expected boolean, got {_kind(value)}"]

    return check


def nullable(inner: Check) -> Check:
    def check(path: str, value: Any) -> list[str]:
        return [] if value is None else inner(path, value)

    return check


def enum(*values: str) -> Check:
    def check(path: str, value: Any) -> list[str]:
        if value not in values:
            return [f"{path}: must be one of {', '.join(values)}"]
        return []

    return check


def array(items: Check, *, max_items: int | None = None) -> Check:
    def check(path: str, value: Any) -> list[str]:
        if not isinstance(value, list):
            return [f"{path}: expected array, got {_kind(value)}"]
        if max_items is not None and len(value) > max_items:
            return [f"{path}: must have at most {max_items} items"]
        problems: list[str] = []
        for index, item in enumerate(value):
            problems.extend(items(f"{path}[{index}]", item))
        return problems

    return check


def string_map() -> Check:
    """An object whose values are all strings (`additionalProperties: {type: string}`)."""

    def check(path: str, value: Any) -> list[str]:
        if not isinstance(value, dict):
            return [f"{path}: expected object, got {_kind(value)}"]
        return [
            f"{path}.{key}: expected string, got {_kind(item)}"
            for key, item in value.items()
            if not isinstance(item, str)
        ]

    return check


def obj(fields: Mapping[str, Check], *, required: tuple[str, ...] = (), closed: bool = True) -> Check:
    """An object with known properties; `closed` rejects any other (additional/unevaluated: false)."""

    def check(path: str, value: Any) -> list[str]:
        if not isinstance(value, dict):
            return [f"{path}: expected object, got {_kind(value)}"]
        problems = [f"{path}: missing property '{name}'" for name in required if name not in value]
        if closed:
            problems.extend(
                f"{path}: additional properties '{name}' not allowed"
                for name in sorted(set(value) - set(fields))
            )
        for name, item in value.items():
            if name in fields:
                problems.extend(fields[name](f"{path}.{name}", item))
        return problems

    return check


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


CONTAINER_CONFIG: dict[str, Check] = {
    "args": string(),
    "disk": integer(minimum=1),
    "env": string_map(),
    "image": string(),
    "ports": array(string()),
    "registry": nullable(string()),
}

MOUNTS = obj(
    {
        "persistent": obj({"size": integer(minimum=10), "path": string()}, required=("size", "path")),
        "network": array(
            obj({"volumeId": string(), "path": string()}, required=("volumeId", "path")), max_items=1
        ),
    }
)

CREATE_GPU_CONFIG = obj(
    {
        "id": string(),
        "count": integer(minimum=1),
        "allowedCudaVersions": array(string(pattern=CUDA_VERSION)),
        "minCudaVersion": string(pattern=CUDA_VERSION),
    },
    required=("id",),
)

CREATE_CPU_CONFIG = obj({}, closed=False)
"""The fake runs GPU pods only; the CPU body is accepted as an object and refused by the handler."""

CREATE_POD_FIELDS: dict[str, Check] = {
    **CONTAINER_CONFIG,
    "name": string(min_length=1),
    "cloud": enum("SECURE", "COMMUNITY"),
    "cpu": CREATE_CPU_CONFIG,
    "dataCenterIds": array(string()),
    "globalNetworking": boolean(),
    "gpu": CREATE_GPU_CONFIG,
    "mounts": MOUNTS,
    "startJupyter": boolean(),
    "startSsh": boolean(),
    "templateId": string(min_length=1),
}

UPDATE_POD_FIELDS: dict[str, Check] = {
    **CONTAINER_CONFIG,
    "globalNetworking": boolean(),
    "locked": boolean(),
    "mounts": MOUNTS,
    "name": string(min_length=1),
    "templateId": string(),
}


def validate_create_pod(body: Any) -> list[str]:
    """Schema violations of a create body (422 in the reference); `image` is needed without a template."""
    required: tuple[str, ...] = (
        ("name",) if isinstance(body, dict) and "templateId" in body else ("name", "image")
    )
    return obj(CREATE_POD_FIELDS, required=required)("$", body)


def validate_update_pod(body: Any) -> list[str]:
    return obj(UPDATE_POD_FIELDS)("$", body)
