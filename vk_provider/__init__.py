"""vk-provider: a virtual-kubelet provider for burst inference offload."""

import os

# gRPC's fork support must be off in every process of ours. gRPC reads it once, when it loads, so it
# is set here, before any of our modules imports grpc (providers load through entry points, in a
# process that imported this package first). Our processes fork only to exec (a pod's process, an
# exec session, a probe), and uvloop forks with fork(2), which runs gRPC's at-fork handlers: in the
# child they start gRPC's event-engine threads between fork and exec, and one of them crashed the
# child under load (SIGSEGV in cygrpc, so `echo` exited with 139 through a served plugin). gRPC
# documents this setting for programs that fork only to exec. A value set by the user stays.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")

__version__ = "0.1.0"

__all__ = ["__version__"]
