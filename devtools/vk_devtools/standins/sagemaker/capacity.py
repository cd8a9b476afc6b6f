"""Instance types: the account's quotas, AWS's spare capacity, and the types moto does not know.

Both limits are scripted per instance type and count instances (a variant's InitialInstanceCount) held
by the layer's endpoints that are not Failed; a type with no limit set has none. They fail differently,
as SageMaker does (see `profile`):

- over the quota, CreateEndpoint itself is refused with HTTP 400 `ResourceLimitExceeded`;
- short of capacity, CreateEndpoint is accepted and the endpoint goes Failed with the FailureReason
  `profile.CAPACITY_FAILURE_REASON` after `Profile.capacity_failure_seconds`.

moto 5.2.5's endpoint configurations accept only old instance types (no ml.g5, ml.g6, ml.p4d, ml.p5:
research note C.10). A type moto refuses but SageMaker accepts (in botocore's service model's enum of
production-variant instance types) is sent to moto as `MOTO_INSTANCE_TYPE`; the layer remembers the real
type and puts it back in DescribeEndpointConfig's answers. A type SageMaker does not know either still
reaches moto, which refuses it with SageMaker's ValidationException.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, cast

import botocore.session
from botocore.model import StringShape
from moto.sagemaker.exceptions import ValidationError
from moto.sagemaker.models import FakeEndpointConfig

from vk_devtools.standins.sagemaker.profile import QUOTA_MESSAGE
from vk_devtools.standins.sagemaker.server import GPU_INSTANCE_TYPE

MOTO_INSTANCE_TYPE = GPU_INSTANCE_TYPE
"""What moto is told instead of a type it does not know."""


@functools.cache
def sagemaker_instance_types() -> frozenset[str]:
    """The instance types SageMaker accepts for a production variant (botocore's service model)."""
    model = botocore.session.get_session().get_service_model("sagemaker")
    shape = model.shape_for("ProductionVariantInstanceType")
    if not isinstance(shape, StringShape):  # botocore's model changed: better to know than to guess
        raise TypeError(f"ProductionVariantInstanceType is a {type(shape).__name__}, not an enum")
    return frozenset(shape.enum)


@functools.cache
def moto_accepts(instance_type: str) -> bool:
    """Whether moto's endpoint configurations take `instance_type` (its check needs no configuration)."""
    try:
        FakeEndpointConfig.validate_instance_type(cast("Any", None), instance_type)
    except ValidationError:
        return False
    return True


def told_moto_instead(instance_type: str) -> bool:
    """Whether the layer tells moto `MOTO_INSTANCE_TYPE` instead: SageMaker knows the type, moto does not
    (a type neither knows still reaches moto, which refuses it as SageMaker would)."""
    return instance_type in sagemaker_instance_types() and not moto_accepts(instance_type)


@dataclasses.dataclass(frozen=True, slots=True)
class Fleet:
    """The instances an endpoint holds: (instance type, count) per production variant."""

    instances: tuple[tuple[str, int], ...]

    def count(self, instance_type: str) -> int:
        return sum(count for kind, count in self.instances if kind == instance_type)

    @property
    def types(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(kind for kind, _ in self.instances))


@dataclasses.dataclass(slots=True)
class InstanceLimits:
    """Per instance type: the account's quota and AWS's spare capacity, in instances (absent: no limit)."""

    quotas: dict[str, int] = dataclasses.field(default_factory=dict)
    capacity: dict[str, int] = dataclasses.field(default_factory=dict)

    def quota_refusal(self, wanted: Fleet, held: list[Fleet]) -> str | None:
        """ResourceLimitExceeded's message if `wanted` goes over a quota given the fleets `held`."""
        for instance_type in wanted.types:
            limit = self.quotas.get(instance_type)
            used = sum(fleet.count(instance_type) for fleet in held)
            delta = wanted.count(instance_type)
            if limit is not None and used + delta > limit:
                return QUOTA_MESSAGE.format(instance_type=instance_type, limit=limit, used=used, delta=delta)
        return None

    def short_of_capacity(self, wanted: Fleet, held: list[Fleet]) -> bool:
        """Whether AWS lacks spare instances of one of `wanted`'s types."""
        for instance_type in wanted.types:
            spare = self.capacity.get(instance_type)
            used = sum(fleet.count(instance_type) for fleet in held)
            if spare is not None and used + wanted.count(instance_type) > spare:
                return True
        return False
