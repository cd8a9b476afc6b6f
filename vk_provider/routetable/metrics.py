"""What the feed and its active checks count, whoever keeps the series.

The router keeps them in its own families (`vk_provider.router.metrics.RouterMetrics`, which has
these methods), beside the data path's; the feed only needs somewhere to say them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class FeedMetrics(Protocol):
    def ignored(self, by_reason: Mapping[str, int]) -> None:
        """How many objects the table leaves out for each reason (every reason named, 0 included)."""

    def active_check(self, result: str) -> None:
        """One active check of an away endpoint, by result (pass, fail)."""
