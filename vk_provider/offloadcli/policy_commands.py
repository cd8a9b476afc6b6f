"""`kubectl offload policy list` and `policy status NAME [--watch]`: read-only views of OffloadPolicies.

The policies are cluster-scoped, so the namespace plays no part. Exit codes as in `commands`: 0 shown,
1 not found or the apiserver said no, 130 interrupted (--watch runs until then, or until the policy is
deleted).
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from vk_provider.kit.kube import KubeApi, KubeApiError, RawObject
from vk_provider.offloadcli import outputs, policy_rendering
from vk_provider.offloadcli.commands import (
    EXIT_FAILED,
    EXIT_OK,
    CommandError,
    Handler,
    Sleep,
    emit,
    follow_object,
    list_events,
    show_and_watch,
)
from vk_provider.policy.names import POLICY_KIND, policies_path

EVENTS_NAMESPACE = "default"
"""Where Events about a cluster-scoped object are filed (as for Nodes; the policy's recorder does too)."""
POLICIES = outputs.Kind(
    POLICY_KIND, lambda items, wide: policy_rendering.render_policy_list(items, wide=wide)
)
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
    if listed.get("items") or arguments.output in outputs.DOCUMENTS:
        emit(outputs.render_listing(listed, arguments.output, POLICIES))
    else:
        print("No offloadpolicies found.", file=sys.stderr)
    return EXIT_OK


async def run_policy_status(
    api: KubeApi,
    arguments: argparse.Namespace,
    _namespace: str,
    *,
    sleep: Sleep = asyncio.sleep,
    interactive: bool | None = None,
) -> int:
    """Show the policy with its Events; with --watch, again on each change until interrupted, like
    `status --watch` (see `commands.show_and_watch`)."""
    name = arguments.name
    policy = await get_policy(api, name)
    deleted = f'offloadpolicy "{name}" was deleted'
    return await show_and_watch(
        policy,
        lambda: follow_object(api, policies_path(), policy, lambda: get_policy(api, name), deleted),
        lambda: list_events(api, EVENTS_NAMESPACE, name, kind=POLICY_KIND),
        policy_rendering.render_policy_status,
        arguments,
        kind=POLICIES,
        sleep=sleep,
        interactive=interactive,
    )


HANDLERS: dict[str, Handler] = {"policy list": run_policy_list, "policy status": run_policy_status}
