"""Read the ConfigMaps, Secrets and Services a pod's environment refers to.

ConfigMaps and Secrets are read on demand (a node may only read those its pods use, under the Node
authorizer); Services come from a cluster-wide watch, because service links need every Service of a
namespace for every pod and listing them per pod would not scale.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

from vk_provider._kube.api import KubeApi, KubeApiError
from vk_provider._kube.watching import Reflector


class ApiReferenceReader:
    def __init__(self, api: KubeApi, services: Reflector) -> None:
        self._api = api
        self._services = services

    async def config_map(self, namespace: str, name: str) -> Mapping[str, str] | None:
        try:
            obj = await self._api.get(f"/api/v1/namespaces/{namespace}/configmaps/{name}")
        except KubeApiError as error:
            if error.not_found:
                return None
            raise
        data: dict[str, str] = dict(obj.get("data") or {})
        for key, value in (obj.get("binaryData") or {}).items():
            data.setdefault(key, base64.b64decode(value).decode(errors="replace"))
        return data

    async def secret(self, namespace: str, name: str) -> Mapping[str, bytes] | None:
        try:
            obj = await self._api.get(f"/api/v1/namespaces/{namespace}/secrets/{name}")
        except KubeApiError as error:
            if error.not_found:
                return None
            raise
        return {key: base64.b64decode(value) for key, value in (obj.get("data") or {}).items()}

    async def services(self, namespace: str) -> Sequence[Mapping[str, Any]]:
        await self._services.synced.wait()
        return [
            service
            for service in self._services.objects.values()
            if service.get("metadata", {}).get("namespace") == namespace
        ]
