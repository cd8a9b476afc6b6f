"""The tokens server's batch: a bounded number of completions run, the others wait in order, the
running ones hold KV cache; and `/metrics` says so under vLLM's names, as an endpoint picker reads them."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from vk_devtools.demo.batch import Batch
from vk_devtools.demo.tokens import TokenServerSettings

from . import token_server
from .test_tokens import COMPLETIONS, poll

RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
KV_USAGE = "vllm:kv_cache_usage_perc"


async def test_a_full_batch_makes_the_next_request_wait_its_turn() -> None:
    batch = Batch(max_running=1, kv_cache_tokens=100)
    first_running, first_done = asyncio.Event(), asyncio.Event()

    async def first() -> None:
        async with batch.generation(prompt_tokens=10) as generation:
            generation.generated = 30
            first_running.set()
            await first_done.wait()

    async def second() -> None:
        async with batch.generation(prompt_tokens=5):
            pass

    one = asyncio.create_task(first())
    await first_running.wait()
    two = asyncio.create_task(second())
    async with asyncio.timeout(5):
        while batch.waiting == 0:  # noqa: ASYNC110 - a counter the task sets when it queues
            await asyncio.sleep(0)  # (noqa: sleep-ok) lets the second task reach the batch
    assert (batch.running, batch.waiting, batch.kv_cache_usage) == (1, 1, 0.4)  # 10 + 30 of 100
    first_done.set()
    await asyncio.gather(one, two)
    assert (batch.running, batch.waiting, batch.kv_cache_usage, batch.finished) == (0, 0, 0.0, 2)


async def test_a_request_that_leaves_while_waiting_or_running_gives_its_place_back() -> None:
    batch = Batch(max_running=1, kv_cache_tokens=100)
    holding = asyncio.Event()

    async def hold() -> None:
        async with batch.generation(prompt_tokens=1):
            holding.set()
            await asyncio.Event().wait()  # until cancelled: a client that went away

    held = asyncio.create_task(hold())
    await holding.wait()
    waiting = asyncio.create_task(hold())
    async with asyncio.timeout(5):
        while batch.waiting == 0:  # noqa: ASYNC110 - a counter the task sets when it queues
            await asyncio.sleep(0)  # (noqa: sleep-ok) lets the task reach the batch
    waiting.cancel()
    held.cancel()
    await asyncio.gather(held, waiting, return_exceptions=True)
    assert (batch.running, batch.waiting, batch.finished) == (0, 0, 0)
    async with asyncio.timeout(5), batch.generation(prompt_tokens=1):
        assert batch.running == 1  # the place is free again


def test_an_unbounded_batch_or_a_cache_of_no_tokens_is_refused_or_allowed_as_said() -> None:
    assert Batch(max_running=0, kv_cache_tokens=1).max_running == 0  # 0: no bound
    with pytest.raises(ValueError, match="kv_cache_tokens"):
        Batch(max_running=1, kv_cache_tokens=0)


async def test_the_servers_metrics_follow_its_batch_under_vllms_names() -> None:
    settings = TokenServerSettings(name="pod-a", token_delay=0.05, max_running=1, kv_cache_tokens=1000)
    async with token_server(settings) as url, aiohttp.ClientSession() as session:

        async def gauges() -> tuple[float, float, float]:
            async with session.get(url + "/metrics") as response:
                assert response.status == 200
                text = await response.text()
            values = {
                sample.name: sample.value
                for family in text_string_to_metric_families(text)
                for sample in family.samples
                if sample.labels.get("model_name") == "tokens"
            }
            return values[RUNNING], values[WAITING], values[KV_USAGE]

        assert await gauges() == (0.0, 0.0, 0.0)
        request = {"prompt": "four words of prompt", "max_tokens": 40, "stream": True}
        streams = [asyncio.create_task(session.post(url + COMPLETIONS, json=request)) for _ in range(2)]

        async def busy() -> tuple[float, float, bool]:
            running, waiting, usage = await gauges()
            return running, waiting, usage > 0.004  # the prompt's 4 tokens and at least one more

        await poll(busy, (1.0, 1.0, True))
        for response in await asyncio.gather(*streams):
            await response.read()
            response.release()
        await poll(gauges, (0.0, 0.0, 0.0))
        async with session.get(url + "/metrics") as response:
            text = await response.text()
        assert 'vllm:request_success_total{model_name="tokens"} 2.0' in text
        # The info gauges an endpoint picker reads too: no LoRA, the cache in 16-token blocks.
        infos = {
            family.name: family.samples[0].labels
            for family in text_string_to_metric_families(text)
            if family.name in ("vllm:lora_requests_info", "vllm:cache_config_info")
        }
        assert infos["vllm:lora_requests_info"]["max_lora"] == "0"
        assert infos["vllm:cache_config_info"] == {"block_size": "16", "num_gpu_blocks": "63"}
