"""vk-provider: a virtual-kubelet provider for burst inference offload."""

__version__ = "0.1.0.dev0"

__all__ = ["__version__"]
