"""Read the ConfigMaps, Secrets and Services a pod's environment and volumes refer to.

ConfigMaps and Secrets are read on demand (a node may only read those its pods use, under the Node
authorizer); Services come from a cluster-wide watch, because service links need every Service of a
namespace for every pod and listing them per pod would not scale.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

from vk_provider._kube.combined import Mirror
from vk_provider.kit.kube import KubeApi, KubeApiError, resource_path


class ApiReferenceReader:
    def __init__(self, api: KubeApi, services: Mirror) -> None:
        self._api = api
        self._services = services

    async def config_map(self, namespace: str, name: str) -> Mapping[str, str] | None:
        obj = await self._get(resource_path("v1", "configmaps", namespace=namespace, name=name))
        if obj is None:
            return None
        data: dict[str, str] = dict(obj.get("data") or {})
        for key, value in (obj.get("binaryData") or {}).items():
            data.setdefault(key, base64.b64decode(value).decode(errors="replace"))
        return data

    async def config_map_files(self, namespace: str, name: str) -> Mapping[str, bytes] | None:
        obj = await self._get(resource_path("v1", "configmaps", namespace=namespace, name=name))
        if obj is None:
            return None
        files = {key: value.encode() for key, value in (obj.get("data") or {}).items()}
        for key, value in (obj.get("binaryData") or {}).items():
            files.setdefault(key, base64.b64decode(value))
        return files

    async def secret(self, namespace: str, name: str) -> Mapping[str, bytes] | None:
        obj = await self._get(resource_path("v1", "secrets", namespace=namespace, name=name))
        if obj is None:
            return None
        return {key: base64.b64decode(value) for key, value in (obj.get("data") or {}).items()}

    async def _get(self, path: str) -> dict[str, Any] | None:
        """The object, or None when it does not exist; other failures propagate."""
        try:
            obj: dict[str, Any] = await self._api.get(path)
        except KubeApiError as error:
            if error.not_found:
                return None
            raise
        return obj

    async def services(self, namespace: str) -> Sequence[Mapping[str, Any]]:
        await self._services.synced.wait()
        return [
            service
            for service in self._services.objects.values()
            if service.get("metadata", {}).get("namespace") == namespace
        ]
