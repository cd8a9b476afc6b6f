"""Packages whose `__init__` runs only when something asks for a name it defines: memory a daemon never uses.

kubernetes_asyncio's package `__init__`s import every generated API class (67 modules) and model (768
modules): about 37 MiB of RSS in every daemon, which reads and writes raw JSON and needs only the
configuration, authentication and transport submodules (see `kit.kube`). `defer` puts an unexecuted
module for each package in `sys.modules`: importing a submodule of it works as usual (it has its
`__path__`), `from package import submodule` imports just that submodule, and the first access to any
other name (`client.CoreV1Api`, `client.models.V1Pod`) runs the real `__init__` then, so code that does
use the generated classes (a test, a provider) gets exactly what a normal import gives it.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from collections.abc import Mapping
from importlib.abc import Loader
from types import ModuleType
from typing import Any

_LOCK = threading.RLock()


def defer(name: str, *, names: Mapping[str, str] | None = None) -> None:
    """Defer the `__init__` of package `name` (defer a parent before its children). `names` maps names
    its `__init__` re-exports to the submodule defining them (`{"ApiClient": "api_client"}`): those
    are served from that submodule alone. A package already imported (or not installed) is left alone:
    deferring is only ever a saving, never a change of behaviour."""
    if name in sys.modules:
        return
    parent, _, child = name.rpartition(".")
    if parent and not hasattr(sys.modules.get(parent), "__path__"):
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return
    module = importlib.util.module_from_spec(spec)
    module.__getattr__ = _loader_of(module, spec.loader, dict(names or {}))  # type: ignore[method-assign]
    sys.modules[name] = module
    if parent:
        setattr(sys.modules[parent], child, module)


def _loader_of(module: ModuleType, loader: Loader, names: dict[str, str]) -> Any:
    state = {"executed": False}

    def load_on_demand(attribute: str) -> Any:
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        if not state["executed"] and attribute in names:
            return getattr(importlib.import_module(f"{module.__name__}.{names[attribute]}"), attribute)
        # A submodule is imported on its own (`from kubernetes_asyncio.client import rest`).
        submodule = f"{module.__name__}.{attribute}"
        if submodule in sys.modules:
            return sys.modules[submodule]
        if not state["executed"] and importlib.util.find_spec(submodule) is not None:
            return importlib.import_module(submodule)
        with _LOCK:
            if not state["executed"]:
                state["executed"] = True
                del module.__dict__["__getattr__"]
                loader.exec_module(module)
        try:
            return module.__dict__[attribute]
        except KeyError:
            raise AttributeError(f"module {module.__name__!r} has no attribute {attribute!r}") from None

    return load_on_demand
