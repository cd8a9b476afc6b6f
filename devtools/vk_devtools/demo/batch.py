"""The tokens server's batch, kept as an LLM server's scheduler keeps one, and published as vLLM does.

A model server runs a bounded number of requests at once (its batch); the others wait their turn,
first come first served; and each running request holds KV cache for its prompt and for the tokens
generated so far. An endpoint picker (the Gateway API Inference Extension's EPP) chooses a replica
from exactly these figures, scraped from the replica's `/metrics` under vLLM's names:
`vllm:num_requests_running`, `vllm:num_requests_waiting` and `vllm:kv_cache_usage_perc` (0..1).
Here a token is a word (the server's words stand for a model's tokens), and the cache holds
`kv_cache_tokens` of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

MODEL_NAME = "tokens"
"""The `model_name` label vLLM puts on every series."""


@dataclasses.dataclass(eq=False)
class Generation:
    """One running request: the KV cache it holds grows with each token it generates."""

    prompt_tokens: int
    generated: int = 0

    @property
    def cached_tokens(self) -> int:
        return self.prompt_tokens + self.generated


class Batch:
    """`max_running` requests run at once (0: no bound, nothing ever waits); the rest wait in order."""

    def __init__(self, *, max_running: int, kv_cache_tokens: int) -> None:
        if max_running < 0 or kv_cache_tokens < 1:
            raise ValueError("max_running must be >= 0 and kv_cache_tokens >= 1")
        self.max_running = max_running
        self.kv_cache_tokens = kv_cache_tokens
        self._slots = asyncio.Semaphore(max_running) if max_running else None
        self._running: set[Generation] = set()
        self.waiting = 0
        self.finished = 0

    @property
    def running(self) -> int:
        return len(self._running)

    @property
    def kv_cache_usage(self) -> float:
        """The share of the cache the running requests hold, 0..1 (a full cache is 1)."""
        held = sum(generation.cached_tokens for generation in self._running)
        return min(1.0, held / self.kv_cache_tokens)

    @contextlib.asynccontextmanager
    async def generation(self, prompt_tokens: int) -> AsyncIterator[Generation]:
        """Wait for a place in the batch, then run: the caller counts its tokens on what it gets."""
        if self._slots is not None:
            self.waiting += 1
            try:
                await self._slots.acquire()
            finally:
                self.waiting -= 1
        generation = Generation(prompt_tokens)
        self._running.add(generation)
        try:
            yield generation
            self.finished += 1
        finally:
            self._running.discard(generation)
            if self._slots is not None:
                self._slots.release()

    def exposition(self) -> bytes:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_BatchCollector(self))
        return generate_latest(registry)


KV_BLOCK_TOKENS = 16
"""Tokens per KV-cache block, as vLLM's default: `vllm:cache_config_info` reports the cache in blocks."""


class _BatchCollector(Collector):
    def __init__(self, batch: Batch) -> None:
        self._batch = batch

    def collect(self) -> Iterator[Metric]:
        batch = self._batch
        gauges = (
            ("vllm:num_requests_running", "Number of requests in the model execution batch.", batch.running),
            ("vllm:num_requests_waiting", "Number of requests waiting to be processed.", batch.waiting),
            ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", batch.kv_cache_usage),
        )
        for name, documentation, value in gauges:
            gauge = GaugeMetricFamily(name, documentation, labels=["model_name"])
            gauge.add_metric([MODEL_NAME], value)
            yield gauge
        # vLLM's info gauges, whose labels carry the facts: an endpoint picker reads both (and logs
        # an error on every scrape without them). No LoRA adapters; the cache as 16-token blocks.
        lora = GaugeMetricFamily(
            "vllm:lora_requests_info",
            "Running stats on LoRA requests.",
            labels=["max_lora", "running_lora_adapters", "waiting_lora_adapters"],
        )
        lora.add_metric(["0", "", ""], 1.0)
        yield lora
        cache = GaugeMetricFamily(
            "vllm:cache_config_info", "Information of the KV cache.", labels=["block_size", "num_gpu_blocks"]
        )
        cache.add_metric([str(KV_BLOCK_TOKENS), str(-(-batch.kv_cache_tokens // KV_BLOCK_TOKENS))], 1.0)
        yield cache
        finished = CounterMetricFamily(
            "vllm:request_success", "Count of successfully processed requests.", labels=["model_name"]
        )
        finished.add_metric([MODEL_NAME], batch.finished)
        yield finished
