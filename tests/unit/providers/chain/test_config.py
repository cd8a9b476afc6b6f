"""The chain's settings, its members built through the node's plugin loading, and its entry point."""

from __future__ import annotations

import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

from vk_provider.provider import ENTRY_POINT_GROUP, PodLifecycle, ProviderContext
from vk_providers.chain import ChainProvider, ChainSettings, MemberSettings, parse_settings
from vk_providers.mock import MockProvider
from vk_providers.runpod import RunPodProvider

from .support import NODE

PYPROJECT = Path(__file__).parents[4] / "pyproject.toml"


def test_members_default_their_provider_to_their_name() -> None:
    settings = parse_settings(
        {
            "members": [
                {"name": "mock"},
                {"name": "burst", "provider": "mock", "config": {"capacity": {"nvidia.com/gpu": "2"}}},
            ],
            "catalog_timeout_seconds": 5,
            "max_offers_per_create": 3,
        }
    )
    assert settings == ChainSettings(
        members=(
            MemberSettings("mock", "mock", {}),
            MemberSettings("burst", "mock", {"capacity": {"nvidia.com/gpu": "2"}}),
        ),
        catalog_timeout_seconds=5.0,
        max_offers_per_create=3,
    )


@pytest.mark.parametrize(
    ("config", "words"),
    [
        pytest.param({}, "members must be a non-empty list", id="no-members"),
        pytest.param({"members": []}, "members must be a non-empty list", id="empty"),
        pytest.param({"members": ["mock"]}, r"members\[0\] must be a mapping", id="not-a-mapping"),
        pytest.param({"members": [{"provider": "mock"}]}, "name must be lower-case", id="no-name"),
        pytest.param({"members": [{"name": "Run_Pod"}]}, "not 'Run_Pod'", id="bad-name"),
        pytest.param({"members": [{"name": "a"}, {"name": "a"}]}, "'a' is used twice", id="twice"),
        pytest.param({"members": [{"name": "a", "provider": ""}]}, r"\(a\): provider must be", id="provider"),
        pytest.param(
            {"members": [{"name": "a", "config": []}]}, r"\(a\): config must be a mapping", id="config"
        ),
        pytest.param({"members": [{"name": "a", "conf": {}}]}, r"unknown keys \['conf'\]", id="typo"),
        pytest.param({"members": [{"name": "a"}], "catalog_timeout_seconds": 0}, "> 0", id="timeout-zero"),
        pytest.param({"members": [{"name": "a"}], "health_timeout_seconds": "8"}, "> 0", id="timeout-text"),
        pytest.param({"members": [{"name": "a"}], "max_offers_per_create": 0}, ">= 1", id="offers"),
    ],
)
def test_wrong_settings_fail_naming_the_key(config: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_settings(config)


def test_members_are_built_through_the_plugin_entry_points_each_with_its_own_folder(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text("rp_test\n")
    context = ProviderContext(
        NODE,
        {
            "members": [
                {"name": "burst", "provider": "mock"},
                {"name": "runpod", "config": {"api_key_file": str(key), "gpu_type": "NVIDIA L4"}},
            ]
        },
        "10.0.0.1",
        tmp_path / "state",
    )
    chain = ChainProvider(context)
    assert [(m.name, m.kind, type(m.provider)) for m in chain.members] == [
        ("burst", "mock", MockProvider),
        ("runpod", "runpod", RunPodProvider),
    ]
    assert [m.priced for m in chain.members] == [False, True]  # runpod: a catalog the chain can direct
    assert (tmp_path / "state" / "members" / "burst").is_dir()
    assert (tmp_path / "state" / "members" / "runpod").is_dir()


def test_a_member_that_cannot_be_built_is_named(tmp_path: Path) -> None:
    def context(members: list[dict[str, Any]]) -> ProviderContext:
        return ProviderContext(NODE, {"members": members}, "10.0.0.1", tmp_path)

    with pytest.raises(ValueError, match=r"member 'gpus' \(lambda-labs\): no provider named 'lambda-labs'"):
        ChainProvider(context([{"name": "gpus", "provider": "lambda-labs"}]))
    with pytest.raises(ValueError, match=r"member 'runpod' \(runpod\): runpod provider: .*cloud must be"):
        ChainProvider(context([{"name": "runpod", "config": {"api_key_env": "X", "cloud": "MOON"}}]))


def test_the_chain_is_a_provider_entry_point(tmp_path: Path) -> None:
    # Read from pyproject, so this holds before the package metadata of an editable install is rebuilt.
    entry_points = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"][ENTRY_POINT_GROUP]
    factory = EntryPoint("chain", entry_points["chain"], ENTRY_POINT_GROUP).load()
    provider = factory(ProviderContext(NODE, {"members": [{"name": "mock"}]}, "10.0.0.1", tmp_path))
    assert isinstance(provider, ChainProvider)
    assert isinstance(provider, PodLifecycle)
