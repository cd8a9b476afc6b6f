"""Demo workloads for the development cluster and the tests: an inference-like token server and load.

`tokens` is a small HTTP server that acts like an LLM's completions API (streamed, deterministic
words instead of a model, failures on demand, graceful drain on SIGTERM), so the demo and the
integration tests have a realistic backend to move between home and away. `load` is an open-loop
load generator that records one outcome per request, so a migration can be judged by whether any
request failed or any stream broke while traffic moved.
The RunPod stand-in serves the token server behind each of its pods
(`vk_devtools.standins.runpod.workloads`).
"""
