"""The plugin API: providers in any language, served over gRPC (`v1/provider.proto`).

`serve` runs an in-process provider as a plugin; the `grpc` provider (`vk_providers.grpc`) is the
node's side of the connection.

A plugin that starts processes (as `local` does) should import `vk_provider` before `grpc`: importing
it turns gRPC's fork support off, which gRPC reads only once, when it loads. With it on, a child started
by uvloop (which forks with fork(2)) can crash between fork and exec (see `vk_provider/__init__.py`).
"""

from vk_provider.kit.grpctls import ServerTls
from vk_provider.plugin.server import serve, serving

__all__ = ["ServerTls", "serve", "serving"]
