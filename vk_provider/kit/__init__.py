"""The provider kit: what a provider may import from vk-provider, besides the contract itself.

A provider (in `vk_providers` or a third-party distribution) imports `vk_provider.provider` (the
contract), `vk_provider.errors`, `vk_provider.plugins`, `vk_provider.testing` and the modules of this
package, and nothing else of `vk_provider`: the node, the router, the controller, the CLI and the
Kubernetes machinery are internals that may change in any release. An import-linter contract
(`.importlinter`) holds every provider of this repository to that rule.
"""
