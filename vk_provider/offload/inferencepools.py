"""The Gateway API Inference Extension's InferencePool, as the `inferencepool` data plane reads it.

An InferencePool (`inference.networking.k8s.io/v1`) selects model-server pods and names the endpoint
picker (EPP) that chooses one of them per request, from their queues and KV-cache use, through Envoy's
external processing. The xDS server mirrors the pools to configure its Envoys
(`vk_provider.routetable.building`); the controller reads the one an Offload names to refuse an Offload
it cannot carry (`vk_provider.controller.inferencepool`).
"""

from __future__ import annotations

from vk_provider.kit.kube import resource_path

GROUP = "inference.networking.k8s.io"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"
PLURAL = "inferencepools"

DESTINATION_HEADER = "x-gateway-destination-endpoint"
"""Where the picker writes the `ip:port` it chose (and the same key in the `envoy.lb` dynamic
metadata), as the endpoint picker protocol says."""
DESTINATION_METADATA_NAMESPACE = "envoy.lb"


def inference_pools_path(namespace: str | None = None) -> str:
    """The InferencePools of `namespace` (None: of every namespace)."""
    return resource_path(API_VERSION, PLURAL, namespace=namespace)


def inference_pool_path(namespace: str, name: str) -> str:
    return resource_path(API_VERSION, PLURAL, namespace=namespace, name=name)
