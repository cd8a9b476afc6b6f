"""The suite `vk-provider conformance` runs (see `vk_provider.conformance`): the whole provider contract, its
harness given by the kit's pytest plugin."""

from vk_provider.testing.contract import ProviderContract


class TestConformance(ProviderContract):
    """Every test of the contract, against the provider the command line names."""
