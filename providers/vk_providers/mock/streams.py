"""The mock's exec, attach and port-forward: a few built-in commands, so the streaming protocols can be
tested end to end without running anything.

Commands (the first word; anything else exits 127 with "command not found" on stderr, as a shell would):

- `echo WORDS...`: the words and a newline on stdout;
- `cat`: stdin to stdout until stdin ends;
- `fail CODE [MESSAGE]`: MESSAGE on stderr, then exit with CODE;
- `stty size`: the terminal's size as `rows columns` once the first size is known (`tty` only);
- `sleep SECONDS`.

Attach echoes stdin to stdout (the mock's containers "read stdin"). Port-forward echoes every byte sent
to any port back.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

from vk_provider.provider import ByteSink, ContainerStreams, TerminalSize

COMMAND_NOT_FOUND = 127


async def run_builtin(command: Sequence[str], streams: ContainerStreams) -> int:  # noqa: PLR0911 (one per command)
    name, arguments = (command[0], list(command[1:])) if command else ("", [])
    out = streams.stdout
    if name == "echo":
        await _write(out, (" ".join(arguments) + "\n").encode())
        return 0
    if name == "cat":
        await _copy(streams.stdin, out)
        return 0
    if name == "fail" and arguments and arguments[0].isdigit():
        await _write(streams.stderr, (" ".join(arguments[1:]) + "\n").encode())
        return int(arguments[0])
    if name == "stty" and arguments == ["size"]:
        size = await _first_size(streams.resize)
        if size is None:
            await _write(streams.stderr or out, b"stty: standard input: Not a tty\n")
            return 1
        await _write(out, f"{size.height} {size.width}\r\n".encode())
        return 0
    if name == "sleep" and arguments:
        await asyncio.sleep(float(arguments[0]))  # the command's whole point (noqa: sleep-ok)
        return 0
    await _write(streams.stderr or out, f"{name}: command not found\n".encode())
    return COMMAND_NOT_FOUND


async def attach(streams: ContainerStreams) -> None:
    await _copy(streams.stdin, streams.stdout)


async def echo_port(incoming: AsyncIterator[bytes], send: ByteSink) -> None:
    async for chunk in incoming:
        await send(chunk)


async def _write(sink: ByteSink | None, data: bytes) -> None:
    if sink is not None:
        await sink(data)


async def _copy(source: AsyncIterator[bytes] | None, sink: ByteSink | None) -> None:
    if source is None:
        return
    async for chunk in source:
        await _write(sink, chunk)


async def _first_size(sizes: AsyncIterator[TerminalSize] | None) -> TerminalSize | None:
    if sizes is None:
        return None
    async for size in sizes:
        return size
    return None
