"""A pod's versions at SageMaker: what its endpoint serves, making a new version, removing old ones.

The calls go through the provider's `call` (its thread pool and resilience rules); the provider holds
the pod's lock around each of these. See `versions` for the names.

A pod's versions are found by listing models and configurations whose names contain the pod's stem,
keeping the names of its shape (`versions.is_version`), and reading their `vk-provider.dev/pod-uid`
tag: a resource tagged for another pod (or not at all) is never removed. The first version, named
like the endpoint, is removed without that check, as it always was.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import ParamSpec, Protocol, TypeVar

from vk_provider.errors import InvalidPodError, ProviderError
from vk_provider.provider import PodRef
from vk_providers.sagemaker.api import Listed, SageMakerApi
from vk_providers.sagemaker.translate import TAG_POD_UID, Deployment, Endpoint
from vk_providers.sagemaker.versions import Current, is_version, version_stem

logger = logging.getLogger(__name__)

T = TypeVar("T")
P = ParamSpec("P")


class Call(Protocol):
    """The provider's way to make one SageMaker operation (`SageMakerProvider._call`)."""

    def __call__(
        self, operation: str, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs
    ) -> Awaitable[T]: ...


class PodVersions:
    def __init__(self, api: SageMakerApi, call: Call, *, role_arn: str) -> None:
        self._api = api
        self._call = call
        self._role_arn = role_arn

    async def current(self, endpoint: Endpoint) -> Current | None:
        """The version the endpoint serves; None if its configuration or model is gone."""
        if endpoint.config_name is None:
            return None
        config = await self._call(
            "describe_endpoint_config", self._api.describe_endpoint_config, endpoint.config_name
        )
        if config is None:
            return None
        model = await self._call("describe_model", self._api.describe_model, config.model_name)
        return None if model is None else Current(config, model)

    async def make(self, deployment: Deployment, current: Current | None) -> None:
        """Create the model (unless it is the current one) and the configuration of `deployment`.

        Each one already there counts as made (an earlier attempt). When SageMaker refuses one for good,
        what this made for nothing is removed before the refusal is raised.
        """
        new_model = current is None or deployment.model_name != current.model.name
        try:
            if new_model:
                await self._call("create_model", self._api.create_model, deployment, self._role_arn)
            await self._call("create_endpoint_config", self._api.create_endpoint_config, deployment)
        except InvalidPodError:
            await self.discard(deployment, current)
            raise

    async def discard(self, deployment: Deployment, current: Current | None) -> None:
        """Remove the model and configuration `make` made, after SageMaker refused the update for good."""
        removals = [("delete_endpoint_config", self._api.delete_endpoint_config, deployment.config_name)]
        if current is None or deployment.model_name != current.model.name:
            removals.append(("delete_model", self._api.delete_model, deployment.model_name))
        for operation, delete, name in removals:
            try:
                await self._call(operation, delete, name)
            except ProviderError as error:
                logger.warning("could not remove %s after SageMaker refused the update: %s", name, error)

    async def prune(self, ref: PodRef, base: str, *, config_in_use: str) -> None:
        """Remove the pod's versions other than `config_in_use` and its model."""
        in_use = await self._call(
            "describe_endpoint_config", self._api.describe_endpoint_config, config_in_use
        )
        configs, models = await self._listed(ref, base)
        for listed in configs:
            if listed.name != config_in_use:
                await self._call("delete_endpoint_config", self._api.delete_endpoint_config, listed.name)
                logger.info("pod %s: removed endpoint configuration %s, no longer used", ref, listed.name)
        if in_use is None:
            return  # which model serves is unknown: keep them all
        for listed in models:
            if listed.name != in_use.model_name:
                await self._call("delete_model", self._api.delete_model, listed.name)
                logger.info("pod %s: removed model %s, no longer used", ref, listed.name)

    async def delete_all(self, ref: PodRef, base: str) -> None:
        """Remove every configuration, then every model, of the pod (after its endpoint)."""
        configs, models = await self._listed(ref, base)
        for name in _with_first(base, configs):
            await self._call("delete_endpoint_config", self._api.delete_endpoint_config, name)
        for name in _with_first(base, models):
            await self._call("delete_model", self._api.delete_model, name)

    async def _listed(self, ref: PodRef, base: str) -> tuple[list[Listed], list[Listed]]:
        """The pod's configurations and models, confirmed by their tags."""
        stem = version_stem(base)
        configs, models = await asyncio.gather(
            self._call("list_endpoint_configs", self._api.list_endpoint_configs, stem),
            self._call("list_models", self._api.list_models, stem),
        )
        return await self._ours(ref, base, configs), await self._ours(ref, base, models)

    async def _ours(self, ref: PodRef, base: str, listed: Sequence[Listed]) -> list[Listed]:
        candidates = [item for item in listed if is_version(item.name, base)]
        tags = await asyncio.gather(
            *(self._call("list_tags", self._api.tags, item.arn) for item in candidates)
        )
        return [
            item
            for item, found in zip(candidates, tags, strict=True)
            if found is not None and found.get(TAG_POD_UID) == ref.uid
        ]


def _with_first(base: str, listed: Sequence[Listed]) -> list[str]:
    """The listed names, and the first version's whatever its tags (a listing may not show it yet)."""
    names = [item.name for item in listed if item.name != base]
    return [*names, base]
