"""The chart's example values name real provider settings: each node's providerConfig (and each chain
member's config) parses with its provider's own parser, which logs every key it does not know."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from vk_providers.chain.config import parse_settings as chain_settings
from vk_providers.grpc.provider import parse_settings as grpc_settings
from vk_providers.kubernetes.config import parse_settings as kubernetes_settings
from vk_providers.runpod.config import parse_settings as runpod_settings
from vk_providers.sagemaker.config import parse_settings as sagemaker_settings

EXAMPLES = Path(__file__).parents[2] / "charts" / "vk-provider" / "examples"
PARSERS: dict[str, Callable[[Mapping[str, Any]], object]] = {
    "runpod": runpod_settings,
    "sagemaker": sagemaker_settings,
    "kubernetes": kubernetes_settings,
    "grpc": grpc_settings,
    "chain": chain_settings,
}


def test_there_is_an_example_for_every_real_provider() -> None:
    providers = {
        node["provider"]
        for example in EXAMPLES.glob("*.yaml")
        for node in yaml.safe_load(example.read_text())["nodes"]
    }
    assert providers == set(PARSERS)


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.yaml")), ids=lambda path: path.stem)
def test_every_setting_in_the_example_is_one_its_provider_knows(
    example: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    for node in yaml.safe_load(example.read_text())["nodes"]:
        config = node.get("providerConfig") or {}
        PARSERS[node["provider"]](config)
        for member in config.get("members", []) if node["provider"] == "chain" else []:
            PARSERS[member.get("provider", member["name"])](member.get("config") or {})
    assert [record.getMessage() for record in caplog.records] == []
