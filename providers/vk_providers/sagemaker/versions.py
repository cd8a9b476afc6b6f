"""Versions of a pod's model and endpoint configuration, and what an endpoint serves. Pure, no I/O.

SageMaker changes a running endpoint only by UpdateEndpoint onto another endpoint configuration, and
neither a configuration nor a model can be edited: a changed pod needs a new configuration, and for a new
image or environment a new model. A pod's first model and configuration are named like its endpoint,
`<name_prefix>-<pod UID>` (`translate.resource_name`), so endpoints made before updates existed stay
valid; each later one is `<name_prefix>-<pod UID>-<digest>`, the digest (lower-case base32 of SHA-256)
being that of what the resource holds. The same content always gets the same name: an update retried
after a crash or a lost answer finds what it made ("Cannot create already existing ...") instead of
making it twice. A pod's versions are found by this name shape, and confirmed by their tags.

The digest takes the room SageMaker's 63 characters leave: 12 characters with a short prefix, never
fewer than 5 (the longest prefix, 20 characters, with a 36-character UID).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
from collections.abc import Mapping

from vk_providers.sagemaker.translate import MAX_NAME, Deployment

MIN_DIGEST = 5
MAX_DIGEST = 12
"""60 bits: a collision between two versions of one pod is out of the question."""
_DIGEST_ALPHABET = frozenset("abcdefghijklmnopqrstuvwxyz234567")


@dataclasses.dataclass(frozen=True, slots=True)
class Serving:
    """What of a pod an endpoint serves: what an update compares (labels, most annotations do not count)."""

    image: str
    environment: tuple[tuple[str, str], ...]
    """Sorted by name."""
    instance_type: str
    instance_count: int


@dataclasses.dataclass(frozen=True, slots=True)
class ConfigVersion:
    """What DescribeEndpointConfig says of a configuration (its only variant)."""

    name: str
    model_name: str
    instance_type: str
    instance_count: int


@dataclasses.dataclass(frozen=True, slots=True)
class ModelVersion:
    """What DescribeModel says of a model (its primary container)."""

    name: str
    image: str
    environment: Mapping[str, str]


@dataclasses.dataclass(frozen=True, slots=True)
class Current:
    """The version an endpoint serves now."""

    config: ConfigVersion
    model: ModelVersion

    @property
    def serving(self) -> Serving:
        return Serving(
            image=self.model.image,
            environment=_sorted(self.model.environment),
            instance_type=self.config.instance_type,
            instance_count=self.config.instance_count,
        )


def serving_of(deployment: Deployment) -> Serving:
    return Serving(
        image=deployment.image,
        environment=_sorted(deployment.environment),
        instance_type=deployment.instance_type,
        instance_count=deployment.instance_count,
    )


def next_version(deployment: Deployment, current: Current | None, *, role_arn: str) -> Deployment:
    """`deployment` with the names of the model and configuration to update its endpoint to.

    The current model is kept when the image and environment are unchanged (a new instance type or
    count needs only a new configuration). With nothing known of the current version (its
    configuration or model was deleted behind our back), both are made anew.
    """
    same_model = (
        current is not None
        and current.model.image == deployment.image
        and _sorted(current.model.environment) == _sorted(deployment.environment)
    )
    if current is not None and same_model:
        model_name = current.model.name
    else:
        model_name = version_name(
            deployment.name,
            {
                "image": deployment.image,
                "environment": _sorted(deployment.environment),
                "role_arn": role_arn,
            },
        )
    config_name = version_name(
        deployment.name,
        {
            "model": model_name,
            "instance_type": deployment.instance_type,
            "instance_count": deployment.instance_count,
            "startup_timeout_seconds": deployment.startup_timeout_seconds,
        },
    )
    return dataclasses.replace(deployment, model_name=model_name, config_name=config_name)


def version_stem(base: str) -> str:
    """What every later version's name starts with (before `-<digest>`): `base`, cut to leave room."""
    return base[: MAX_NAME - 1 - MIN_DIGEST].rstrip("-")


def version_name(base: str, content: Mapping[str, object]) -> str:
    """The name of a version of `base` holding `content` (JSON-serialisable)."""
    stem = version_stem(base)
    encoded = json.dumps(content, sort_keys=True, separators=(",", ":")).encode()
    digest = base64.b32encode(hashlib.sha256(encoded).digest()).decode().lower().rstrip("=")
    return f"{stem}-{digest[: _digest_length(stem)]}"


def is_version(name: str, base: str) -> bool:
    """Is `name` the first or a later version of the pod whose endpoint is `base`?"""
    if name == base:
        return True
    stem = version_stem(base)
    digest = name[len(stem) + 1 :]
    return (
        name.startswith(f"{stem}-")
        and len(digest) == _digest_length(stem)
        and set(digest) <= _DIGEST_ALPHABET
    )


def _digest_length(stem: str) -> int:
    return min(MAX_DIGEST, MAX_NAME - 1 - len(stem))


def _sorted(environment: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(environment.items()))
