"""Version names: content-addressed, within SageMaker's 63 characters, told apart from other pods'."""

from __future__ import annotations

import dataclasses

from vk_providers.sagemaker.config import MAX_NAME_PREFIX, NAME_PATTERN, SageMakerSettings
from vk_providers.sagemaker.translate import MAX_NAME, deployment_for, resource_name
from vk_providers.sagemaker.versions import (
    ConfigVersion,
    Current,
    ModelVersion,
    is_version,
    next_version,
    version_name,
)

from .support import IMAGE, NODE, pod_request

UID = "0b6f2c8e-5d7a-4d0e-9c1b-6a2f1e3d4c5b"
ROLE = "arn:aws:iam::123456789012:role/serving"


def test_a_version_name_fits_even_with_the_longest_prefix() -> None:
    for prefix in ("vk", "p" * MAX_NAME_PREFIX):
        base = resource_name(prefix, UID)
        name = version_name(base, {"image": IMAGE})
        assert len(name) <= MAX_NAME
        assert NAME_PATTERN.fullmatch(name)
        assert name.startswith(f"{base}-")
        assert is_version(name, base)
        assert is_version(base, base)


def test_the_same_content_gets_the_same_name_and_other_content_another() -> None:
    base = resource_name("vk", UID)
    assert version_name(base, {"image": IMAGE}) == version_name(base, {"image": IMAGE})
    assert version_name(base, {"image": IMAGE}) != version_name(base, {"image": IMAGE + "-2"})


def test_another_pods_names_are_not_its_versions() -> None:
    base = resource_name("vk", UID)
    other = resource_name("vk", UID.replace("0b6f", "1b6f"))
    assert not is_version(version_name(other, {"image": IMAGE}), base)
    assert not is_version(f"{base}-not-a-digest", base)
    assert not is_version(f"x{base}", base)


def test_a_new_instance_count_keeps_the_model_and_a_new_image_does_not() -> None:
    settings = SageMakerSettings(role_arn=ROLE, instance_type="ml.g4dn.xlarge")
    first = deployment_for(pod_request("llm", uid=UID), settings, NODE)
    serving = Current(
        ConfigVersion(first.config_name, first.model_name, first.instance_type, first.instance_count),
        ModelVersion(first.model_name, first.image, first.environment),
    )
    more = next_version(dataclasses.replace(first, instance_count=3), serving, role_arn=ROLE)
    assert more.model_name == first.name
    assert more.config_name not in (first.name, more.model_name)
    newer = next_version(dataclasses.replace(first, image=IMAGE + "-2"), serving, role_arn=ROLE)
    assert newer.model_name != first.name
    assert is_version(newer.model_name, first.name)
    assert is_version(newer.config_name, first.name)
    # Nothing known of what serves (deleted behind our back): both made anew, named as ever.
    unknown = next_version(dataclasses.replace(first, image=IMAGE + "-2"), None, role_arn=ROLE)
    assert (unknown.model_name, unknown.config_name) == (newer.model_name, newer.config_name)
