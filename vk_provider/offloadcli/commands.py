"""What each migration command does against the apiserver, and the exit code it ends with.

The CLI only writes the Offload's spec (placement, strategy, paused) and annotations (promote, retry,
and for the OffloadPolicies the hold of a person's flip or abort, and `auto`); the controller does the
migrating and reports in status. Checks that depend on the cluster (is a migration running, and toward
where) are made on a fresh read, and the write carries that read's resourceVersion so a concurrent
change is noticed instead of overwritten; on such a conflict the command re-reads and checks again.

Exit codes: 0 done; 1 the migration failed or rolled back (with --wait), the Offload is not Ready (with
--wait: nothing would move), or the apiserver said no; 2 usage or validation error; 130 interrupted.
Messages go to stderr with the reason and, where there is one, the command that moves on.

A flip toward the side the last migration tried to reach and did not (it rolled back or failed) asks the
controller to run it again (the retry annotation), and `--wait` follows that new attempt, never the
ending of the old one.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from vk_provider.kit.kube import MERGE_PATCH, KubeApi, KubeApiError, RawObject, resource_path
from vk_provider.offload.names import (
    FLIP_STRATEGY_ANNOTATION,
    KIND,
    PROMOTE_ANNOTATION,
    RETRY_ANNOTATION,
    offload_path,
    offloads_path,
)
from vk_provider.offload.oneoff import one_off_value
from vk_provider.offload.status import Phase
from vk_provider.offloadcli import dryrun, holds, outputs, rendering
from vk_provider.policy.names import HOLD_UNTIL_ANNOTATION

WATCH_SECONDS = 60
REFRESH_SECONDS = 2.0
"""`status --watch` redraws at least this often, so new Events and ages show between changes."""
CONFLICT_RETRIES = 5
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
CLEAR_SCREEN = "\x1b[H\x1b[2J"


class CommandError(Exception):
    """Ends a command with an exit code and a message for stderr."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def not_found(namespace: str, name: str) -> CommandError:
    return CommandError(EXIT_FAILED, f'offload "{name}" not found in namespace "{namespace}"')


def opposite(placement: str) -> str:
    return "home" if placement == "away" else "away"


async def get_offload(api: KubeApi, namespace: str, name: str) -> RawObject:
    try:
        return await api.get(offload_path(namespace, name))
    except KubeApiError as error:
        if error.not_found:
            raise not_found(namespace, name) from None
        raise


async def patch_offload(api: KubeApi, namespace: str, name: str, body: Mapping[str, Any]) -> RawObject:
    try:
        return await api.patch(offload_path(namespace, name), body, content_type=MERGE_PATCH)
    except KubeApiError as error:
        if error.not_found:
            raise not_found(namespace, name) from None
        raise


Check = Callable[[RawObject], Mapping[str, Any]]


async def checked_patch(api: KubeApi, namespace: str, name: str, build: Check) -> RawObject:
    """Read, let `build` check the object and return a patch (or raise), write it if nothing changed since."""
    for _ in range(CONFLICT_RETRIES):
        current = await get_offload(api, namespace, name)
        patch = dict(build(current))
        metadata = dict(patch.get("metadata") or {})
        metadata["resourceVersion"] = current["metadata"]["resourceVersion"]
        patch["metadata"] = metadata
        try:
            return await patch_offload(api, namespace, name, patch)
        except KubeApiError as error:
            if not error.conflict:
                raise
    raise CommandError(EXIT_FAILED, f'offload "{name}" kept changing while being updated; try again')


async def follow_object(
    api: KubeApi,
    collection: str,
    first: RawObject,
    reread: Callable[[], Awaitable[RawObject]],
    deleted: str,
) -> AsyncGenerator[RawObject, None]:
    """Each new version of the object `first` in `collection`, for as long as the caller iterates.

    The watch is resumed from the last version seen; when that version is gone (410), the object is
    read again with `reread`. Its deletion ends the iteration with CommandError(1, `deleted`).
    """
    resource_version = first["metadata"]["resourceVersion"]
    query = {"fieldSelector": f"metadata.name={first['metadata']['name']}"}
    while True:
        try:
            async for event in api.watch(
                collection,
                query={**query, "resourceVersion": resource_version},
                timeout_seconds=WATCH_SECONDS,
            ):
                resource_version = event.object.get("metadata", {}).get("resourceVersion", resource_version)
                if event.type == "DELETED":
                    raise CommandError(EXIT_FAILED, deleted)
                if event.type in ("ADDED", "MODIFIED"):
                    yield event.object
        except KubeApiError as error:
            if not error.gone:
                raise
            latest = await reread()
            resource_version = latest["metadata"]["resourceVersion"]
            yield latest


def follow(api: KubeApi, namespace: str, name: str, first: RawObject) -> AsyncGenerator[RawObject, None]:
    """Each new version of the Offload after `first`, for as long as the caller iterates."""
    return follow_object(
        api,
        offloads_path(namespace),
        first,
        lambda: get_offload(api, namespace, name),
        f'offload "{name}" was deleted',
    )


Sleep = Callable[[float], Awaitable[None]]


async def _next(changes: AsyncIterator[RawObject]) -> RawObject | None:
    """The next item, or None once there are no more."""
    try:
        return await anext(changes)
    except StopAsyncIteration:
        return None


async def _settle(task: asyncio.Future[Any]) -> None:
    """Cancel the task and wait until it has ended, without raising what it ended with."""
    task.cancel()
    await asyncio.wait({task})
    if not task.cancelled():
        task.exception()  # retrieved, so asyncio does not log it as never retrieved


async def refreshes(
    changes: AsyncIterator[RawObject],
    current: RawObject,
    interval: float,
    *,
    sleep: Sleep = asyncio.sleep,
) -> AsyncGenerator[tuple[RawObject, bool], None]:
    """`(the latest Offload, whether it changed)` on each change and whenever `interval` seconds pass.

    The next change and a timer race; the timer counts from the previous answer, so a caller that
    redraws on each answer redraws at least every `interval` seconds. Ends when `changes` ends, and
    closes `changes` when it is closed itself.
    """
    loop = asyncio.get_running_loop()
    change: asyncio.Task[RawObject | None] | None = None
    deadline = loop.time() + interval
    try:
        while True:
            if change is None:
                change = asyncio.create_task(_next(changes))
            # Never less than a quarter interval, so a slow caller does not redraw back to back.
            tick = asyncio.ensure_future(sleep(max(interval / 4, deadline - loop.time())))
            try:
                await asyncio.wait({change, tick}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                await _settle(tick)
            changed = change.done()
            if changed:
                finished, change = change, None
                latest = finished.result()  # raises what stopped the changes, e.g. the Offload was deleted
                if latest is None:
                    return
                current = latest
            deadline = loop.time() + interval
            yield current, changed
    finally:
        if change is not None:
            await _settle(change)
        if isinstance(changes, AsyncGenerator):
            await changes.aclose()


def events_path(namespace: str) -> str:
    return resource_path("v1", "events", namespace=namespace)


async def list_events(api: KubeApi, namespace: str, name: str, kind: str = KIND) -> rendering.EventList:
    """The Events in `namespace` about the `kind` (an Offload by default) `name`; a refusal becomes a note
    on the page, not a failure."""
    query = {"fieldSelector": f"involvedObject.kind={kind},involvedObject.name={name}"}
    try:
        listed = await api.get(events_path(namespace), query=query)
    except KubeApiError as error:
        if error.status == 403:
            return rendering.EventList(
                note=f'not shown: listing events in namespace "{namespace}" is forbidden (403)'
            )
        return rendering.EventList(
            note=f"not shown: listing events failed: {error.status} {error.reason}: {error.message}"
        )
    return rendering.EventList(items=list(listed.get("items") or []))


def emit(text: str) -> None:
    print(text, flush=True)


def complain(text: str) -> None:
    print(f"error: {text}", file=sys.stderr, flush=True)


async def run_list(api: KubeApi, arguments: argparse.Namespace, namespace: str) -> int:
    scope = None if arguments.all_namespaces else namespace
    try:
        listed = await api.get(offloads_path(scope))
    except KubeApiError as error:
        if error.not_found:
            raise CommandError(
                EXIT_FAILED, "the Offload resource is not installed (apply manifests/crds/offload.yaml)"
            ) from None
        raise
    if listed.get("items") or arguments.output in outputs.DOCUMENTS:
        emit(outputs.render_listing(listed, arguments.output, offload_kind(all_namespaces=scope is None)))
    else:
        where = "any namespace" if scope is None else f'namespace "{scope}"'
        print(f"No offloads found in {where}.", file=sys.stderr)
    return EXIT_OK


def offload_kind(*, all_namespaces: bool = False) -> outputs.Kind:
    return outputs.Kind(
        KIND, lambda items, wide: rendering.render_list(items, all_namespaces=all_namespaces, wide=wide)
    )


def _shown_events(shown_about: RawObject, events: rendering.EventList) -> tuple[Any, ...]:
    """What the page shows of the Events, ages aside: a redraw for a timer tick is news only if it differs."""
    return (
        events.note,
        *(
            ((event.get("metadata") or {}).get("uid"), (event.get("metadata") or {}).get("resourceVersion"))
            for event in rendering.recent_events(events.items, shown_about)
        ),
    )


EventsOf = Callable[[], Awaitable[rendering.EventList]]
Page = Callable[[RawObject, rendering.EventList], str]


async def show_and_watch(
    first: RawObject,
    changes: Callable[[], AsyncGenerator[RawObject, None]],
    events_of: EventsOf,
    page: Page,
    arguments: argparse.Namespace,
    *,
    kind: outputs.Kind,
    sleep: Sleep,
    interactive: bool | None,
) -> int:
    """Show `first` (as `page` with its Events, or in the `-o` form); with --watch, again on each change
    until interrupted (or the object is deleted), as `kubectl get --watch` does.

    In an `-o` form (see `outputs`) the object is printed once per change. The page also redraws every
    REFRESH_SECONDS for new Events and ages; when stdout is not a terminal, such a redraw is printed
    only if the Events shown changed, so a log of the output holds news rather than a page per tick.
    """
    if arguments.output:
        emit(outputs.render_one(first, arguments.output, kind, repeat=False))
        if arguments.watch:
            async with contextlib.aclosing(changes()) as versions:
                async for version in versions:
                    emit(outputs.render_one(version, arguments.output, kind, repeat=True))
        return EXIT_OK
    events = await events_of()
    emit(page(first, events))
    if not arguments.watch:
        return EXIT_OK
    interactive = sys.stdout.isatty() if interactive is None else interactive
    shown = _shown_events(first, events)
    async with contextlib.aclosing(refreshes(changes(), first, REFRESH_SECONDS, sleep=sleep)) as pages:
        async for latest, changed in pages:
            events = await events_of()
            news = _shown_events(latest, events)
            if changed or interactive or news != shown:
                emit(CLEAR_SCREEN if interactive else "")
                emit(page(latest, events))
                shown = news
    return EXIT_OK


async def run_status(
    api: KubeApi,
    arguments: argparse.Namespace,
    namespace: str,
    *,
    sleep: Sleep = asyncio.sleep,
    interactive: bool | None = None,
) -> int:
    """Show the Offload with its Events; with --watch, again on each change until interrupted, whether a
    migration runs or not (see `show_and_watch`)."""
    name = arguments.name
    offload = await get_offload(api, namespace, name)
    return await show_and_watch(
        offload,
        lambda: follow(api, namespace, name, offload),
        lambda: list_events(api, namespace, name),
        rendering.render_status,
        arguments,
        kind=offload_kind(),
        sleep=sleep,
        interactive=interactive,
    )


def is_retry(current: RawObject, placement: str) -> bool:
    """Whether a flip to `placement` asks again for a migration that ended there badly: the spec already
    says `placement`, so only the retry annotation can start a new attempt."""
    status = rendering.status_of(current)
    return (
        status.phase in (Phase.ROLLED_BACK, Phase.FAILED)
        and rendering.direction_placement(current) == placement
        and rendering.spec_of(current).get("placement") == placement
    )


def flip_patch(
    current: RawObject,
    arguments: argparse.Namespace,
    *,
    retry: str | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The patch for `flip`, or CommandError(2) when a migration toward the other side is running.

    A flip by a person holds the Offload against the OffloadPolicies (`--hold`, else until the next flip
    by a person) and says so (flipped-by); those annotations travel in the same merge patch as the
    placement, so the policy never sees the one without the other. With `retry` (a fresh value), a flip
    toward where the last migration failed to go also sets the retry annotation to it.

    `--steps` and `--interval` go into the flip-strategy annotation, for the migration this flip starts
    alone (a person may flip without the right to write the status, and the spec's strategy is what
    every later flip, an OffloadPolicy's too, runs by); with `--save`, into `spec.strategy` instead.
    A flip without them removes an earlier flip's, so that nothing of it outlives its own migration.
    """
    status = rendering.status_of(current)
    target = status.target_placement
    if rendering.is_running(current) and target and target != arguments.to:
        raise CommandError(
            EXIT_USAGE,
            f'offload "{arguments.name}" is already migrating to {target} (phase {status.phase}, '
            f"away weight {rendering.weight_text(current)}); wait for it to end, or abort it first",
        )
    now = now or datetime.now(UTC)
    spec: dict[str, Any] = {"placement": arguments.to}
    annotations: dict[str, Any] = holds.flip_annotations(now, arguments.hold)
    annotations[FLIP_STRATEGY_ANNOTATION] = None
    if arguments.save:
        strategy: dict[str, Any] = {}
        if arguments.steps is not None:
            strategy["toAwaySteps" if arguments.to == "away" else "toHomeSteps"] = list(arguments.steps)
        if arguments.interval is not None:
            strategy["stepIntervalSeconds"] = arguments.interval
        spec["strategy"] = strategy
    elif arguments.steps is not None or arguments.interval is not None:
        stamp = now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # two flips with the same steps are two requests
        annotations[FLIP_STRATEGY_ANNOTATION] = one_off_value(
            arguments.to, arguments.steps, arguments.interval, stamp
        )
    if retry is not None and is_retry(current, arguments.to):
        annotations[RETRY_ANNOTATION] = retry
    return {"metadata": {"annotations": annotations}, "spec": spec}


def finished_code(
    offload: RawObject, generation: int, placement: str, retry: str | None = None
) -> int | None:
    """The exit code once the migration started at `generation` (or for the `retry` value) has ended;
    None while it has not."""
    status = rendering.status_of(offload)
    code = rendering.exit_code_of_phase(status.phase)
    if code is None:
        return None
    if retry is not None:  # the generation did not move: only the controller's echo tells the attempts apart
        return code if status.handled_retry == retry else None
    observed = status.observed_generation
    if observed is not None:
        return code if int(observed) >= generation else None
    return code if status.target_placement == placement else None


def not_ready(offload: RawObject, generation: int) -> str | None:
    """Why nothing will move, once the controller has judged `generation` and said Ready=False; else None."""
    status = rendering.status_of(offload)
    if status.observed_generation is None or int(status.observed_generation) < generation:
        return None
    ready = rendering.condition_of(offload, "Ready")
    if ready is None or ready.get("status") != "False":
        return None
    return f"{ready.get('reason', 'NotReady')}: {ready.get('message', '')}"


async def wait_for_end(
    api: KubeApi,
    namespace: str,
    patched: RawObject,
    placement: str,
    *,
    retry: str | None = None,
    timeout_seconds: int | None = None,
) -> int:
    """Follow the migration `patched` started until it ends (or the Offload turns out not Ready); with
    `timeout_seconds`, give up after that long with one line saying where the migration is (exit 1)."""
    name = patched["metadata"]["name"]
    generation = int(patched["metadata"].get("generation", 0))
    last_line = rendering.progress_line(patched)
    emit(last_line)
    latest, code, blocked = (
        patched,
        finished_code(patched, generation, placement, retry),
        not_ready(patched, generation),
    )
    try:
        async with asyncio.timeout(timeout_seconds):
            if code is None and blocked is None:
                async for offload in follow(api, namespace, name, patched):
                    latest = offload
                    line = rendering.progress_line(offload)
                    if line != last_line:
                        emit(line)
                        last_line = line
                    code = finished_code(offload, generation, placement, retry)
                    blocked = not_ready(offload, generation)
                    if code is not None or blocked is not None:
                        break
    except TimeoutError:
        complain(timed_out(latest, placement, timeout_seconds or 0))
        return EXIT_FAILED
    if code is None and blocked is not None:
        complain(
            f"offload {name} is not Ready ({blocked}); nothing moves until that is fixed, "
            f"then `{rendering.flip_command(latest, placement)}` again"
        )
        return EXIT_FAILED
    if code == EXIT_OK:
        emit(f"offload {name}: the migration to {placement} succeeded")
    else:
        complain(
            f"offload {name}: the migration to {placement} did not succeed; {rendering.retry_hint(latest)}"
        )
    return EXIT_FAILED if code is None else code


def timed_out(offload: RawObject, placement: str, seconds: int) -> str:
    """The one line `flip --wait --timeout` ends with when time is up: where the migration is, and that
    it goes on without the command."""
    metadata = offload.get("metadata") or {}
    status = rendering.status_of(offload)
    where = f" -n {metadata['namespace']}" if metadata.get("namespace") else ""
    return (
        f"offload {metadata.get('name', rendering.NONE)}: the migration to {placement} did not end within "
        f"{holds.span(seconds)}: phase {status.phase or 'Pending'}, away weight "
        f"{rendering.weight_text(offload)}, step {rendering.step_text(offload)}; it goes on "
        f"(`kubectl offload status {metadata.get('name', rendering.NONE)}{where} --watch`)"
    )


def pace_text(arguments: argparse.Namespace) -> str | None:
    """What the flip's --steps and --interval apply to, or None without them."""
    parts = []
    if arguments.steps is not None:
        parts.append("steps " + ",".join(str(step) for step in arguments.steps))
    if arguments.interval is not None:
        parts.append(f"{arguments.interval}s per step")
    if not parts:
        return None
    if arguments.save:
        return f"{' and '.join(parts)} saved in spec.strategy, for every later migration too"
    return f"{' and '.join(parts)} for this migration only (--save keeps them in spec.strategy)"


def held_text(patched: RawObject, now: datetime) -> str:
    """What the hold just written means for the policies: `OffloadPolicies leave it alone until ...`."""
    value = holds.annotations_of(patched).get(HOLD_UNTIL_ANNOTATION)
    return f"OffloadPolicies leave it alone {holds.describe_hold_value(value, now)}"


def check_flip_flags(arguments: argparse.Namespace) -> None:
    """The flag combinations argparse cannot refuse alone; CommandError(2) before any request."""
    if arguments.save and arguments.steps is None and arguments.interval is None:
        raise CommandError(EXIT_USAGE, "--save saves --steps and --interval: give at least one")
    if getattr(arguments, "timeout", None) is not None and not arguments.wait:
        raise CommandError(EXIT_USAGE, "--timeout bounds --wait: give --wait too, or no --timeout")
    if arguments.wait and getattr(arguments, "dry_run", None) is not None:
        raise CommandError(EXIT_USAGE, "--wait waits for a migration and --dry-run starts none: give one")


async def run_flip(api: KubeApi, arguments: argparse.Namespace, namespace: str) -> int:
    check_flip_flags(arguments)
    dry = dryrun.suffix(arguments)
    now = datetime.now(UTC)
    stamp = now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    patched = await checked_patch(
        api, namespace, arguments.name, lambda current: flip_patch(current, arguments, retry=stamp, now=now)
    )
    retrying = (patched["metadata"].get("annotations") or {}).get(RETRY_ANNOTATION) == stamp
    if retrying:
        emit(
            f"offload {arguments.name}: the last migration to {arguments.to} did not succeed; trying it "
            f"again{dry}"
        )
    else:
        emit(f"offload {arguments.name}: placement set to {arguments.to}{dry}")
    if (pace := pace_text(arguments)) is not None:
        emit(f"offload {arguments.name}: {pace}{dry}")
    emit(f"offload {arguments.name}: {held_text(patched, now)}{dry}")
    if not arguments.wait:
        return EXIT_OK
    return await wait_for_end(
        api,
        namespace,
        patched,
        arguments.to,
        retry=stamp if retrying else None,
        timeout_seconds=getattr(arguments, "timeout", None),
    )


def _require_running(current: RawObject, name: str, what: str) -> str:
    """The running migration's target placement, or CommandError(2) when none runs."""
    if not rendering.is_running(current):
        phase = rendering.status_of(current).phase or "none"
        raise CommandError(EXIT_USAGE, f'offload "{name}" has no migration running to {what} (phase {phase})')
    return rendering.direction_placement(current)


async def run_abort(api: KubeApi, arguments: argparse.Namespace, namespace: str) -> int:
    now = datetime.now(UTC)

    def build(current: RawObject) -> Mapping[str, Any]:
        target = _require_running(current, arguments.name, "abort")
        # A person setting the placement back is a flip by a person: held until the next one, or a policy
        # would move the Offload straight out again.
        return {
            "metadata": {"annotations": holds.flip_annotations(now, None)},
            "spec": {"placement": opposite(target)},
        }

    patched = await checked_patch(api, namespace, arguments.name, build)
    placement = rendering.spec_of(patched).get("placement")
    dry = dryrun.suffix(arguments)
    emit(f"offload {arguments.name}: aborting; placement set back to {placement}{dry}")
    emit(f"offload {arguments.name}: {held_text(patched, now)}{dry}")
    return EXIT_OK


async def run_promote(api: KubeApi, arguments: argparse.Namespace, namespace: str) -> int:
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def build(current: RawObject) -> Mapping[str, Any]:
        _require_running(current, arguments.name, "promote")
        return {"metadata": {"annotations": {PROMOTE_ANNOTATION: stamp}}}

    await checked_patch(api, namespace, arguments.name, build)
    emit(f"offload {arguments.name}: promote requested at {stamp}{dryrun.suffix(arguments)}")
    return EXIT_OK


async def run_pause(api: KubeApi, arguments: argparse.Namespace, namespace: str) -> int:
    await patch_offload(api, namespace, arguments.name, {"spec": {"paused": True}})
    emit(f"offload {arguments.name}: paused{dryrun.suffix(arguments)}")
    return EXIT_OK


async def run_resume(api: KubeApi, arguments: argparse.Namespace, namespace: str) -> int:
    await patch_offload(api, namespace, arguments.name, {"spec": {"paused": False}})
    emit(f"offload {arguments.name}: resumed{dryrun.suffix(arguments)}")
    return EXIT_OK


async def run_auto(api: KubeApi, arguments: argparse.Namespace, namespace: str) -> int:
    await patch_offload(api, namespace, arguments.name, holds.auto_patch(arguments.state))
    dry = dryrun.suffix(arguments)
    if arguments.state == holds.AUTO_ON:
        emit(
            f"offload {arguments.name}: auto on; an OffloadPolicy that selects it may move it (no hold){dry}"
        )
    else:
        emit(
            f"offload {arguments.name}: auto off; no OffloadPolicy moves it until "
            f"`kubectl offload auto on {arguments.name} -n {namespace}`{dry}"
        )
    return EXIT_OK


Handler = Callable[[KubeApi, argparse.Namespace, str], Awaitable[int]]
HANDLERS: dict[str, Handler] = {
    "list": run_list,
    "status": run_status,
    "flip": run_flip,
    "pause": run_pause,
    "resume": run_resume,
    "abort": run_abort,
    "promote": run_promote,
    "auto": run_auto,
}
