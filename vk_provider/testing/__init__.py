"""The provider test kit: the contract every provider must meet, as pytest tests it can run on itself.

A provider author subclasses the suite and gives it a harness (see `vk_provider.testing.contract`):

    from vk_provider.testing.contract import ProviderContract

    class TestMyProvider(ProviderContract):
        @pytest.fixture
        async def harness(self): ...  # yields a ProviderHarness around the provider under test

The suite needs pytest and pytest-asyncio (in `asyncio_mode = "auto"`, or the harness declared with
`pytest_asyncio.fixture`). Those are test tools, not dependencies of the product, so this package
imports nothing from them until the suite itself is imported.
"""
