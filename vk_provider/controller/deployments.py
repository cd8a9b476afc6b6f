"""What a migration does to Deployments: derive and scale the away side, scale the home side, count pods.

The phase machine (`reconciler`) decides; this module carries the decision out against the API and
reports what it did through `announce`, so the machine stays readable as a list of phases and these
effects stay testable on their own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from vk_provider.controller import deriving
from vk_provider.kit.kube import MERGE_PATCH, KubeApi, KubeApiError, RawObject, resource_path
from vk_provider.offload.homehealth import (
    DELETION_COST_ANNOTATION,
    LOWEST_DELETION_COST,
    REPLACING_ANNOTATION,
)
from vk_provider.offload.names import KIND, TEMPLATE_HASH_ANNOTATION
from vk_provider.offload.spec import OffloadSpec
from vk_provider.policy.selectors import InvalidSelector, parse_selector

logger = logging.getLogger(__name__)

Announce = Callable[[str, str], None]
"""(reason, message) of a Normal Event about the Offload."""


def deployment_path(namespace: str, name: str | None = None) -> str:
    return resource_path("apps/v1", "deployments", namespace=namespace, name=name)


def service_path(namespace: str, name: str) -> str:
    return resource_path("v1", "services", namespace=namespace, name=name)


def replicas_of(deployment: RawObject | None) -> int:
    """The Deployment's desired replicas (the API's default is 1)."""
    if deployment is None:
        return 0
    value = (deployment.get("spec") or {}).get("replicas")
    return int(value) if isinstance(value, int) else 1


def ready_replicas_of(deployment: RawObject | None) -> int:
    """Ready replicas running the current template (old ones being replaced do not count)."""
    if deployment is None:
        return 0
    status = deployment.get("status") or {}
    metadata = deployment.get("metadata") or {}
    if int(status.get("observedGeneration") or 0) < int(metadata.get("generation") or 0):
        return 0
    ready = int(status.get("readyReplicas") or 0)
    updated = int(status.get("updatedReplicas") or 0)
    return min(ready, updated)


class Deployments:
    """The home and away Deployments of Offloads, as one migration step needs them."""

    def __init__(self, api: KubeApi) -> None:
        self._api = api

    async def get(self, path: str) -> RawObject | None:
        """The object at `path`, or None when it does not exist."""
        try:
            return await self._api.get(path)
        except KubeApiError as error:
            if error.not_found:
                return None
            raise

    async def away(self, spec: OffloadSpec) -> RawObject | None:
        return await self.get(deployment_path(spec.namespace, deriving.away_name(spec)))

    async def ensure_away(
        self, spec: OffloadSpec, home: RawObject, service: RawObject, replicas: int, announce: Announce
    ) -> RawObject:
        """The away Deployment, derived from the home one, with `replicas`: created, rolled or scaled."""
        current = await self.away(spec)
        return await self.keep_away(spec, home, service, replicas, current=current, announce=announce)

    async def keep_away(
        self,
        spec: OffloadSpec,
        home: RawObject,
        service: RawObject,
        replicas: int,
        *,
        current: RawObject | None,
        announce: Announce,
    ) -> RawObject:
        """`ensure_away` for a caller that has just read the away Deployment (`current`)."""
        desired = deriving.away_deployment(spec, home, service, replicas)
        path = deployment_path(spec.namespace, deriving.away_name(spec))
        if current is None:
            created = await self._api.create(deployment_path(spec.namespace), desired)
            announce(
                "AwayDeploymentCreated",
                f"created Deployment {deriving.away_name(spec)} with {replicas} replicas",
            )
            return created
        annotations = (current.get("metadata") or {}).get("annotations") or {}
        wanted_hash = desired["metadata"]["annotations"][TEMPLATE_HASH_ANNOTATION]
        if annotations.get(TEMPLATE_HASH_ANNOTATION) != wanted_hash:
            # The home template changed since: roll the away pods to it (a merge patch replaces
            # the template's lists wholesale, which is what we want here).
            return await self._api.patch(
                path,
                {"metadata": {"annotations": desired["metadata"]["annotations"]}, "spec": desired["spec"]},
                content_type=MERGE_PATCH,
            )
        if replicas_of(current) != replicas:
            return await self.scale(spec.namespace, deriving.away_name(spec), replicas)
        return current

    async def release_owner(self, spec: OffloadSpec, away: RawObject) -> None:
        """Drop an ownerReference to the Offload that an earlier controller put on the away Deployment.

        With it, deleting the Offload (or its CRD) would let the garbage collector delete the away
        side even while it serves; the controller deletes it itself, after traffic is home.
        """
        metadata = away.get("metadata") or {}
        owners = metadata.get("ownerReferences") or []
        kept = [owner for owner in owners if not (owner.get("kind") == KIND and owner.get("uid") == spec.uid)]
        if len(kept) == len(owners):
            return
        logger.info("releasing Deployment %s/%s from its Offload owner", spec.namespace, metadata.get("name"))
        await self._api.patch(
            deployment_path(spec.namespace, deriving.away_name(spec)),
            {
                "metadata": {
                    "ownerReferences": kept or None,
                    "resourceVersion": metadata.get("resourceVersion"),
                }
            },
            content_type=MERGE_PATCH,
        )

    async def delete_away(self, spec: OffloadSpec) -> bool:
        """Delete the away Deployment; True once it is gone."""
        path = deployment_path(spec.namespace, deriving.away_name(spec))
        try:
            await self._api.delete(path, {"propagationPolicy": "Background"})
        except KubeApiError as error:
            if error.not_found:
                return True
            raise
        return await self.get(path) is None

    async def scale(self, namespace: str, name: str, replicas: int) -> RawObject:
        logger.info("scaling Deployment %s/%s to %d", namespace, name, replicas)
        return await self._api.patch(
            deployment_path(namespace, name), {"spec": {"replicas": replicas}}, content_type=MERGE_PATCH
        )

    async def scale_replacing(self, namespace: str, name: str, replicas: int, base: int | None) -> RawObject:
        """Scale a home Deployment and record (or, with None, clear) its replicas before a replacement."""
        logger.info(
            "scaling Deployment %s/%s to %d (replicas before replacement: %s)",
            namespace,
            name,
            replicas,
            base,
        )
        annotations = {REPLACING_ANNOTATION: None if base is None else str(base)}
        return await self._api.patch(
            deployment_path(namespace, name),
            {"metadata": {"annotations": annotations}, "spec": {"replicas": replicas}},
            content_type=MERGE_PATCH,
        )

    async def pods_of(self, deployment: RawObject) -> list[RawObject]:
        """The pods the Deployment's selector selects in its namespace ([] when the selector is unusable)."""
        metadata = deployment.get("metadata") or {}
        try:
            selector = parse_selector((deployment.get("spec") or {}).get("selector"), "spec.selector")
        except InvalidSelector:
            return []  # the apiserver validates a Deployment's selector: never seen in practice
        if selector.empty:
            return []
        listing = await self._api.get(
            resource_path("v1", "pods", namespace=metadata.get("namespace")),
            query={"labelSelector": selector.query()},
        )
        return list(listing.get("items") or [])

    async def nodes(self, names: Iterable[str]) -> list[RawObject]:
        """These Nodes as they are now (one that is gone is left out)."""
        found = [await self.get(resource_path("v1", "nodes", name=name)) for name in sorted(set(names))]
        return [node for node in found if node is not None]

    async def mark_first_to_go(self, namespace: str, pod: str) -> None:
        """Give the pod the lowest deletion cost, so the ReplicaSet removes it first when it scales down."""
        await self._patch_pod_metadata(
            namespace, pod, {"annotations": {DELETION_COST_ANNOTATION: LOWEST_DELETION_COST}}
        )

    async def label_pod(self, namespace: str, pod: str, key: str, value: str) -> None:
        """Put one label on a pod (a pod's labels change without restarting it)."""
        await self._patch_pod_metadata(namespace, pod, {"labels": {key: value}})

    async def _patch_pod_metadata(self, namespace: str, pod: str, metadata: dict[str, Any]) -> None:
        try:
            await self._api.patch(
                resource_path("v1", "pods", namespace=namespace, name=pod),
                {"metadata": metadata},
                content_type=MERGE_PATCH,
            )
        except KubeApiError as error:
            if not error.not_found:  # gone already: nothing to mark
                raise

    async def away_pods(self, spec: OffloadSpec) -> list[RawObject]:
        """Pods of the away side that still exist (deleted ones leave once their provider let go)."""
        selector = ",".join(f"{key}={value}" for key, value in deriving.away_selector(spec).items())
        listing = await self._api.get(
            resource_path("v1", "pods", namespace=spec.namespace), query={"labelSelector": selector}
        )
        return list(listing.get("items") or [])

    async def away_pod_count(self, spec: OffloadSpec) -> int:
        return len(await self.away_pods(spec))
