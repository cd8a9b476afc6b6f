"""Providers shipped with vk-provider.

Each provider lives in its own subpackage (`vk_providers.<name>`) and is registered under the
`vk_provider.providers` entry-point group, so the daemon finds first-party and third-party
providers the same way. The folder is called `providers/` in the repository; the import name is
`vk_providers` so that it can never clash with another distribution's top-level `providers`.
"""
