"""`kubectl offload uninstall`: leave nothing of the offloading behind, before the install is removed.

In order, within one `--timeout`:

1. every Offload (of every namespace, or of `-n`) is brought home by its strategy, all at once: the
   same patch as `kubectl offload flip NAME --to home` (see `homing`), and the controller migrates;
2. the Offloads are deleted, and the command waits until the controller has let each go: it keeps
   the route on the home Service, scales the away Deployment to 0, waits for its pods, deletes it and
   removes its finalizer (`vk_provider.controller.deletion`); the away Deployments have no
   ownerReference, on purpose, so nothing else would ever delete them;
3. it waits until no pod is bound to a virtual node any more: each is a workload at a provider,
   deleted there by the node daemon once its pod goes.

It needs the controller (and the nodes) running, so it runs before they are removed (the chart runs
it as a pre-delete hook). Without a controller nothing comes home: the command says so and stops,
rather than strip finalizers behind the user's back; `--force` does that on request, loudly, and
deletes the away Deployments so the nodes still delete the workloads at the provider. It never
removes the controller itself.

Every read is retried with backoff on a transient error; on timeout (or any other failure) it
exits 1 and lists what is left, one line each.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import TypeVar

import aiohttp

from vk_provider.kit.backoff import jittered_backoff_seconds
from vk_provider.kit.kube import MERGE_PATCH, KubeApi, KubeApiError, RawObject, resource_path
from vk_provider.offload.names import FINALIZER, OFFLOAD_LABEL, offload_path, offloads_path
from vk_provider.offload.spec import DEFAULT_STEP_INTERVAL_SECONDS
from vk_provider.offloadcli import controllerlease, holds, homing, leftovers, rendering
from vk_provider.offloadcli.commands import (
    CONFLICT_RETRIES,
    EXIT_FAILED,
    EXIT_OK,
    CommandError,
    checked_patch,
    complain,
    emit,
    not_found,
)
from vk_provider.offloadcli.dryrun import SERVER, DryRunApi

POLL_SECONDS = 1.0
RETRY_INITIAL_SECONDS = 0.5
RETRY_MAX_SECONDS = 10.0
REPORT_SECONDS = 30.0
"""How long the list of what is left may take to read once the time is up."""

T = TypeVar("T")


def warn(text: str) -> None:
    """To stderr as it is: a warning, not an error (the command goes on)."""
    print(text, file=sys.stderr, flush=True)


@dataclasses.dataclass(frozen=True)
class Settings:
    scope: str | None
    """The namespace of `-n`, or None for every namespace."""
    timeout_seconds: int
    lease: tuple[str, str]
    virtual_nodes: str
    force: bool
    dry_run: str | None
    """None, or the --dry-run mode: client or server (see `dryrun`)."""

    @property
    def where(self) -> str:
        return "every namespace" if self.scope is None else f'namespace "{self.scope}"'


def settings_of(arguments: argparse.Namespace) -> Settings:
    return Settings(
        scope=arguments.namespace,  # the raw -n: without it, every namespace (not the context's)
        timeout_seconds=arguments.timeout,
        lease=arguments.controller_lease,
        virtual_nodes=arguments.virtual_nodes,
        force=arguments.force,
        dry_run=arguments.dry_run,
    )


def _transient(error: BaseException) -> bool:
    if isinstance(error, KubeApiError):
        return error.status >= 500 or error.status == 429
    return isinstance(error, aiohttp.ClientError | OSError | TimeoutError)


class Cluster:
    """What the command reads, each read retried with backoff while the apiserver answers transiently
    (the caller's timeout bounds the retrying).

    Until the apiserver has answered once, a request that cannot reach it is not retried: a kubeconfig
    pointing at the wrong place (refused, a name that does not resolve, a certificate not trusted)
    would otherwise be retried for the whole --timeout, ten minutes by default, saying only "trying
    again". Once it has answered, a connection lost is an apiserver restarting, and is waited out."""

    def __init__(self, api: KubeApi, settings: Settings) -> None:
        self.api = api
        self.settings = settings
        self.answered = False

    async def _read(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        failures = 0
        while True:
            try:
                result = await call()
            except (KubeApiError, aiohttp.ClientError, OSError, TimeoutError) as error:
                self.answered = self.answered or isinstance(error, KubeApiError)
                if not self.answered or not _transient(error):
                    raise
                failures += 1
                delay = jittered_backoff_seconds(
                    failures, initial_seconds=RETRY_INITIAL_SECONDS, max_seconds=RETRY_MAX_SECONDS
                )
                warn(f"warning: reading {what} failed ({error}); trying again in {delay:.1f}s")
                await asyncio.sleep(delay)
            else:
                self.answered = True
                return result

    async def offloads(self) -> list[RawObject]:
        async def listed() -> list[RawObject]:
            try:
                listing = await self.api.get(offloads_path(self.settings.scope))
            except KubeApiError as error:
                if error.not_found:  # the CRD is not installed: there is no Offload
                    return []
                raise
            return list(listing.get("items") or [])

        return await self._read("the Offloads", listed)

    async def provider_pods(self) -> list[RawObject]:
        """The pods bound to a virtual node (in the scope), DaemonSets' aside (see `leftovers`)."""

        async def listed() -> list[RawObject]:
            nodes = await self.api.get(
                resource_path("v1", "nodes"), query={"labelSelector": self.settings.virtual_nodes}
            )
            names = leftovers.node_names(nodes)
            if not names:
                return []
            pods = await self.api.get(resource_path("v1", "pods", namespace=self.settings.scope))
            return leftovers.provider_pods(pods.get("items") or [], names)

        return await self._read("the pods on virtual nodes", listed)

    async def controller(self) -> controllerlease.Presence:
        namespace, name = self.settings.lease
        return await self._read(
            "the controller's Lease",
            lambda: controllerlease.presence(self.api, namespace, name, datetime.now(UTC)),
        )


async def run_uninstall(api: KubeApi, arguments: argparse.Namespace, _namespace: str) -> int:
    settings = settings_of(arguments)
    cluster = Cluster(api, settings)
    if not settings.dry_run:
        emit(f"uninstall: {settings.where}, within {holds.span(settings.timeout_seconds)}")
    try:
        async with asyncio.timeout(settings.timeout_seconds):
            return await (dry_run(cluster) if settings.dry_run else _uninstall(cluster))
    except TimeoutError:
        why = f"uninstall did not finish within {holds.span(settings.timeout_seconds)}"
    if settings.dry_run:
        raise CommandError(EXIT_FAILED, f"uninstall --dry-run: {why}")
    raise CommandError(EXIT_FAILED, await left_report(cluster, why))


async def left_report(cluster: Cluster, why: str) -> str:
    """`why`, and what is left: a fresh read, itself bounded (the apiserver may be the problem)."""
    try:
        async with asyncio.timeout(REPORT_SECONDS):
            offloads, pods = await cluster.offloads(), await cluster.provider_pods()
    except TimeoutError:
        return f"{why}; what is left could not be read within {REPORT_SECONDS:.0f}s"
    if not offloads and not pods:
        return f"{why}, though nothing is left now; run it again to confirm"
    return "\n".join([f"{why}; left:", *leftovers.listing_lines(offloads, pods)])


async def _uninstall(cluster: Cluster) -> int:
    offloads = await cluster.offloads()
    presence = await cluster.controller()
    emit(f"uninstall: {len(offloads)} Offloads; {presence.text}")
    needing = [offload for offload in offloads if leftovers.needs_controller(offload)]
    if presence.running is False and needing:
        if not cluster.settings.force:
            raise CommandError(EXIT_FAILED, controller_absent(presence, needing))
        await force_release(cluster, offloads, presence)
    else:
        if presence.running is None:
            warn(
                f"warning: cannot tell whether the controller runs ({presence.text}); if it does not, "
                "nothing comes home and this waits until --timeout"
            )
        stuck = await bring_home(cluster, [item for item in offloads if not homing.is_deleting(item)])
        going = [item for item in offloads if homing.key_of(item) not in stuck]
        await delete_and_wait(cluster, going)
        if stuck:
            lines = [f"  Offload {key}: {why}" for key, why in sorted(stuck.items())]
            raise CommandError(
                EXIT_FAILED,
                "\n".join(["these Offloads did not come home, so they were not deleted:", *lines]),
            )
    await wait_for_pods(cluster)
    again = await cluster.offloads()
    if again:
        raise CommandError(
            EXIT_FAILED,
            "\n".join(
                [
                    "new Offloads appeared while uninstalling (does a GitOps tool recreate them?):",
                    *leftovers.listing_lines(again, []),
                ]
            ),
        )
    emit(
        f"uninstall: done in {cluster.settings.where}: no Offload left, no pod on a virtual node; "
        "the controller, routers and nodes can be removed now"
    )
    return EXIT_OK


def controller_absent(presence: controllerlease.Presence, needing: Sequence[RawObject]) -> str:
    return "\n".join(
        [
            f"the migration controller must run to bring Offloads home, and it does not: {presence.text}.",
            "Start it again (uninstall before removing it), or name its Lease with --controller-lease "
            "NAMESPACE/NAME if it runs under another; --force removes the finalizers without bringing "
            "anything home. These Offloads wait for it:",
            *leftovers.listing_lines(needing, []),
        ]
    )


async def _require_controller(cluster: Cluster, waiting: Sequence[RawObject], doing: str) -> None:
    presence = await cluster.controller()
    if presence.running is False:
        raise CommandError(
            EXIT_FAILED,
            "\n".join(
                [
                    f"the controller stopped while {doing} ({presence.text}); left:",
                    *leftovers.listing_lines(waiting, []),
                ]
            ),
        )


async def _send_home(cluster: Cluster, offload: RawObject, now: datetime, stamp: str) -> homing.Sent | None:
    """Patch one Offload home; None when it was deleted meanwhile."""
    metadata = offload["metadata"]
    try:
        patched = await checked_patch(
            cluster.api,
            metadata["namespace"],
            metadata["name"],
            lambda current: homing.home_patch(current, now, stamp),
        )
    except CommandError as error:
        if error.message == not_found(metadata["namespace"], metadata["name"]).message:
            return None
        raise
    return homing.sent_from(patched, stamp)


def _progress(offload: RawObject) -> str:
    name = offload["metadata"]["name"]
    return rendering.progress_line(offload).replace(
        f"offload {name}:", f"offload {homing.key_of(offload)}:", 1
    )


async def bring_home(cluster: Cluster, offloads: Sequence[RawObject]) -> dict[str, str]:
    """Send every Offload not yet home home at once, and wait until each is; returns the ones that will
    not get there alone, with why."""
    away = [offload for offload in offloads if not homing.is_home(offload)]
    if not away:
        emit("uninstall: every Offload is home already")
        return {}
    emit(f"uninstall: bringing {len(away)} Offloads home by their strategies")
    now = datetime.now(UTC)
    stamp = now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    sent = await asyncio.gather(*(_send_home(cluster, offload, now, stamp) for offload in away))
    pending = {homing.key_of(offload): done for offload, done in zip(away, sent, strict=True) if done}
    shown: dict[str, str] = {}
    stuck: dict[str, str] = {}
    while pending:
        current = {homing.key_of(item): item for item in await cluster.offloads()}
        for key, what in list(pending.items()):
            offload = current.get(key)
            if offload is None:
                del pending[key]
                emit(f"offload {key}: deleted meanwhile")
                continue
            if (line := _progress(offload)) != shown.get(key):
                emit(line)
                shown[key] = line
            result = homing.outcome(offload, what)
            if result is None:
                continue
            del pending[key]
            if result:
                stuck[key] = result
                complain(f"offload {key} did not come home: {result}")
            else:
                emit(f"offload {key}: home")
        if pending:
            waiting = [current[key] for key in pending if key in current]
            await _require_controller(cluster, waiting, "Offloads were on their way home")
            await asyncio.sleep(POLL_SECONDS)
    return stuck


async def _delete(cluster: Cluster, offload: RawObject) -> None:
    metadata = offload["metadata"]
    try:
        await cluster.api.delete(offload_path(metadata["namespace"], metadata["name"]))
    except KubeApiError as error:
        if not error.not_found:
            raise


async def delete_and_wait(
    cluster: Cluster, offloads: Sequence[RawObject], *, controller: bool = True
) -> None:
    """Delete the Offloads and wait until they are gone (the controller lets each go once nothing is
    left away); `controller=False` when no controller holds them any more (after --force)."""
    if not offloads:
        return
    await asyncio.gather(*(_delete(cluster, offload) for offload in offloads))
    keys = {homing.key_of(offload) for offload in offloads}
    emit(f"uninstall: deleted {len(keys)} Offloads; waiting until each is let go")
    shown: dict[str, str] = {}
    gone: set[str] = set()
    while True:
        left = [item for item in await cluster.offloads() if homing.key_of(item) in keys]
        for key in sorted(keys - gone - {homing.key_of(item) for item in left}):
            emit(f"offload {key}: gone")
            gone.add(key)
        if not left:
            return
        for offload in left:
            key = homing.key_of(offload)
            if (line := leftovers.describe_offload(offload)) != shown.get(key):
                emit(line)
                shown[key] = line
        if controller:
            await _require_controller(cluster, left, "deleted Offloads were being let go")
        await asyncio.sleep(POLL_SECONDS)


async def wait_for_pods(cluster: Cluster) -> None:
    """Wait until no pod in the scope is bound to a virtual node, saying what is left when it changes."""
    shown: list[str] = []
    while pods := await cluster.provider_pods():
        lines = sorted(leftovers.describe_pod(pod) for pod in pods)
        if lines != shown:
            emit(
                f"uninstall: {len(pods)} pods still on virtual nodes "
                "(their provider workloads are being deleted):"
            )
            for line in lines:
                emit(f"  {line}")
            shown = lines
        await asyncio.sleep(POLL_SECONDS)
    emit(
        f"uninstall: no pod on a virtual node ({cluster.settings.virtual_nodes}) in {cluster.settings.where}"
    )


async def _strip_finalizer(cluster: Cluster, offload: RawObject) -> None:
    metadata = offload["metadata"]
    path = offload_path(metadata["namespace"], metadata["name"])
    for _ in range(CONFLICT_RETRIES):
        try:
            current = await cluster.api.get(path)
        except KubeApiError as error:
            if error.not_found:
                return
            raise
        finalizers = current["metadata"].get("finalizers") or []
        if FINALIZER not in finalizers:
            return
        kept = [item for item in finalizers if item != FINALIZER]
        patch = {
            "metadata": {
                "finalizers": kept or None,
                "resourceVersion": current["metadata"]["resourceVersion"],
            }
        }
        try:
            await cluster.api.patch(path, patch, content_type=MERGE_PATCH)
            return
        except KubeApiError as error:
            if error.not_found:
                return
            if not error.conflict:
                raise
    raise CommandError(
        EXIT_FAILED, f"offload {homing.key_of(offload)} kept changing while its finalizer was removed"
    )


async def _delete_away_deployments(cluster: Cluster, offload: RawObject) -> list[str]:
    """Delete the Offload's away Deployments (found by the label the controller puts on them); the
    names deleted. The home Deployment never carries that label, and is skipped even if it did."""
    metadata = offload["metadata"]
    namespace, name = metadata["namespace"], metadata["name"]
    home = (rendering.spec_of(offload).get("home") or {}).get("deployment")
    collection = resource_path("apps/v1", "deployments", namespace=namespace)
    listing = await cluster.api.get(collection, query={"labelSelector": f"{OFFLOAD_LABEL}={name}"})
    deleted = []
    for deployment in listing.get("items") or []:
        away = deployment["metadata"]["name"]
        if away == home:
            continue
        try:
            await cluster.api.delete(f"{collection}/{away}")
        except KubeApiError as error:
            if not error.not_found:
                raise
        deleted.append(f"{namespace}/{away}")
    return deleted


async def force_release(
    cluster: Cluster, offloads: Sequence[RawObject], presence: controllerlease.Presence
) -> None:
    """--force without a controller: delete the Offloads, remove the controller's finalizer and the away
    Deployments; nothing is brought home, and the warning says what that costs."""
    warn(
        f"WARNING: --force: the controller does not run ({presence.text}). Removing the finalizer "
        f"{FINALIZER} from {len(offloads)} Offloads WITHOUT bringing them home: traffic still served away "
        "stops being routed once they are gone, and a home Deployment the controller scaled to 0 stays at "
        "0 until you scale it back. Their away Deployments are deleted, so that the nodes delete the "
        "workloads at the provider."
    )
    for offload in offloads:
        warn(f"WARNING: forcing {leftovers.describe_offload(offload)}")
    await asyncio.gather(*(_delete(cluster, offload) for offload in offloads))
    await asyncio.gather(*(_strip_finalizer(cluster, offload) for offload in offloads))
    removed = await asyncio.gather(*(_delete_away_deployments(cluster, offload) for offload in offloads))
    for name in (name for names in removed for name in names):
        warn(f"WARNING: deleted away Deployment {name}")
    await delete_and_wait(cluster, offloads, controller=False)


async def dry_run(cluster: Cluster) -> int:
    """Say what the command would do, and change nothing."""
    settings = cluster.settings
    offloads = await cluster.offloads()
    presence = await cluster.controller()
    pods = await cluster.provider_pods()
    emit(f"uninstall --dry-run: {settings.where}; {presence.text}")
    needing = [offload for offload in offloads if leftovers.needs_controller(offload)]
    if presence.running is False and needing and not settings.force:
        emit("would stop: " + controller_absent(presence, needing))
        return EXIT_OK
    forced = presence.running is False and bool(needing)
    for offload in offloads:
        if forced:
            plan = "remove the finalizer WITHOUT bringing it home (--force), delete its away Deployments"
        elif homing.is_deleting(offload):
            plan = "already deleted: wait until the controller lets it go"
        elif homing.is_home(offload):
            plan = "home already: delete it, wait until the controller lets it go"
        else:
            steps = ",".join(str(step) for step in rendering.steps_toward(offload, homing.HOME))
            strategy = rendering.strategy_of(offload)
            interval = strategy.get("stepIntervalSeconds") or DEFAULT_STEP_INTERVAL_SECONDS
            plan = (
                f"bring home (steps {steps}, {interval}s each), "
                "then delete it and wait until the controller lets it go"
            )
        emit(f"  {leftovers.describe_offload(offload)}\n    would: {plan}")
    if not offloads:
        emit("  no Offload")
    emit(f"then wait until no pod is on a virtual node ({settings.virtual_nodes}); now {len(pods)}:")
    for pod in pods:
        emit(f"  {leftovers.describe_pod(pod)}")
    if settings.dry_run == SERVER and not forced:
        await check_on_server(cluster, offloads)
    emit(f"within {holds.span(settings.timeout_seconds)}; nothing was changed (--dry-run={settings.dry_run})")
    return EXIT_OK


async def check_on_server(cluster: Cluster, offloads: Sequence[RawObject]) -> None:
    """--dry-run=server: the patch home of each Offload not home yet and the deletion of each, as the real
    run sends them, through the dry-run connection (`dryrun.DryRunApi`): the apiserver checks each and
    stores nothing; a refusal ends the command with the apiserver's reason."""
    if not isinstance(cluster.api, DryRunApi):  # these writes must never be real, whoever called
        cluster = Cluster(DryRunApi(cluster.api, SERVER, emit), cluster.settings)
    now = datetime.now(UTC)
    stamp = now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    waiting = [offload for offload in offloads if not homing.is_deleting(offload)]
    for offload in waiting:
        if not homing.is_home(offload):
            await _send_home(cluster, offload, now, stamp)
        await _delete(cluster, offload)
