"""The local development cluster: a real Kubernetes control plane built from upstream and run on loopback.

`building` compiles and caches the binaries; `pki`, `kubeconfigs` and `ports` prepare a start;
`processes` runs and stops components; `cluster` ties them into up/down/status; `commands` is what
`vk-provider dev` prints.
"""
