"""Development tools for vk-provider: the local control plane, the demo, and stand-ins of providers.

Kept out of the product's distribution on purpose: nothing in `vk_provider` or `vk_providers` imports
this package (an import-linter contract checks it), and a production install does not have it.
`devcluster` builds and runs the real control plane; `demo` holds the example inference server and the
load generator; `standins` holds offline stand-ins of RunPod and SageMaker, and their fault injection.
"""
