"""What moto holds about configurations, models and tags, read and answered the way SageMaker would.

moto is told a known instance type in place of one it does not know (`capacity`); `Records` remembers
the type asked for and puts it back in what it reads, and in DescribeEndpointConfig's answers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore import xform_name
from botocore.exceptions import ClientError

from vk_devtools.standins.sagemaker import wire
from vk_devtools.standins.sagemaker.capacity import MOTO_INSTANCE_TYPE, Fleet, told_moto_instead

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient


TAGGING = frozenset({"ListTags", "AddTags", "DeleteTags"})
_TAGGED_KINDS = {"model": "model", "endpoint-config": "endpoint configuration", "endpoint": "endpoint"}
"""The kinds of resource (as ARNs name them) whose tagging calls the layer answers, in SageMaker's words."""


class Records:
    """Reads of moto's configurations and models (callers hold the layer's lock)."""

    def __init__(self, raw: SageMakerClient) -> None:
        self._raw = raw
        self._asked: dict[str, dict[str, str]] = {}
        """Configuration -> variant -> the instance type asked for, where moto was told another."""

    def tell_moto_known_types(self, document: dict[str, Any]) -> bool:
        """Replace, in a CreateEndpointConfig's parameters, the instance types moto does not know;
        whether any was."""
        asked: dict[str, str] = {}
        for variant in document.get("ProductionVariants", []):
            instance_type = variant.get("InstanceType")
            if isinstance(instance_type, str) and told_moto_instead(instance_type):
                asked[str(variant.get("VariantName", ""))] = instance_type
                variant["InstanceType"] = MOTO_INSTANCE_TYPE
        config_name = str(document.get("EndpointConfigName", ""))
        self._asked.pop(config_name, None)
        if asked:
            self._asked[config_name] = asked
        return bool(asked)

    def restore_instance_types(self, config_name: str, variants: list[dict[str, Any]]) -> None:
        asked = self._asked.get(config_name, {})
        for variant in variants:
            if variant.get("VariantName") in asked:
                variant["InstanceType"] = asked[variant["VariantName"]]

    def variants(self, config_name: str) -> list[dict[str, Any]]:
        """The configuration's production variants, with the instance types asked for; [] if it is missing."""
        try:
            config = self._raw.describe_endpoint_config(EndpointConfigName=config_name)
        except ClientError:
            return []
        variants = [dict(variant) for variant in config["ProductionVariants"]]
        self.restore_instance_types(config_name, variants)
        return variants

    def fleet(self, config_name: str) -> Fleet | None:
        """The instances the configuration asks for; None if it is missing."""
        variants = self.variants(config_name)
        if not variants:
            return None
        return Fleet(
            tuple(
                (str(variant["InstanceType"]), int(variant.get("InitialInstanceCount", 1)))
                for variant in variants
                if "InstanceType" in variant
            )
        )

    def image(self, config_name: str) -> str | None:
        """The image of the model of the configuration's first variant."""
        variants = self.variants(config_name)
        if not variants:
            return None
        try:
            model = self._raw.describe_model(ModelName=str(variants[0]["ModelName"]))
        except ClientError:
            return None
        primary = model.get("PrimaryContainer")
        containers = [primary] if primary is not None else model.get("Containers", [])
        return str(containers[0].get("Image", "")) if containers else None

    def tagging(self, operation: str, arguments: dict[str, Any]) -> wire.Response | None:
        """ListTags, AddTags or DeleteTags on a model, configuration or endpoint, carried out in moto under
        the layer's lock; on one moto does not have, SageMaker's ValidationException (moto's own answer is
        a 500). Other kinds of resource: moto's answer."""
        arn = str(arguments.get("ResourceArn", ""))
        kind, _, name = arn.rsplit(":", 1)[-1].partition("/")
        if kind not in _TAGGED_KINDS:
            return None
        if not self.holds(kind, name):
            return wire.error("ValidationException", f'Could not find {_TAGGED_KINDS[kind]} "{arn}".')
        answer = dict(getattr(self._raw, xform_name(operation))(**arguments))
        answer.pop("ResponseMetadata", None)
        return wire.answer(answer)

    def holds(self, kind: str, name: str) -> bool:
        """Whether moto has the model, endpoint configuration or endpoint `name`."""
        try:
            if kind == "model":
                self._raw.describe_model(ModelName=name)
            elif kind == "endpoint-config":
                self._raw.describe_endpoint_config(EndpointConfigName=name)
            else:
                self._raw.describe_endpoint(EndpointName=name)
        except ClientError:
            return False
        return True
