"""`--dry-run=client|server` for every command that writes: flip, pause, resume, abort, promote, auto
and uninstall.

The option is applied once, where the command gets its connection (`running`): the handlers write
through a `DryRunApi`, which reads as usual and, for each write,

- client: sends nothing, says what it would send, and answers with the object as the patch would
  leave it (a JSON merge patch applied here), so the command's own messages still describe the result;
- server: sends it with `dryRun=All`, so the apiserver runs every check it would (the CRD's schema and
  CEL rules, admission webhooks) and answers with the object it would have stored, storing nothing.

A bare `--dry-run` means client, as it did in kubectl.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from vk_provider.kit.kube import JSON, MERGE_PATCH, STRATEGIC_MERGE_PATCH, KubeApi, RawObject, WatchEvent

CLIENT = "client"
SERVER = "server"
MODES = (CLIENT, SERVER)
SERVER_QUERY = {"dryRun": "All"}
HELP = (
    "change nothing: client prints what would be sent; server has the apiserver check it (its schema "
    "and validation rules) and prints the result (a bare --dry-run is client; write --dry-run=MODE "
    "before a NAME)"
)


def parse_dry_run(text: str) -> str:
    if text in MODES:
        return text
    raise argparse.ArgumentTypeError(
        f"{text!r} is not a dry-run mode (client or server); a bare --dry-run takes the next word as its "
        "mode, so before a NAME write --dry-run=client"
    )


def add_dry_run_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dry-run",
        nargs="?",
        const=CLIENT,
        type=parse_dry_run,
        choices=MODES,  # never refuses (the type does, saying more); it lets completion offer them
        metavar="client|server",
        help=HELP,
    )


def suffix(arguments: argparse.Namespace) -> str:
    """What a command's own messages end with under --dry-run: ` (dry run)` or ` (server dry run)`."""
    mode = getattr(arguments, "dry_run", None)
    if mode is None:
        return ""
    return " (server dry run)" if mode == SERVER else " (dry run)"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: `patch` applied to `target` (a null removes a key, a mapping merges, anything else
    replaces)."""
    if not isinstance(patch, Mapping):
        return patch
    merged = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def describe_path(path: str) -> str:
    """`offloads/chat in namespace ml` for an object's API path (the path itself if it is not one)."""
    parts = path.strip("/").split("/")
    if "namespaces" in parts[:-2]:
        index = parts.index("namespaces")
        rest = parts[index + 2 :]
        if len(rest) >= 2:
            return f"{rest[0]}/{rest[1]} in namespace {parts[index + 1]}"
    return path


class DryRunApi(KubeApi):
    """`inner`, whose writes are dry runs of `mode`; `say` prints what each is.

    A KubeApi for the handlers' types, but built around `inner` rather than a client of its own: it
    reads, watches and sends through `inner` alone, and offers nothing else (no streams)."""

    def __init__(self, inner: KubeApi, mode: str, say: Callable[[str], None]) -> None:
        # No KubeApi.__init__: it would take a client of its own; every method used here goes to `inner`.
        self.inner = inner
        self.mode = mode
        self.say = say

    async def close(self) -> None:
        await self.inner.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str | int | bool] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout_seconds: float = 30.0,
        compact: bool = False,
    ) -> RawObject:
        if method not in ("GET", "HEAD"):
            query = {**(query or {}), **SERVER_QUERY}
            if self.mode == CLIENT:
                raise AssertionError(f"a {method} sent in a client dry run")
        return await self.inner.request(
            method,
            path,
            query=query,
            body=body,
            content_type=content_type,
            timeout_seconds=timeout_seconds,
            compact=compact,
        )

    async def get(
        self, path: str, *, query: Mapping[str, str | int | bool] | None = None, compact: bool = False
    ) -> RawObject:
        if compact:
            return await self.inner.get(path, query=query, compact=True)
        return await self.inner.get(path, query=query)

    def watch(
        self, path: str, *, query: Mapping[str, str | int | bool], timeout_seconds: int
    ) -> AsyncIterator[WatchEvent]:
        return self.inner.watch(path, query=query, timeout_seconds=timeout_seconds)

    async def patch(self, path: str, body: Any, *, content_type: str = STRATEGIC_MERGE_PATCH) -> RawObject:
        shown = json.dumps(body, sort_keys=True)
        if self.mode == SERVER:
            result = await self.request("PATCH", path, body=body, content_type=content_type)
            self.say(f"server dry run: the apiserver accepts the patch of {describe_path(path)}: {shown}")
            return result
        current = await self.get(path)  # first: an Offload that is not there is an error, not a would
        self.say(f"dry run: would patch {describe_path(path)}: {shown}")
        # A strategic merge patch needs the schema to apply; the commands here send merge patches only.
        return merge_patch(current, body) if content_type == MERGE_PATCH else current

    async def delete(self, path: str, body: Mapping[str, Any] | None = None) -> RawObject:
        if self.mode == SERVER:
            result = await self.request("DELETE", path, body=body)
            self.say(f"server dry run: the apiserver accepts the deletion of {describe_path(path)}")
            return result
        self.say(f"dry run: would delete {describe_path(path)}")
        return {}

    async def create(self, path: str, body: Mapping[str, Any]) -> RawObject:
        if self.mode == SERVER:
            result = await self.request("POST", path, body=body)
            self.say(f"server dry run: the apiserver accepts the creation in {describe_path(path)}")
            return result
        self.say(f"dry run: would create in {describe_path(path)}: {json.dumps(body, sort_keys=True)}")
        return dict(body)
