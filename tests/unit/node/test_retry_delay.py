"""A provider's "come back later" hint stretches the node's retry backoff, never shortens it."""

from __future__ import annotations

from vk_provider.errors import InvalidPodError, TemporaryProviderError
from vk_provider.node.pods import retry_delay


def test_a_retry_after_hint_longer_than_the_backoff_wins() -> None:
    assert retry_delay(1.0, TemporaryProviderError("429", retry_after_seconds=30)) == 30


def test_a_shorter_or_missing_hint_leaves_the_backoff() -> None:
    assert retry_delay(8.0, TemporaryProviderError("429", retry_after_seconds=2)) == 8.0
    assert retry_delay(8.0, TemporaryProviderError("503")) == 8.0
    assert retry_delay(8.0, TemporaryProviderError("odd", retry_after_seconds=-5)) == 8.0
    assert retry_delay(8.0, InvalidPodError("bad")) == 8.0
    assert retry_delay(8.0, TimeoutError()) == 8.0
