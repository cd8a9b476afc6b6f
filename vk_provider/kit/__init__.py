"""The provider kit: what a provider may import from vk-provider, besides the contract itself.

A provider (in `vk_providers` or a third-party distribution) imports `vk_provider.provider` (the
contract), `vk_provider.errors`, `vk_provider.plugins`, `vk_provider.testing` and the modules of this
package, and nothing else of `vk_provider`: the node, the router, the controller, the CLI and the
Kubernetes machinery are internals that may change in any release. An import-linter contract
(`.importlinter`) holds every provider of this repository to that rule, and so does
`tests/unit/kit/test_surface.py`.

What is in it:

- `resilience`: one way to call a remote API (timeouts, retries with backoff, a circuit breaker, the
  health probe) and the `CallSettings` every remote provider reads the same way;
- `placement`: the placement annotations, matching pods to GPU offers, the placement record and cost;
- `credentials`: API keys from a mounted file or the environment, redacted everywhere;
- `kube`: a raw-JSON Kubernetes client, for a provider that runs pods in another cluster, with
  `apibudget`, its per-class pacing that yields to the apiserver's 429s, and `lazypackages`, which keeps
  kubernetes_asyncio's generated classes out of memory until something asks for them;
- `spdyframes`: SPDY/3.1 frames, for a provider that tunnels port-forward to a remote pod;
- `signing` and `traffic_auth`: SigV4 signatures, and the marker that says how the router must sign;
- `grpctls`: mutual TLS for a gRPC server (a plugin on TCP, the xDS server);
- `quantity`, `timestamps`, `backoff`, `procfs`, `useragent`: resource quantities, RFC 3339 times, the
  retry backoff formula, processes through /proc, and how vk-provider names itself to the APIs it calls.
"""
