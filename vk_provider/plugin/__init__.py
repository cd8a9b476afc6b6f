"""The plugin API: providers in any language, served over gRPC (`v1/provider.proto`).

`serve` runs an in-process provider as a plugin; the `grpc` provider (`vk_providers.grpc`) is the
node's side of the connection.
"""

from vk_provider.plugin.server import ServerTls, serve, serving

__all__ = ["ServerTls", "serve", "serving"]
