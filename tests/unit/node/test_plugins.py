"""Which provider a node runs: a provider with a GPU catalog runs as a chain of one, others as they are."""

from __future__ import annotations

from pathlib import Path

from vk_provider import plugins
from vk_provider.provider import ProviderContext
from vk_providers.chain import ChainProvider
from vk_providers.mock import MockProvider
from vk_providers.runpod import RunPodProvider


def context(tmp_path: Path, config: dict[str, object]) -> ProviderContext:
    return ProviderContext("node-a", config, "10.0.0.1", tmp_path)


def test_a_provider_with_a_gpu_catalog_runs_as_the_only_member_of_a_chain(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text("rp_test_key\n")
    config = {"api_key_file": str(key), "gpu_type": "NVIDIA L4"}
    provider = plugins.build_for_node("runpod", context(tmp_path, config))
    assert isinstance(provider, ChainProvider)
    [member] = provider.members
    assert (member.name, member.kind) == ("runpod", "runpod")
    assert isinstance(member.provider, RunPodProvider)
    assert member.provider.settings.gpu_type == "NVIDIA L4"  # built once, with the node's own settings
    assert member.priced  # placement by price can use it


def test_a_provider_without_a_catalog_and_a_chain_are_not_wrapped(tmp_path: Path) -> None:
    assert isinstance(plugins.build_for_node("mock", context(tmp_path, {})), MockProvider)
    chain_config = {"members": [{"name": "a", "provider": "mock"}, {"name": "b", "provider": "mock"}]}
    chain = plugins.build_for_node("chain", context(tmp_path, chain_config))
    assert isinstance(chain, ChainProvider)
    assert [member.name for member in chain.members] == ["a", "b"]
