"""Runs a parsed `kubectl offload` command: resolves the cluster, connects, picks the handler, and turns
every way it can end into an exit code and a message (see `commands` for the codes)."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable

from vk_provider.kit.kube import KubeApiError
from vk_provider.offloadcli import commands, policy_commands, uninstall
from vk_provider.offloadcli.commands import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    CommandError,
    Handler,
    complain,
    emit,
)
from vk_provider.offloadcli.connection import (
    UNREACHABLE,
    ConfigurationError,
    Target,
    connect,
    resolve,
    unreachable_message,
)
from vk_provider.offloadcli.dryrun import DryRunApi
from vk_provider.offloadcli.globalflags import merge_global_flags

HANDLERS: dict[str, Handler] = {
    **commands.HANDLERS,
    **policy_commands.HANDLERS,
    "uninstall": uninstall.run_uninstall,
}

FLAG_CHECKS: dict[str, Callable[[argparse.Namespace], None]] = {"flip": commands.check_flip_flags}
"""Per command, the checks of flag combinations argparse cannot make (each raises CommandError(2))."""


async def _run(arguments: argparse.Namespace, target: Target) -> int:
    api = await connect(target)
    mode: str | None = getattr(arguments, "dry_run", None)
    if mode is not None:  # every write of every command goes through this one wrapper
        api = DryRunApi(api, mode, emit)
    try:
        return await HANDLERS[arguments.migration_command](api, arguments, target.namespace)
    finally:
        await api.close()


def run(arguments: argparse.Namespace) -> int:
    """Run the parsed migration command; returns the exit code (errors are printed to stderr)."""
    merge_global_flags(arguments)  # `vk-provider migrate -n ml list` too
    check = FLAG_CHECKS.get(arguments.migration_command)
    try:
        if check is not None:
            check(arguments)
    except CommandError as error:  # a usage error, told before looking for a cluster
        complain(error.message)
        return error.code
    try:
        target = resolve(arguments.kubeconfig, arguments.context, arguments.namespace)
    except ConfigurationError as error:  # as kubectl: a kubeconfig that cannot be used exits 1
        complain(str(error))
        return EXIT_FAILED
    return _run_until_it_ends(arguments, target)


def _run_until_it_ends(arguments: argparse.Namespace, target: Target) -> int:
    """Every way the command can end as an exit code, with one line on stderr for each failure."""
    try:
        return asyncio.run(_run(arguments, target))
    except ConfigurationError as error:
        complain(str(error))
        return EXIT_FAILED
    except CommandError as error:
        complain(error.message)
        return error.code
    except KubeApiError as error:
        complain(f"the apiserver answered {error.status} {error.reason}: {error.message}")
        return EXIT_FAILED
    except UNREACHABLE as error:
        complain(unreachable_message(error, target.server))
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
