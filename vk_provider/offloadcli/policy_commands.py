"""`kubectl offload policy list` and `policy status NAME [--watch]`: read-only views of OffloadPolicies.

The policies are cluster-scoped, so the namespace plays no part. Exit codes as in `commands`: 0 shown,
1 not found or the apiserver said no, 130 interrupted (--watch runs until then, or until the policy is
deleted).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import AsyncGenerator

from vk_provider.kit.kube import KubeApi, KubeApiError, RawObject
from vk_provider.offloadcli import policy_rendering, rendering
from vk_provider.offloadcli.commands import (
    CLEAR_SCREEN,
    EXIT_FAILED,
    EXIT_OK,
    REFRESH_SECONDS,
    CommandError,
    Handler,
    Sleep,
    emit,
    follow_object,
    refreshes,
    show_document,
)
from vk_provider.policy.names import policies_path

NOT_INSTALLED = "the OffloadPolicy resource is not installed (apply manifests/crds/offloadpolicy.yaml)"


async def get_policy(api: KubeApi, name: str) -> RawObject:
    try:
        return await api.get(policies_path(name))
    except KubeApiError as error:
        if error.not_found:
            raise CommandError(
                EXIT_FAILED, f'offloadpolicy "{name}" not found (see `kubectl offload policy list`)'
            ) from None
        raise


async def run_policy_list(api: KubeApi, arguments: argparse.Namespace, _namespace: str) -> int:
    try:
        listed = await api.get(policies_path())
    except KubeApiError as error:
        if error.not_found:
            raise CommandError(EXIT_FAILED, NOT_INSTALLED) from None
        raise
    items = listed.get("items") or []
    if arguments.output:
        emit(rendering.render_document(listed, arguments.output))
    elif not items:
        print("No offloadpolicies found.", file=sys.stderr)
    else:
        emit(policy_rendering.render_policy_list(items))
    return EXIT_OK


async def run_policy_status(
    api: KubeApi,
    arguments: argparse.Namespace,
    _namespace: str,
    *,
    sleep: Sleep = asyncio.sleep,
    interactive: bool | None = None,
) -> int:
    """Show the policy; with --watch, again on each change until interrupted, like `status --watch`.

    On a terminal the page is also redrawn every REFRESH_SECONDS so ages and holds count down; into a
    log only changes are printed. As JSON or YAML the object itself is printed, once per change.
    """
    name = arguments.name
    policy = await get_policy(api, name)

    def changes() -> AsyncGenerator[RawObject, None]:
        deleted = f'offloadpolicy "{name}" was deleted'
        return follow_object(api, policies_path(), policy, lambda: get_policy(api, name), deleted)

    if arguments.output:
        show_document(policy, arguments.output, repeat=False)
        if arguments.watch:
            async with contextlib.aclosing(changes()) as versions:
                async for version in versions:
                    show_document(version, arguments.output, repeat=True)
        return EXIT_OK
    emit(policy_rendering.render_policy_status(policy))
    if not arguments.watch:
        return EXIT_OK
    interactive = sys.stdout.isatty() if interactive is None else interactive
    async with contextlib.aclosing(refreshes(changes(), policy, REFRESH_SECONDS, sleep=sleep)) as pages:
        async for latest, changed in pages:
            if changed or interactive:
                emit(CLEAR_SCREEN if interactive else "")
                emit(policy_rendering.render_policy_status(latest))
    return EXIT_OK


HANDLERS: dict[str, Handler] = {"policy list": run_policy_list, "policy status": run_policy_status}
