"""Keep the router's table in step with the cluster: watch Offloads, EndpointSlices, away pods, nodes
and KeptRoutes.

Five reflectors mirror the objects `build_routes` needs (our virtual Nodes, by the label only
vk-provider's carry: only their pods may be away endpoints, and whether they are Ready decides when
the active checks keep a pod serving; the KeptRoutes: the routes deleted Offloads left); any change
(of an Offload: of what the table reads of it, not of its gates and conditions), and any new verdict
of the active checks, wakes one rebuild task, which rebuilds the table from the mirrors and swaps it
in when it differs from the one applied. A burst of changes (a Deployment scaling ten pods) costs a
few rebuilds, not one per event, because the task rebuilds from the latest state each time it wakes.
A rebuild reads only the objects that changed since the last one (a `BuildMemo` keeps what each
mirrored object read to, and the routes made of unchanged ones), so one change in a cluster of a
thousand Offloads costs about ten milliseconds, not the two hundred a read of every object takes
(bench/scale_router.py); the log names the routes a new table changed.

A sixth mirrors the traffic key Secret (one object, by name, so that RBAC can grant that one alone): its
keys verify the seals of the away pods' traffic addresses, and a rotation reaches the table at once.
Without the Secret, or with one that holds no usable key, no away pod is taken (logged once per cause).

Each rebuild hands the active checks the away endpoints to check, and posts one Warning Event per away
pod (by UID) that carries the old traffic annotations the router now ignores, one per away pod with
a traffic address on a node that is not ours (another virtual-kubelet's), which it ignores too, one per
away pod whose traffic address carries no seal the router verifies, one per away pod whose
traffic-auth marker it refuses (a service other than SageMaker's runtime, or a host outside the signing
scope), and one per EndpointSlice of a home Service that no trusted manager wrote; the counts of each
are the `ignored_objects` gauge.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol, TypeVar

from vk_provider._kube.events import EventRecorder, InvolvedObject
from vk_provider._kube.watching import Reflector
from vk_provider.kit.kube import KubeApi, resource_path
from vk_provider.kit.traffic_signature import SecretLocation, TrafficKey, keys_of
from vk_provider.offload.homeslices import MANAGED_BY_LABEL, SliceManagers
from vk_provider.offload.inferencepools import inference_pools_path
from vk_provider.offload.names import (
    FOREIGN_NODE_REASON,
    OFFLOAD_LABEL,
    TRAFFIC_AUTH_REFUSED_REASON,
    UNTRUSTED_ENDPOINT_SLICE_REASON,
    UNTRUSTED_TRAFFIC_ANNOTATION_REASON,
    UNVERIFIED_TRAFFIC_ADDRESS_REASON,
    VIRTUAL_NODE_LABEL,
    VIRTUAL_NODE_SELECTOR,
    offloads_path,
)
from vk_provider.offload.retained import kept_routes_reflector
from vk_provider.routetable.building import (
    SERVICE_NAME_LABEL,
    BuildMemo,
    ForeignNodePod,
    OffloadTableReading,
    RefusedSigning,
    SkippedOffload,
    UntrustedPod,
    UntrustedSlice,
    UnverifiedPod,
    away_pod_fields,
    build_routes,
    offload_table_reading,
)
from vk_provider.routetable.health import ActiveChecks, CheckSettings
from vk_provider.routetable.metrics import FeedMetrics
from vk_provider.routetable.signingscope import SigningScope
from vk_provider.routetable.table import Endpoint, RouteTable

logger = logging.getLogger(__name__)


class _ObjectRef(Protocol):
    """What an object the router warns about (a pod, an EndpointSlice) is known by."""

    @property
    def namespace(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def uid(self) -> str: ...


_RefT = TypeVar("_RefT", bound=_ObjectRef)


POOLS_MISSING = (
    "the inferencepool routes find no pool, and serve home without its endpoint picker, until the Gateway "
    "API Inference Extension's InferencePool CRD is installed"
)


class TableFeed:
    """Mirrors what the routes depend on and hands each new table to `apply`.

    `namespace` limits every watch but the Nodes' to one namespace (None: the whole cluster).
    `synced` is set once all five mirrors hold their first list and the first table has been
    applied. The active checks of away endpoints run here, with `check_settings`, counted in
    `metrics`; `events`, if given, takes the Warnings about ignored annotations, pods on foreign
    nodes, refused traffic-auth markers and untrusted EndpointSlices (its `run` is the caller's).
    `signing_scope` and `slice_managers` are handed to `build_routes`, with the keys of the
    `traffic_key_secret` (default: `vk-provider-traffic-key` in `default`) and `accept_unsigned`.
    `inference_pools` mirrors InferencePools too, for the routes of the `inferencepool` data plane;
    while the cluster does not serve them (`POOLS_MISSING`), those routes have no picker to ask.
    """

    def __init__(
        self,
        api: KubeApi,
        apply: Callable[[RouteTable], None],
        *,
        namespace: str | None = None,
        check_settings: CheckSettings | None = None,
        metrics: FeedMetrics | None = None,
        events: EventRecorder | None = None,
        signing_scope: SigningScope | None = None,
        slice_managers: SliceManagers | None = None,
        traffic_key_secret: SecretLocation | None = None,
        accept_unsigned: bool = False,
        inference_pools: bool = False,
    ) -> None:
        self._apply = apply
        self._metrics = metrics
        self._accept_unsigned = accept_unsigned
        self._key_secret = traffic_key_secret or SecretLocation("default")
        self._key_problem = ""
        """Why the router holds no traffic key, as last logged ("" when it holds one)."""
        self._signing_scope = signing_scope
        self._slice_managers = slice_managers
        self._wake = asyncio.Event()
        self.checks = ActiveChecks(check_settings, on_change=self.checks_changed, metrics=metrics)
        self._events = events
        self._warned: set[str] = set()
        """UIDs of the pods already warned about ignored traffic annotations."""
        self._warned_foreign: set[str] = set()
        """UIDs of the pods already warned about being on a node that is not ours."""
        self._warned_refused_signing: set[str] = set()
        """UIDs of the pods already warned about a traffic-auth marker the router refuses."""
        self._warned_slices: set[str] = set()
        """UIDs of the EndpointSlices already warned about being written by an untrusted manager."""
        self._warned_unverified: set[str] = set()
        """UIDs of the pods already warned about a traffic address without a seal that verifies."""
        self.synced = asyncio.Event()
        self.table = RouteTable()
        self._memo = BuildMemo()
        """What the last rebuild read of each mirrored object: a rebuild reads only the changed ones."""
        self._offload_readings: dict[str, OffloadTableReading] = {}
        """By UID, what the table reads of each mirrored Offload, as of its last change."""
        self.skipped: tuple[SkippedOffload, ...] = ()
        self.rebuilds = 0
        self.offloads = Reflector(
            api,
            offloads_path(namespace),
            query={},
            on_change=self.offload_changed,
            description="offloads",
        )
        self.endpoint_slices = Reflector(
            api,
            resource_path("discovery.k8s.io/v1", "endpointslices", namespace=namespace),
            query={"labelSelector": SERVICE_NAME_LABEL},
            on_change=self._changed,
            description="endpoint slices",
        )
        self.away_pods = Reflector(
            api,
            resource_path("v1", "pods", namespace=namespace),
            query={"labelSelector": OFFLOAD_LABEL},
            on_change=self._changed,
            description="away pods",
            keep=away_pod_fields,  # a pod's fields the table reads: a fraction of a whole pod
        )
        self.virtual_nodes = Reflector(
            api,
            resource_path("v1", "nodes"),
            query={"labelSelector": VIRTUAL_NODE_SELECTOR},
            on_change=self._changed,
            description="virtual nodes",
        )
        self.kept_routes = kept_routes_reflector(api, namespace, self._changed)
        self.traffic_key = Reflector(
            api,
            resource_path("v1", "secrets", namespace=self._key_secret.namespace),
            query={"fieldSelector": f"metadata.name={self._key_secret.name}"},
            on_change=self._changed,
            description="traffic key",
        )
        self.inference_pools = (
            Reflector(
                api,
                inference_pools_path(namespace),
                query={},
                on_change=self._changed,
                description="inference pools",
                missing_type=POOLS_MISSING,
            )
            if inference_pools
            else None
        )
        self._reflectors = (
            self.offloads,
            self.endpoint_slices,
            self.away_pods,
            self.virtual_nodes,
            self.kept_routes,
            self.traffic_key,
            *((self.inference_pools,) if self.inference_pools is not None else ()),
        )

    async def _changed(self, _uid: str) -> None:
        self._wake.set()

    async def offload_changed(self, uid: str) -> None:
        """An Offload was added, changed or removed: rebuild, unless what the table reads of it is as
        it was. The controller writes an Offload's status several times per migration step (its gates,
        conditions, the step's time), and only the weight among those is the table's: in a wave of a
        hundred migrations among a thousand Offloads the other writes woke about thirty rebuilds a
        second, 13 ms each, where the table changed four times a second."""
        offload = self.offloads.objects.get(uid)
        if offload is None:
            self._offload_readings.pop(uid, None)
        else:
            reading = offload_table_reading(offload)
            if self._offload_readings.get(uid) == reading:
                return
            self._offload_readings[uid] = reading
        self._wake.set()

    def checks_changed(self) -> None:
        """A verdict of the active checks changed: rebuild."""
        self._wake.set()

    def rebuild(self) -> bool:
        """Build the table from the mirrors; apply it if it changed. Returns whether it did."""
        result = build_routes(
            self.offloads.objects.values(),
            self.endpoint_slices.objects.values(),
            self.away_pods.objects.values(),
            virtual_nodes=self.virtual_nodes.objects.values(),
            active_checks=self.checks.verdicts,
            kept_routes=self.kept_routes.objects.values(),
            signing_scope=self._signing_scope,
            slice_managers=self._slice_managers,
            traffic_keys=self._traffic_keys(),
            accept_unsigned=self._accept_unsigned,
            inference_pools=self.inference_pools.objects.values() if self.inference_pools else (),
            memo=self._memo,
        )
        self.rebuilds += 1
        self.checks.set_targets(result.check_targets)
        self._warn_untrusted(result.untrusted)
        self._warn_foreign(result.foreign)
        self._warn_refused_signing(result.refused_signing)
        self._warn_untrusted_slices(result.untrusted_slices)
        self._warn_unverified(result.unverified)
        if self._metrics is not None:
            self._metrics.ignored(
                {
                    UNVERIFIED_TRAFFIC_ADDRESS_REASON: len(result.unverified),
                    FOREIGN_NODE_REASON: len(result.foreign),
                    TRAFFIC_AUTH_REFUSED_REASON: len(result.refused_signing),
                    UNTRUSTED_ENDPOINT_SLICE_REASON: len(result.untrusted_slices),
                    UNTRUSTED_TRAFFIC_ANNOTATION_REASON: len(result.untrusted),
                }
            )
        for skipped in set(result.skipped) - set(self.skipped):
            logger.warning("offload %s left out of the route table: %s", skipped.key, skipped.reason)
        self.skipped = result.skipped
        if result.table == self.table:
            return False
        self.table = result.table
        self._apply(result.table)
        return True

    def _traffic_keys(self) -> tuple[TrafficKey, ...]:
        """The keys of the mirrored Secret; none, logged once per cause, when it is missing or unusable."""
        secrets = list(self.traffic_key.objects.values())
        problem = ""
        keys: tuple[TrafficKey, ...] = ()
        if not secrets:
            problem = (
                f"the traffic key Secret {self._key_secret} does not exist (a node daemon creates it at "
                "start) or the router may not read it"
            )
        else:
            try:
                keys = keys_of(secrets[0])
            except ValueError as error:
                problem = f"the traffic key Secret {self._key_secret} is unusable: {error}"
        if problem and problem != self._key_problem:
            logger.error("%s: no away pod's traffic address can be verified, so none gets traffic", problem)
        elif not problem and self._key_problem:
            logger.info("traffic key Secret %s read: away pods' addresses are verified", self._key_secret)
        self._key_problem = problem
        return keys

    def _warn_unverified(self, pods: tuple[UnverifiedPod, ...]) -> None:
        self._warned_unverified = self._warn_once(
            pods,
            self._warned_unverified,
            UNVERIFIED_TRAFFIC_ADDRESS_REASON,
            lambda pod: (
                f"ignored its traffic address: {pod.reason}, so no vk-provider node daemon can be shown "
                "to have published it"
            ),
        )

    def _warn_untrusted(self, pods: tuple[UntrustedPod, ...]) -> None:
        self._warned = self._warn_once(
            pods,
            self._warned,
            UNTRUSTED_TRAFFIC_ANNOTATION_REASON,
            lambda pod: (
                f"ignored {', '.join(pod.annotations)}: the router takes a pod's traffic address and "
                "auth marker only from its status, which only its virtual node may write"
            ),
        )

    def _warn_foreign(self, pods: tuple[ForeignNodePod, ...]) -> None:
        self._warned_foreign = self._warn_once(
            pods,
            self._warned_foreign,
            FOREIGN_NODE_REASON,
            lambda pod: (
                f"ignored its traffic address: node {pod.node or '(none)'} is not a vk-provider virtual "
                f"node (no {VIRTUAL_NODE_LABEL} label; type=virtual-kubelet alone is any "
                "virtual-kubelet's), so no vk-provider node daemon published it"
            ),
        )

    def _warn_refused_signing(self, pods: tuple[RefusedSigning, ...]) -> None:
        self._warned_refused_signing = self._warn_once(
            pods,
            self._warned_refused_signing,
            TRAFFIC_AUTH_REFUSED_REASON,
            lambda pod: (
                f"ignored its traffic address, whose traffic-auth marker the router does not act on: "
                f"{pod.reason}"
            ),
        )

    def _warn_untrusted_slices(self, slices: tuple[UntrustedSlice, ...]) -> None:
        self._warned_slices = self._warn_once(
            slices,
            self._warned_slices,
            UNTRUSTED_ENDPOINT_SLICE_REASON,
            _untrusted_slice_message,
            kind="EndpointSlice",
            api_version="discovery.k8s.io/v1",
        )

    def _warn_once(
        self,
        objects: tuple[_RefT, ...],
        warned: set[str],
        reason: str,
        message_of: Callable[[_RefT], str],
        *,
        kind: str = "Pod",
        api_version: str = "v1",
    ) -> set[str]:
        """One Warning Event per object UID (a resync must not repeat it); returns the UIDs warned of
        that are still there, so the set stays as small as the objects."""
        for found in objects:
            if found.uid in warned:
                continue
            warned.add(found.uid)
            message = message_of(found)
            if self._events is None:
                logger.warning("%s %s/%s: %s", kind, found.namespace, found.name, message)
            else:
                involved = InvolvedObject(kind, found.name, found.namespace, found.uid, api_version)
                self._events.record(involved, "Warning", reason, message)
        return warned & {found.uid for found in objects}

    async def run(self) -> None:
        """Watch, check and rebuild until cancelled."""
        async with asyncio.TaskGroup() as tasks:
            for reflector in self._reflectors:
                tasks.create_task(reflector.run())
            tasks.create_task(self._rebuild_on_change())
            tasks.create_task(self.checks.run())

    async def _rebuild_on_change(self) -> None:
        for reflector in self._reflectors:
            await reflector.synced.wait()
        self.rebuild()
        self.synced.set()
        logger.info("route table loaded: %d routes", len(self.table.routes))
        while True:
            await self._wake.wait()
            self._wake.clear()
            before = self.table
            if self.rebuild():
                _log_changes(before, self.table)


def _log_changes(before: RouteTable, after: RouteTable) -> None:
    """Say which routes a new table changed, added or removed: the routes alone, not the whole table
    (a thousand routes' weights on every pod's change would bury the log)."""
    earlier = {route.key: route for route in before.routes}
    changed = [route for route in after.routes if earlier.get(route.key) != route]
    removed = sorted(earlier.keys() - {route.key for route in after.routes})
    for route in changed:
        logger.debug(
            "%s: home %s; away %s",
            route.key,
            ", ".join(_described(e) for e in route.home) or "none",
            ", ".join(_described(e) for e in route.away) or "none",
        )
    logger.info(
        "route table updated (%d routes): %s%s",
        len(after.routes),
        ", ".join(f"{route.key} away={route.away_weight}%" for route in changed) or "no route changed",
        f"; removed {', '.join(removed)}" if removed else "",
    )


def _untrusted_slice_message(found: UntrustedSlice) -> str:
    manager = f"{MANAGED_BY_LABEL}={found.manager}" if found.manager else f"no {MANAGED_BY_LABEL} label"
    return (
        f"ignored as home endpoints ({manager}): the router takes a home Service's endpoints only from "
        "slices of Kubernetes' EndpointSlice controller or of a manager its --endpoint-slice-manager names"
    )


def _described(endpoint: Endpoint) -> str:
    notes = [
        word
        for word, on in (
            ("draining", endpoint.terminating),
            ("kept on checks", endpoint.kept_on_active_checks),
        )
        if on
    ]
    return endpoint.url + (f" ({', '.join(notes)})" if notes else "")
