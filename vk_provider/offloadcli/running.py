"""Runs a parsed `kubectl offload` command: resolves the cluster, connects, picks the handler, and turns
every way it can end into an exit code and a message (see `commands` for the codes)."""

from __future__ import annotations

import argparse
import asyncio

import aiohttp

from vk_provider.kit.kube import KubeApiError
from vk_provider.offloadcli import commands, policy_commands, uninstall
from vk_provider.offloadcli.commands import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    CommandError,
    Handler,
    complain,
)
from vk_provider.offloadcli.connection import ConfigurationError, Target, connect, resolve

HANDLERS: dict[str, Handler] = {
    **commands.HANDLERS,
    **policy_commands.HANDLERS,
    "uninstall": uninstall.run_uninstall,
}


async def _run(arguments: argparse.Namespace, target: Target) -> int:
    api = await connect(target)
    try:
        return await HANDLERS[arguments.migration_command](api, arguments, target.namespace)
    finally:
        await api.close()


def run(arguments: argparse.Namespace) -> int:
    """Run the parsed migration command; returns the exit code (errors are printed to stderr)."""
    try:
        target = resolve(arguments.kubeconfig, arguments.context, arguments.namespace)
        return asyncio.run(_run(arguments, target))
    except ConfigurationError as error:
        complain(str(error))
        return EXIT_USAGE
    except CommandError as error:
        complain(error.message)
        return error.code
    except KubeApiError as error:
        complain(f"the apiserver answered {error.status} {error.reason}: {error.message}")
        return EXIT_FAILED
    except (aiohttp.ClientError, OSError, TimeoutError) as error:
        complain(f"cannot reach the apiserver: {error}")
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
