"""Helpers for the chain's tests: chains over real members, and a scripted member for the rare faults.

`ScriptedMember` is an in-memory provider with a GPU catalog that can be told which offer to use, whose
calls can be made to fail the ways a remote backend fails: a refusal, an answer lost after the work was
done, an unreachable backend, a health check that never answers.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vk_provider import plugins
from vk_provider.errors import ProviderError, ProviderUnavailableError, TemporaryProviderError
from vk_provider.provider import (
    ContainerPort,
    ContainerSpec,
    ContainerState,
    ContainerStateKind,
    GpuOffer,
    PodLifecycle,
    PodRef,
    PodRequest,
    PodState,
    ProviderContext,
)
from vk_providers.chain import ChainProvider

NODE = "chain-test"
OFFER_ANNOTATION = "scripted.test/offer"
"""Where a scripted member's `request_for_offer` writes the offer it was told to use: type/tier."""


def offer(gpu_type: str, price: float, *, tier: str | None = None, count: int = 1) -> GpuOffer:
    return GpuOffer(gpu_type=gpu_type, gpu_count=count, price_per_hour=price, tier=tier)


class ScriptedMember:
    def __init__(self, context: ProviderContext) -> None:
        self.name = context.state_dir.name
        self.node_name = context.node_name
        self.offers: list[GpuOffer] = []
        self.refusals: dict[str, ProviderError] = {}
        """Offer key (`type/tier`, or "*" for any create) -> the error create raises for it."""
        self.lose_answers = 0
        """The next creates do the work, then fail as if the answer were lost on the way."""
        self.unreachable = False
        """Every call fails, as a backend that cannot be reached."""
        self.unanswered_gets = 0
        """The next `get_pod_state` calls fail, as if the backend could not be reached for a moment."""
        self.health_hangs = False
        self.created: list[PodRequest] = []
        self.deleted: list[PodRef] = []
        self.pods: dict[str, PodState] = {}

    def _reach(self) -> None:
        if self.unreachable:
            raise TemporaryProviderError(f"{self.name}: connection refused")

    async def gpu_offers(self, *, gpu_count: int = 1) -> Sequence[GpuOffer]:
        self._reach()
        return [item for item in self.offers if item.gpu_count == gpu_count]

    def request_for_offer(
        self,
        pod: PodRequest,
        offer: GpuOffer,
        *,
        locations: Sequence[str] = (),
        max_price_per_hour: float | None = None,
    ) -> PodRequest:
        return dataclasses.replace(
            pod, annotations={**pod.annotations, OFFER_ANNOTATION: f"{offer.gpu_type}/{offer.tier}"}
        )

    async def create_pod(self, pod: PodRequest) -> None:
        self._reach()
        if pod.ref.uid in self.pods:
            return
        self.created.append(pod)
        refusal = self.refusals.get(pod.annotations.get(OFFER_ANNOTATION, ""), self.refusals.get("*"))
        if refusal is not None:
            raise refusal
        container = ContainerState(
            name=pod.containers[0].name,
            image=pod.containers[0].image,
            state=ContainerStateKind.RUNNING,
            ready=True,
            started=True,
            container_id=f"scripted://{self.name}/{uuid.uuid4()}",
        )
        self.pods[pod.ref.uid] = PodState(
            ref=pod.ref,
            phase="Running",
            containers=(container,),
            traffic_address=f"http://{self.name}.test:8080",
        )
        if self.lose_answers:
            self.lose_answers -= 1
            raise TemporaryProviderError(f"{self.name}: connection reset before the answer")

    async def update_pod(self, pod: PodRequest) -> None:
        self._reach()

    async def delete_pod(self, ref: PodRef, *, grace_period_seconds: float) -> None:
        self._reach()
        self.deleted.append(ref)
        self.pods.pop(ref.uid, None)

    async def get_pod_state(self, ref: PodRef) -> PodState | None:
        self._reach()
        if self.unanswered_gets:
            self.unanswered_gets -= 1
            raise TemporaryProviderError(f"{self.name}: connection refused")
        return self.pods.get(ref.uid)

    async def list_pods(self) -> Sequence[PodState]:
        self._reach()
        return list(self.pods.values())

    async def check_health(self) -> None:
        if self.health_hangs:
            await asyncio.Event().wait()
        if self.unreachable:
            raise ProviderUnavailableError(f"{self.name} cannot be reached")

    async def aclose(self) -> None:
        return None


class Backends:
    """The members' backends, which outlive any chain instance (a restarted chain finds them again)."""

    def __init__(self) -> None:
        self.scripted: dict[str, ScriptedMember] = {}

    def build(self, kind: str, context: ProviderContext) -> PodLifecycle:
        if kind != "scripted":
            return plugins.build(kind, context)
        member = self.scripted.get(context.state_dir.name)
        if member is None:
            member = self.scripted[context.state_dir.name] = ScriptedMember(context)
        return member


def make_chain(
    state_dir: Path,
    members: Sequence[Mapping[str, Any]],
    *,
    backends: Backends | None = None,
    node_name: str = NODE,
    **settings: Any,
) -> ChainProvider:
    context = ProviderContext(node_name, {"members": list(members), **settings}, "10.0.0.1", state_dir)
    return ChainProvider(context, build=(backends or Backends()).build)


def pod_request(
    name: str,
    *,
    uid: str | None = None,
    node_name: str = NODE,
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    image: str = "registry.example/llm-server:1",
) -> PodRequest:
    container = ContainerSpec(name="server", image=image, ports=(ContainerPort(8000, name="http"),))
    return PodRequest(
        ref=PodRef("default", name, uid or str(uuid.uuid4())),
        node_name=node_name,
        containers=(container,),
        annotations=dict(annotations or {}),
        labels=dict(labels or {}),
    )
