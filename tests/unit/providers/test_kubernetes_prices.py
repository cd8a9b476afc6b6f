"""What a pod costs an hour on the remote cluster: its GPU requests times the configured prices."""

from __future__ import annotations

from fractions import Fraction

import pytest

from vk_provider.provider import PodRef, PricedPod
from vk_providers.kubernetes import parse_settings
from vk_providers.kubernetes.prices import remote_pod_price

pytestmark = pytest.mark.unit

PRICES = {"nvidia.com/gpu": 2.0, "nvidia.com/mig-3g.40gb": 0.9}


def priced(**requests: Fraction) -> PricedPod:
    return PricedPod(PodRef("ns", "p", "u"), annotations={}, requests={"pods": Fraction(1), **requests})


def test_a_pod_costs_its_gpu_requests_times_their_prices() -> None:
    pod = priced(**{"nvidia.com/gpu": Fraction(2), "nvidia.com/mig-3g.40gb": Fraction(1), "cpu": Fraction(8)})
    assert remote_pod_price(pod, PRICES) == pytest.approx(4.9)
    assert remote_pod_price(priced(cpu=Fraction(1)), PRICES) == 0.0  # no GPU: nothing priced to pay


def test_no_prices_or_a_gpu_without_one_leaves_the_price_unknown() -> None:
    assert remote_pod_price(priced(**{"nvidia.com/gpu": Fraction(1)}), {}) is None
    assert remote_pod_price(priced(**{"amd.com/gpu": Fraction(1)}), PRICES) is None


def test_the_prices_are_a_setting_checked_at_start() -> None:
    settings = parse_settings(
        {"kubeconfig_file": "/k", "gpu_prices_usd_per_hour": {"nvidia.com/gpu": 2, "cpu": 0.05}}
    )
    assert settings.gpu_prices_usd_per_hour == {"nvidia.com/gpu": 2.0, "cpu": 0.05}
    assert parse_settings({"kubeconfig_file": "/k"}).gpu_prices_usd_per_hour == {}
    with pytest.raises(ValueError, match=r"gpu_prices_usd_per_hour\['nvidia.com/gpu'\] must be a number"):
        parse_settings({"kubeconfig_file": "/k", "gpu_prices_usd_per_hour": {"nvidia.com/gpu": -1}})
