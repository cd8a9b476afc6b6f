"""The Kubernetes machinery of the daemons, private to vk-provider: watching, events, leader election,
the references a pod's environment reads, and the cluster CA of a kubeconfig.

All of it speaks to the API through the kit's raw-JSON client (`vk_provider.kit.kube`), the one module
of the product that builds kubernetes_asyncio clients (the offload CLI only loads kubeconfigs with it).
"""
