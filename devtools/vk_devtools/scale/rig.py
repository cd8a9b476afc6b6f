"""The scale rig on a running plane: start it, grow it, and measure it at rest, in a wave, and deciding.

`ScaleRig.start` brings up (in this order) the shared backend, the node daemons, the registered GPU
nodes with their training pods, the filler pods, the router, the controller with its policy loop, and
the OffloadPolicy; `add_services` creates services; `settle` waits until the rig is quiet;
`at_rest`, `wave` and `decision` measure. The plane, the CRDs and the namespace `vk-provider-system`
are the caller's (bench/scale.py starts a plane per size; the test uses the test plane).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import ipaddress
import itertools
import math
import statistics
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

from vk_devtools.demo.load import LoadGenerator, LoadSettings, Outcome, failures
from vk_devtools.scale import attribution, controllerqueue, fleet, services
from vk_provider._kube.watching import Reflector
from vk_provider.kit.bounded import run_bounded
from vk_provider.kit.kube import MERGE_PATCH, KubeApi, KubeApiError, RawObject
from vk_provider.kit.timestamps import parse_timestamp
from vk_provider.offloadcli.holds import flip_annotations

POLL_SECONDS = 0.25
DEPTH_SAMPLE_SECONDS = 2.0
"""How often a wave reads the controller's queue depth from its metrics."""
CREATE_CONCURRENCY = 16


@dataclasses.dataclass(frozen=True, slots=True)
class RigSettings:
    folder: Path
    namespace: str
    """Where the services and filler pods go (created if missing)."""
    pod_cidrs: Sequence[str]
    """One pod network per daemon (pool, then away, then filler), inside the dev pod network."""
    max_services: int
    """The most services this rig will hold: the pool's daemons advertise one GPU per home replica."""
    pool_daemons: int = 1
    pool_nodes: int = 1
    """M, the pool's nodes: the daemons and pool_nodes - pool_daemons registered nodes."""
    away_daemons: int = 1
    filler_daemons: int = 0
    pods: int = 0
    """P, every pod of the rig: home replicas, registered nodes' training pods, then filler pods."""
    replicas: int = 1
    scoped: bool = False
    """Router and controller watch `namespace` only (on a shared test plane), else the whole cluster."""
    tag: str = dataclasses.field(default_factory=lambda: uuid.uuid4().hex[:6])

    def __post_init__(self) -> None:
        daemons = self.pool_daemons + self.away_daemons + self.filler_daemons
        if len(self.pod_cidrs) < daemons:
            raise ValueError(f"pod_cidrs: {len(self.pod_cidrs)} given for {daemons} node daemons")
        if self.pool_nodes < self.pool_daemons:
            raise ValueError(f"pool_nodes {self.pool_nodes} is below pool_daemons {self.pool_daemons}")
        if self.pool_daemons < 1 or self.away_daemons < 1:
            raise ValueError("pool_daemons and away_daemons: at least 1 each")

    @property
    def filler_daemon_indexes(self) -> range:
        """The filler daemons' places in `pod_cidrs` (after the pool's and the away daemons)."""
        first = self.pool_daemons + self.away_daemons
        return range(first, first + self.filler_daemons)

    def pod_addresses(self, daemon: int) -> int:
        """Pod addresses the daemon at this place in `pod_cidrs` hands out (less network and broadcast)."""
        return ipaddress.IPv4Network(self.pod_cidrs[daemon]).num_addresses - 2

    @property
    def domain(self) -> str:
        return f"{self.tag}.scale.test"

    @property
    def pool_label(self) -> dict[str, str]:
        return {"vk-provider.dev/pool": f"scale-{self.tag}"}

    @property
    def away_label(self) -> dict[str, str]:
        return {"vk-provider.dev/role": f"scale-away-{self.tag}"}

    @property
    def policy_name(self) -> str:
        return f"scale-{self.tag}"

    @property
    def registered_nodes(self) -> list[str]:
        return [f"scale-{self.tag}-gpu-{index:03d}" for index in range(self.pool_nodes - self.pool_daemons)]


class RigError(Exception):
    """The rig could not be brought up or measured; the message says why."""


class ScaleRig:
    def __init__(self, settings: RigSettings, api: KubeApi, plane_pki: Path, server: str) -> None:
        self.settings = settings
        self.api = api
        self.plane_pki = plane_pki
        self.server = server
        self.processes: list[fleet.Process] = []
        self.services = 0
        self.fillers = 0
        self.router_url = self.router_admin_url = self.controller_admin_url = ""
        self.backend_port = 0
        self._keep_alive: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RigError("the rig was not started")
        return self._session

    # --- bringing it up ---------------------------------------------------------------------------

    async def start(self) -> None:
        settings = self.settings
        folder = settings.folder
        kubeconfigs = attribution.write_identities(self.plane_pki, self.server, folder / "identities")
        await attribution.grant_access(self.api)
        await services.ensure_namespace(self.api, settings.namespace)
        await services.ensure_priority_class(self.api)
        self._session = aiohttp.ClientSession()
        backend, self.backend_port = fleet.backend(folder)
        self._launch(backend)
        await self._until(self._backend_answers, "the shared backend to answer", 60)
        daemons = self._daemons(kubeconfigs["nodes"])
        for daemon in daemons:
            self._launch(daemon)
        await self._until(lambda: self._nodes_ready([d.name for d in daemons]), "the node daemons Ready", 180)
        registered = settings.registered_nodes
        await run_bounded(
            [
                functools.partial(
                    fleet.register_node, self.api, name, settings.pool_label, fleet.REGISTERED_NODE_GPUS
                )
                for name in registered
            ],
            CREATE_CONCURRENCY,
        )
        self._keep_alive = asyncio.create_task(fleet.keep_alive(self.api, registered))
        router, self.router_url, self.router_admin_url = fleet.router(
            folder, kubeconfigs["router"], namespace=settings.namespace if settings.scoped else None
        )
        self._launch(router)
        await self._until(self._router_ready, "the router ready", 120)
        controller, self.controller_admin_url = fleet.controller(
            folder,
            kubeconfigs["controller"],
            router_admin_url=self.router_admin_url,
            namespace=settings.namespace if settings.scoped else None,
            lease_name=f"scale-{settings.tag}",
        )
        self._launch(controller)
        await services.create_ignoring_conflict(
            self.api,
            "/apis/offload.vk-provider.dev/v1alpha1/offloadpolicies",
            services.policy(settings.policy_name, settings.tag, settings.pool_label),
        )

    def _daemons(self, kubeconfig: Path) -> list[fleet.Process]:
        settings = self.settings
        cidrs = iter(settings.pod_cidrs)
        gpus = settings.max_services * settings.replicas
        per_daemon = [
            gpus // settings.pool_daemons + (1 if index < gpus % settings.pool_daemons else 0)
            for index in range(settings.pool_daemons)
        ]
        common: dict[str, Any] = {"kubeconfig": kubeconfig, "backend_port": self.backend_port}
        daemons = [
            fleet.node_daemon(
                settings.folder / "nodes",
                name=f"scale-{settings.tag}-pool-{index}",
                labels={**settings.pool_label, fleet.RUNS_PODS_LABEL: "true"},
                pod_cidr=next(cidrs),
                gpus=per_daemon[index],
                tainted=False,
                **common,
            )
            for index in range(settings.pool_daemons)
        ]
        daemons += [
            fleet.node_daemon(
                settings.folder / "nodes",
                name=f"scale-{settings.tag}-away-{index}",
                labels=settings.away_label,
                pod_cidr=next(cidrs),
                gpus=gpus,
                tainted=True,
                **common,
            )
            for index in range(settings.away_daemons)
        ]
        daemons += [
            fleet.node_daemon(
                settings.folder / "nodes",
                name=f"scale-{settings.tag}-filler-{index}",
                labels={},
                pod_cidr=next(cidrs),
                gpus=0,
                tainted=True,
                **common,
            )
            for index in range(settings.filler_daemons)
        ]
        return daemons

    def _launch(self, process: fleet.Process) -> None:
        process.start()
        self.processes.append(process)

    def _check_alive(self) -> None:
        for process in self.processes:
            if not process.alive():
                raise RigError(f"{process.name} exited; the end of {process.log}:\n{process.tail()}")

    async def _until(self, probe: Any, what: str, timeout_seconds: float) -> Any:
        deadline = time.monotonic() + timeout_seconds
        last: BaseException | None = None
        while True:
            self._check_alive()
            try:
                result = await probe()
            except (KubeApiError, aiohttp.ClientError, OSError, ValueError, KeyError) as error:
                last, result = error, None
            if result:
                return result
            if time.monotonic() > deadline:
                raise RigError(
                    f"timed out after {timeout_seconds:.0f} s waiting for {what} (last error: {last!r})"
                )
            await asyncio.sleep(POLL_SECONDS)  # polling a condition (noqa: sleep-ok)

    async def _backend_answers(self) -> bool:
        async with self.session.get(f"http://127.0.0.1:{self.backend_port}/healthz") as response:
            return response.status == 200

    async def _nodes_ready(self, names: Sequence[str]) -> bool:
        for name in names:
            node = await self.api.get(f"/api/v1/nodes/{name}")
            conditions = (node.get("status") or {}).get("conditions") or ()
            if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
                return False
        return True

    async def _router_ready(self) -> bool:
        async with self.session.get(f"{self.router_admin_url}/-/readyz") as response:
            return response.status == 200

    async def controller_metrics(self, names: Sequence[str]) -> str:
        """The controller's series of these sample names only: its whole exposition at N = 1,000 is
        some 19,000 series, which it would write and the rig parse at every sample."""
        query = [("name[]", name) for name in names]
        async with self.session.get(f"{self.controller_admin_url}/metrics", params=query) as response:
            response.raise_for_status()
            return await response.text()

    async def router_routes(self) -> dict[str, dict[str, Any]]:
        """The router's routes by Offload name (the rig's namespace only)."""
        async with self.session.get(f"{self.router_admin_url}/-/status") as response:
            document: dict[str, Any] = await response.json()
        return {
            str(route["name"]): route
            for route in document.get("routes") or ()
            if route.get("namespace") == self.settings.namespace
        }

    # --- services and pods ------------------------------------------------------------------------

    async def add_services(self, count: int) -> None:
        """Services self.services .. count-1 (Deployment, Service, Offload each)."""
        settings = self.settings
        if count > settings.max_services:
            raise RigError(f"{count} services: the pool was sized for {settings.max_services}")
        calls = [
            functools.partial(
                services.create_service,
                self.api,
                settings.namespace,
                index,
                tag=settings.tag,
                domain=settings.domain,
                pool_label=settings.pool_label,
                away_label=settings.away_label,
                backend_port=self.backend_port,
                replicas=settings.replicas,
            )
            for index in range(self.services, count)
        ]
        await run_bounded(calls, CREATE_CONCURRENCY)
        self.services = count

    async def add_pods(self) -> int:
        """A training pod of 8 GPUs on every registered node (the pool is busy), then filler pods on the
        filler daemons up to `pods` in all; returns how many pods were created."""
        settings = self.settings
        namespace = settings.namespace
        bodies = [
            services.filler_pod(
                f"training-{index:03d}",
                node,
                priority_class=services.PRIORITY_CLASS,
                gpus=fleet.REGISTERED_NODE_GPUS,
            )
            for index, node in enumerate(settings.registered_nodes)
        ]
        fillers = max(0, settings.pods - settings.max_services * settings.replicas - len(bodies))
        if fillers and not settings.filler_daemons:
            raise RigError(f"{fillers} filler pods wanted, but no filler daemon (filler_daemons=0)")
        room = sum(settings.pod_addresses(daemon) for daemon in settings.filler_daemon_indexes)
        if fillers > room:
            raise RigError(
                f"{fillers} filler pods wanted, but the {settings.filler_daemons} filler daemons' pod "
                f"networks hold {room} addresses: give more filler daemons"
            )
        bodies += [
            services.filler_pod(
                f"filler-{index:05d}", f"scale-{settings.tag}-filler-{index % settings.filler_daemons}"
            )
            for index in range(fillers)
        ]
        self.fillers = fillers
        path = f"/api/v1/namespaces/{namespace}/pods"
        await run_bounded(
            [functools.partial(services.create_ignoring_conflict, self.api, path, body) for body in bodies],
            CREATE_CONCURRENCY,
        )
        return len(bodies)

    # --- settling ---------------------------------------------------------------------------------

    def _offloads_path(self) -> str:
        return f"{services.API}/namespaces/{self.settings.namespace}/offloads"

    def _offloads_query(self) -> dict[str, str]:
        return {"labelSelector": f"{services.RUN_LABEL}={self.settings.tag}"}

    async def offloads(self) -> list[RawObject]:
        listing = await self.api.get(self._offloads_path(), query=self._offloads_query())
        items: list[RawObject] = listing.get("items") or []
        return items

    def offloads_followed(self, tracker: WaveTracker) -> Reflector:
        """The Offloads mirrored by a watch, each change handed to `tracker` as it comes (run it,
        cancel it when done). Polling them missed steps at N = 1,000: a list of a thousand Offloads
        took long enough for a 2 s step to pass between two polls (52 of 100 later steps seen)."""

        async def changed(uid: str) -> None:
            offload = reflector.objects.get(uid)
            if offload is not None:
                tracker.saw_offloads([offload], time.monotonic())

        reflector = Reflector(
            self.api,
            self._offloads_path(),
            query=self._offloads_query(),
            on_change=changed,
            description="the wave's offloads",
        )
        return reflector

    async def serving(self) -> bool:
        """Every service's Offload Idle and its route at the router with its home replicas usable."""
        offloads = await self.offloads()
        if len(offloads) < self.services:
            return False
        if any((item.get("status") or {}).get("phase") != "Idle" for item in offloads):
            return False
        routes = await self.router_routes()
        wanted = [services.service_name(index) for index in range(self.services)]
        return all(
            name in routes and routes[name]["endpoints"]["home"]["usable"] >= self.settings.replicas
            for name in wanted
        )

    async def fillers_running(self) -> bool:
        """Every filler pod Running, counted over pages of a LIST (with a selector the apiserver gives
        no remainingItemCount)."""
        if not self.fillers:
            return True
        running = 0
        query: dict[str, str | int | bool] = {
            "fieldSelector": "status.phase=Running",
            "labelSelector": f"{services.ROLE_LABEL}=filler",
            "limit": 500,
        }
        while True:
            listing = await self.api.get(f"/api/v1/namespaces/{self.settings.namespace}/pods", query=query)
            running += len(listing.get("items") or ())
            token = (listing.get("metadata") or {}).get("continue")
            if not token:
                return running >= self.fillers
            query = {**query, "continue": str(token)}

    async def settle(
        self, *, timeout_seconds: float, sample_seconds: float = 5.0, max_steady_wait: float = 90.0
    ) -> dict[str, Any]:
        """Wait until every service is served at home and every filler pod runs, then until the
        components' writes reach a steady rate: two samples of `sample_seconds` in a row each writing
        no faster than the one before (+ 0.2/s). Not "no writes": Lease renewals never stop. At most
        `max_steady_wait`; the result says whether the rate settled."""
        began = time.monotonic()
        await self._until(self.serving, f"{self.services} services served at home", timeout_seconds)
        served = time.monotonic() - began
        await self._until(self.fillers_running, f"{self.fillers} filler pods Running", timeout_seconds)
        previous = await attribution.scrape(self.api, time.monotonic())
        last_rate: float | None = None
        steady_in_a_row = 0
        steady_began = time.monotonic()
        while steady_in_a_row < 2 and time.monotonic() - steady_began < max_steady_wait:
            await asyncio.sleep(sample_seconds)  # a sampling interval of the counters (noqa: sleep-ok)
            self._check_alive()
            current = await attribution.scrape(self.api, time.monotonic())
            rate = sum(
                value
                for (_, verb), value in current.rates_since(previous).dispatched.items()
                if verb in ("create", "update", "patch", "delete")
            )
            steady = last_rate is not None and rate <= last_rate + 0.2
            steady_in_a_row = steady_in_a_row + 1 if steady else 0
            previous, last_rate = current, rate
        return {
            "served_seconds": served,
            "settled_seconds": time.monotonic() - began,
            "writes_steady": steady_in_a_row >= 2,
            "writes_per_second": last_rate,
        }

    # --- at rest ----------------------------------------------------------------------------------

    def usage(self) -> dict[str, fleet.Usage]:
        """Each component's summed process trees (node daemons together)."""
        totals: dict[str, fleet.Usage] = {}
        for process in self.processes:
            one = fleet.Usage.of(process.pid)
            before = totals.get(process.component, fleet.Usage(0, 0.0))
            totals[process.component] = fleet.Usage(
                before.rss_kib + one.rss_kib, before.cpu_seconds + one.cpu_seconds
            )
        return totals

    def daemon_count(self) -> int:
        return sum(1 for process in self.processes if process.component == "nodes")

    async def at_rest(self, seconds: float) -> tuple[attribution.Rates, dict[str, Any]]:
        """A window of `seconds` with nothing asked of the rig: each component's requests per second
        (APF's count), memory at the end and CPU over the window."""
        before, usage_before = await attribution.scrape(self.api, time.monotonic()), self.usage()
        await asyncio.sleep(seconds)  # the measuring window (noqa: sleep-ok)
        self._check_alive()
        after, usage_after = await attribution.scrape(self.api, time.monotonic()), self.usage()
        rates = after.rates_since(before)
        components: dict[str, Any] = {}
        for component in (*attribution.COMPONENTS, "backend"):
            if component not in usage_after:
                continue
            cpu = (usage_after[component].cpu_seconds - usage_before[component].cpu_seconds) / rates.seconds
            components[component] = {
                "requests_per_second": rates.component(component) if component != "backend" else None,
                "watches_started_per_second": rates.dispatched.get((component, "watch"), 0.0),
                "by_verb": rates.by_verb(component),
                "rss_kib": usage_after[component].rss_kib,
                "cpu_cores": cpu,
            }
        daemons = self.daemon_count()
        components["nodes"]["daemons"] = daemons
        components["nodes"]["requests_per_second_per_daemon"] = (
            components["nodes"]["requests_per_second"] / daemons
        )
        return rates, {"window_seconds": rates.seconds, "components": components}

    # --- a wave -----------------------------------------------------------------------------------

    async def wave(
        self,
        names: Sequence[str],
        *,
        rate: float,
        lead_seconds: float = 3.0,
        tail_seconds: float = 3.0,
        timeout_seconds: float = 600,
    ) -> dict[str, Any]:
        """Flip the named Offloads away at once (the patch `kubectl offload flip --to away` sends) under
        a load of `rate` requests/s spread evenly over their hosts; until each has Succeeded or failed."""
        settings = self.settings
        index_of = {services.service_name(index): index for index in range(self.services)}
        each = rate / len(names)
        generators = [
            LoadGenerator(
                LoadSettings(
                    url=self.router_url,
                    host_header=services.host_of(index_of[name], settings.domain),
                    rate=each,
                    stream_share=0.0,
                    stream_tokens=2,
                )
            )
            for name in names
        ]
        for generator in generators:
            await generator.start()
        outcomes: list[Outcome] = []
        try:
            await asyncio.sleep(lead_seconds)  # load before the flips, as measured (noqa: sleep-ok)
            queue_before = controllerqueue.QueueReading.parse(
                await self.controller_metrics(controllerqueue.READING_SERIES)
            )
            max_depth = 0
            depth_due = 0.0
            sent = time.monotonic()
            sent_wall = datetime.now(UTC)
            body = {
                "metadata": {"annotations": flip_annotations(sent_wall, None)},
                "spec": {"placement": "away"},
            }
            await asyncio.gather(
                *(
                    self.api.patch(
                        f"{services.API}/namespaces/{settings.namespace}/offloads/{name}",
                        body,
                        content_type=MERGE_PATCH,
                    )
                    for name in names
                )
            )
            patched = time.monotonic() - sent
            tracker = WaveTracker(set(names), sent, sent_wall)
            following = asyncio.create_task(self.offloads_followed(tracker).run())
            try:
                deadline = sent + timeout_seconds
                while not tracker.done():
                    if time.monotonic() > deadline:
                        raise RigError(
                            f"the wave did not end within {timeout_seconds:.0f} s: {tracker.pending()}"
                        )
                    self._check_alive()
                    now = time.monotonic()
                    with contextlib.suppress(aiohttp.ClientError, OSError, ValueError):
                        tracker.saw_routes(await self.router_routes(), now)
                    if now >= depth_due:
                        # Not every poll: with 1,000 Offloads the exposition is 19,000 series, and
                        # writing it four times a second took a quarter of the controller's CPU.
                        depth_due = now + DEPTH_SAMPLE_SECONDS
                        with contextlib.suppress(aiohttp.ClientError, OSError, ValueError):
                            max_depth = max(
                                max_depth,
                                controllerqueue.depth(
                                    await self.controller_metrics(controllerqueue.DEPTH_SERIES)
                                ),
                            )
                    await asyncio.sleep(POLL_SECONDS)  # sampling the router (noqa: sleep-ok)
            finally:
                following.cancel()
            queue = controllerqueue.between(
                queue_before,
                controllerqueue.QueueReading.parse(
                    await self.controller_metrics(controllerqueue.READING_SERIES)
                ),
                max_depth=max_depth,
            )
            await asyncio.sleep(
                tail_seconds
            )  # load after the last move, to count late failures (noqa: sleep-ok)
        finally:
            for generator in generators:
                await generator.stop()
                outcomes += generator.outcomes
        failed = failures(outcomes)
        kinds: dict[str, int] = {}
        for outcome in failed:
            kinds[str(outcome.failure)] = kinds.get(str(outcome.failure), 0) + 1
        return {
            "offloads": len(names),
            "rate": rate,
            "patches_seconds": patched,
            **tracker.report(),
            "requests": len(outcomes),
            "failed": len(failed),
            "failed_by_kind": kinds,
            "controller_queue": queue,
        }

    # --- the policy's decision --------------------------------------------------------------------

    async def decision(self, *, timeout_seconds: float = 120) -> dict[str, Any]:
        """Create a training Job of one GPU on the full pool; the time until the policy flips an
        Offload away (its spec.placement, seen by polling), and the Event's own time."""
        name = f"train-{uuid.uuid4().hex[:5]}"
        path = f"/apis/batch/v1/namespaces/{self.settings.namespace}/jobs"
        before = {
            item["metadata"]["name"]
            for item in await self.offloads()
            if (item.get("spec") or {}).get("placement") == "away"
        }
        created = time.monotonic()
        created_wall = datetime.now(UTC)
        await self.api.create(path, services.training_job(name, self.settings.pool_label))

        async def flipped() -> str | None:
            for item in await self.offloads():
                if (item.get("spec") or {}).get("placement") == "away" and item["metadata"][
                    "name"
                ] not in before:
                    return str(item["metadata"]["name"])
            return None

        try:
            offload = await self._until(flipped, "the policy's first flip", timeout_seconds)
            seen = time.monotonic() - created
            # The Event is posted a moment after the flip: a few seconds for it, then none is reported.
            event_seconds: float | None = None
            with contextlib.suppress(RigError):
                event_seconds = await self._until(
                    lambda: self._flip_event_seconds(offload, created_wall), "the FlipOutStarted Event", 10
                )
        finally:
            with contextlib.suppress(KubeApiError):
                await self.api.delete(f"{path}/{name}", {"propagationPolicy": "Background"})
        return {"offload": offload, "seconds_seen": seen, "seconds_by_event": event_seconds}

    async def _flip_event_seconds(self, offload: str, created_wall: datetime) -> float | None:
        """FlipOutStarted's time (the policy's clock, to the second or better) after the Job's creation."""
        listing = await self.api.get(
            f"/api/v1/namespaces/{self.settings.namespace}/events",
            query={"fieldSelector": f"reason=FlipOutStarted,involvedObject.name={offload}"},
        )
        stamps = []
        for event in listing.get("items") or ():
            text = (
                event.get("eventTime")
                or event.get("firstTimestamp")
                or (event.get("metadata") or {}).get("creationTimestamp")
            )
            stamp = parse_timestamp(str(text)) if text else None
            if stamp is not None:
                stamps.append(stamp)
        return (min(stamps) - created_wall).total_seconds() if stamps else None

    # --- closing ----------------------------------------------------------------------------------

    async def close(self) -> None:
        """Stop what the rig started (controller first), delete its policy, registered nodes and leases."""
        if self._keep_alive is not None:
            self._keep_alive.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keep_alive
        for process in reversed(self.processes):
            process.stop()
        with contextlib.suppress(KubeApiError):
            await self.api.delete(
                f"/apis/offload.vk-provider.dev/v1alpha1/offloadpolicies/{self.settings.policy_name}"
            )
        for name in self.settings.registered_nodes:
            with contextlib.suppress(KubeApiError):
                await self.api.delete(f"/api/v1/nodes/{name}")
        if self._session is not None:
            await self._session.close()


class WaveTracker:
    """What a wave's polls saw: each Offload's weights at the router and its status over time."""

    def __init__(self, names: set[str], sent: float, sent_wall: datetime) -> None:
        self.names = names
        self.sent = sent
        self.sent_wall = sent_wall
        self.router_seen: dict[str, dict[int, float]] = {name: {} for name in names}
        """name -> away weight -> when the router first showed it (s after the flips were sent)."""
        self.step_started: dict[str, dict[int, float]] = {name: {} for name in names}
        """name -> away weight -> status.stepStartedAt (s after the flips were sent) while at it."""
        self.status_seen: dict[str, dict[int, float]] = {name: {} for name in names}
        """name -> away weight -> when the status first showed it (s after the flips were sent)."""
        self.ended: dict[str, tuple[str, float]] = {}
        self.interval = float(services.STRATEGY["stepIntervalSeconds"])

    def saw_routes(self, routes: dict[str, dict[str, Any]], now: float) -> None:
        for name in self.names:
            route = routes.get(name)
            if route is not None:
                self.router_seen[name].setdefault(int(route["away_weight"]), now - self.sent)

    def saw_offloads(self, offloads: list[RawObject], now: float) -> None:
        for item in offloads:
            name = item["metadata"]["name"]
            if name not in self.names:
                continue
            status = item.get("status") or {}
            if status.get("targetPlacement") != "away":
                continue
            weight, started = status.get("awayWeight"), status.get("stepStartedAt")
            if isinstance(weight, int):
                self.status_seen[name].setdefault(weight, now - self.sent)
            stamp = parse_timestamp(str(started)) if started else None
            if isinstance(weight, int) and stamp is not None:
                self.step_started[name].setdefault(weight, (stamp - self.sent_wall).total_seconds())
            phase = status.get("phase")
            if phase in ("Succeeded", "RolledBack", "Failed") and name not in self.ended:
                self.ended[name] = (str(phase), now - self.sent)

    def done(self) -> bool:
        return len(self.ended) == len(self.names)

    def pending(self) -> list[str]:
        return sorted(self.names - set(self.ended))

    def step_latencies(self) -> tuple[list[float], list[float]]:
        """(first steps, later steps), seconds: a first step from the flips being sent to the router
        showing its weight (the away side's start included); a later step from when it was due (the
        previous weight's stepStartedAt + the step interval) to the router showing it."""
        steps = [int(weight) for weight in services.STRATEGY["toAwaySteps"]]
        first, later = [], []
        for name in self.names:
            seen = self.router_seen[name]
            if steps[0] in seen:
                first.append(seen[steps[0]])
            for previous, weight in itertools.pairwise(steps):
                started = self.step_started[name].get(previous)
                if weight in seen and started is not None:
                    later.append(max(0.0, seen[weight] - (started + self.interval)))
        return first, later

    def later_step_parts(self) -> tuple[list[float], list[float]]:
        """A later step split in two, seconds: the controller's part, from when the step was due to
        the status showing its weight (stepStartedAt has whole seconds: up to 1 s too long), and the
        routers' part, from the status showing the weight to the router showing it (both seen by
        the same polls, so their 0.25 s steps fall on both ends alike)."""
        steps = [int(weight) for weight in services.STRATEGY["toAwaySteps"]]
        controller, routers = [], []
        for name in self.names:
            status, seen = self.status_seen[name], self.router_seen[name]
            for previous, weight in itertools.pairwise(steps):
                started = self.step_started[name].get(previous)
                if weight in status and started is not None:
                    controller.append(max(0.0, status[weight] - (started + self.interval)))
                if weight in status and weight in seen:
                    routers.append(max(0.0, seen[weight] - status[weight]))
        return controller, routers

    def report(self) -> dict[str, Any]:
        first, later = self.step_latencies()
        controller_part, router_part = self.later_step_parts()
        ends = [seconds for _, seconds in self.ended.values()]
        outcomes: dict[str, int] = {}
        for phase, _ in self.ended.values():
            outcomes[phase] = outcomes.get(phase, 0) + 1
        return {
            "wave_seconds": max(ends) if ends else None,
            "offload_seconds_p50": _quantile(ends, 0.5),
            "outcomes": outcomes,
            "first_step_seconds": _summary(first),
            "later_step_seconds": _summary(later),
            "later_step_controller_seconds": _summary(controller_part),
            "later_step_router_seconds": _summary(router_part),
        }


def _quantile(values: Sequence[float], fraction: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def _summary(values: Sequence[float]) -> dict[str, Any]:
    return {
        "count": len(values),
        "p50": _quantile(values, 0.5),
        "p99": _quantile(values, 0.99),
        "max": max(values) if values else None,
        "mean": statistics.fmean(values) if values else None,
    }
