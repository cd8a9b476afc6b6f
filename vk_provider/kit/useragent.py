"""How vk-provider introduces itself to the APIs it calls (the Kubernetes API, a provider's API)."""

from __future__ import annotations

from vk_provider import __version__

USER_AGENT = f"vk-provider/{__version__}"
