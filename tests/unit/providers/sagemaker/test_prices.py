"""What a SageMaker pod costs an hour, for the node's spend ceiling and cost metric: its instance type's
price (the configured one, else the built-in us-east-1 table, there only) times its instance count."""

from __future__ import annotations

from pathlib import Path

import pytest

from vk_devtools.standins.sagemaker import TEST_ROLE_ARN
from vk_provider.provider import PodRef, PricedPod, ProviderContext, SupportsPodPrice
from vk_providers.sagemaker import SageMakerProvider, parse_settings
from vk_providers.sagemaker.config import SageMakerSettings
from vk_providers.sagemaker.prices import US_EAST_1_PRICES, endpoint_price
from vk_providers.sagemaker.translate import INSTANCE_COUNT_ANNOTATION, INSTANCE_TYPE_ANNOTATION

from .support import write_credentials

pytestmark = pytest.mark.unit

SETTINGS = SageMakerSettings(role_arn=TEST_ROLE_ARN, instance_type="ml.g5.xlarge")


def priced(**annotations: str) -> PricedPod:
    return PricedPod(PodRef("ns", "p", "u"), annotations=annotations, requests={})


def test_a_pod_costs_its_instance_types_list_price_times_its_instance_count_in_us_east_1() -> None:
    assert endpoint_price(priced(), SETTINGS, "us-east-1") == US_EAST_1_PRICES["ml.g5.xlarge"]
    two = priced(**{INSTANCE_TYPE_ANNOTATION: "ml.g4dn.xlarge", INSTANCE_COUNT_ANNOTATION: "2"})
    assert endpoint_price(two, SETTINGS, "us-east-1") == pytest.approx(2 * US_EAST_1_PRICES["ml.g4dn.xlarge"])


def test_the_configured_prices_win_and_are_the_only_ones_outside_us_east_1() -> None:
    settings = SageMakerSettings(
        role_arn=TEST_ROLE_ARN, instance_type="ml.g5.xlarge", instance_prices={"ml.g5.xlarge": 1.7}
    )
    assert endpoint_price(priced(), settings, "us-east-1") == 1.7
    assert endpoint_price(priced(), settings, "eu-west-1") == 1.7
    # The table's us-east-1 figures would under-count elsewhere: unknown instead.
    assert endpoint_price(priced(), SETTINGS, "eu-west-1") is None


def test_an_instance_type_priced_nowhere_or_an_invalid_pod_is_of_unknown_price() -> None:
    assert endpoint_price(priced(**{INSTANCE_TYPE_ANNOTATION: "ml.x9.huge"}), SETTINGS, "us-east-1") is None
    assert endpoint_price(priced(**{INSTANCE_COUNT_ANNOTATION: "none"}), SETTINGS, "us-east-1") is None
    no_type = SageMakerSettings(role_arn=TEST_ROLE_ARN)
    assert endpoint_price(priced(), no_type, "us-east-1") is None


def test_the_prices_setting_is_checked_when_the_daemon_starts() -> None:
    settings = parse_settings({"role_arn": TEST_ROLE_ARN, "instance_prices": {"ml.g5.xlarge": 1.5}})
    assert settings.instance_prices == {"ml.g5.xlarge": 1.5}
    with pytest.raises(ValueError, match=r"instance_prices\['ml.g5.xlarge'\] must be a number of USD"):
        parse_settings({"role_arn": TEST_ROLE_ARN, "instance_prices": {"ml.g5.xlarge": "cheap"}})
    with pytest.raises(ValueError, match="instance_prices must be a mapping"):
        parse_settings({"role_arn": TEST_ROLE_ARN, "instance_prices": ["ml.g5.xlarge"]})


def test_the_provider_prices_pods_in_its_region(tmp_path: Path) -> None:
    config = {
        "role_arn": TEST_ROLE_ARN,
        "region": "us-east-1",
        "instance_type": "ml.g5.2xlarge",
        "credentials_file": str(write_credentials(tmp_path / "c")),
    }
    provider = SageMakerProvider(ProviderContext("n", config, "10.0.0.1", tmp_path))
    assert isinstance(provider, SupportsPodPrice)
    assert provider.pod_price_per_hour(priced()) == US_EAST_1_PRICES["ml.g5.2xlarge"]
