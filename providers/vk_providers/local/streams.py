"""Exec and port-forward for local pods: a real process in the container's environment, a real socket.

Exec runs the command as the container's own process runs (its resolved environment, its working
folder), in a session of its own so that a client that vanishes takes the whole command down with it
(SIGKILL to the session's group). With a tty it gets a pseudo-terminal as its controlling terminal
(TERM=xterm unless the pod sets TERM, as container runtimes do), sized by the client's resize messages.
Attach writes to the FIFO a container with `stdin: true` reads (see `monitor`) and follows its log
from now on (stdout and stderr together, as the log has them). Port-forward connects to the pod's
address, where the pod's processes listen.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import os
import signal
import struct
import subprocess
import termios
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path

from vk_provider.errors import ProviderError
from vk_provider.provider import ByteSink, ContainerStreams, TerminalSize

READ_CHUNK_BYTES = 64 * 1024
DRAIN_AFTER_EXIT_SECONDS = 2.0
"""How long, after the command exited, a copier may wait for more output: a background child holding
the terminal open must not keep the exit code from the client forever (the monitor has the same rule;
with pipes, Python 3.11's `Process.wait()` itself returns only once the pipes close). Time spent
handing output to a slow client does not count: what the command wrote is all delivered."""
DRAIN_POLL_SECONDS = 0.05


async def exec_process(
    command: Sequence[str],
    streams: ContainerStreams,
    *,
    env: Mapping[str, str],
    working_dir: str,
    enter: Callable[[], None] | None = None,
) -> int:
    """Run `command` to its end with `streams`; its exit code (128+N when killed by signal N).

    `enter` runs in the child before the command (joining the container's mount namespace)."""
    if not command:
        raise ProviderError("exec needs a command")
    if streams.tty:
        return await _exec_with_tty(
            command, streams, env={"TERM": "xterm", **env}, working_dir=working_dir, enter=enter
        )
    return await _exec_with_pipes(command, streams, env=env, working_dir=working_dir, enter=enter)


async def _start(command: Sequence[str], working_dir: str, **options: object) -> asyncio.subprocess.Process:
    try:
        return await asyncio.create_subprocess_exec(
            *command,
            cwd=working_dir,
            start_new_session=True,
            **options,  # type: ignore[arg-type]
        )
    except FileNotFoundError:
        raise ProviderError(f'exec: "{command[0]}": executable file not found in $PATH') from None
    except PermissionError:
        raise ProviderError(f'exec: "{command[0]}": permission denied') from None
    except OSError as error:
        raise ProviderError(f"exec: {command[0]}: {error.strerror}") from None


def _exit_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


async def _exec_with_pipes(
    command: Sequence[str],
    streams: ContainerStreams,
    *,
    env: Mapping[str, str],
    working_dir: str,
    enter: Callable[[], None] | None,
) -> int:
    pipe, devnull = subprocess.PIPE, subprocess.DEVNULL
    process = await _start(
        command,
        working_dir,
        preexec_fn=enter,
        env=dict(env),
        stdin=pipe if streams.stdin is not None else devnull,
        stdout=pipe if streams.stdout is not None else devnull,
        stderr=pipe if streams.stderr is not None else devnull,
    )
    copiers = [
        _Copier(functools.partial(source.read, READ_CHUNK_BYTES), sink)
        for source, sink in ((process.stdout, streams.stdout), (process.stderr, streams.stderr))
        if source is not None and sink is not None
    ]
    outputs = [asyncio.ensure_future(copier.run()) for copier in copiers]
    feeder = asyncio.ensure_future(_feed(streams.stdin, process.stdin))
    try:
        returncode = await process.wait()
        await _drain(copiers, outputs)
        for task in outputs:
            if task.done() and not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
        return _exit_code(returncode)
    finally:
        await _end(process, [*outputs, feeder])


class _Copier:
    """Copies a source to a sink, and knows since when it has been waiting on the source (None while it
    delivers), so that the drain after exit cuts only a wait for output, never a delivery."""

    def __init__(self, read: Callable[[], Awaitable[bytes]], sink: ByteSink | None) -> None:
        self._read = read
        self._sink = sink
        self._loop = asyncio.get_running_loop()
        self.waiting_since: float | None = None

    async def run(self) -> None:
        while True:
            self.waiting_since = self._loop.time()
            chunk = await self._read()
            self.waiting_since = None
            if not chunk:
                return
            if self._sink is not None:
                await self._sink(chunk)


async def _drain(copiers: Sequence[_Copier], tasks: Sequence[asyncio.Future[None]]) -> None:
    """After the command exited: let each copier finish, unless it has waited on its source for
    DRAIN_AFTER_EXIT_SECONDS since the exit (a background child keeps the output open); `_end` then
    cancels it."""
    loop = asyncio.get_running_loop()
    exited_at = loop.time()
    pending = {task: copier for task, copier in zip(tasks, copiers, strict=True)}
    while pending:
        done, _ = await asyncio.wait(pending, timeout=DRAIN_POLL_SECONDS)
        for task in done:
            del pending[task]
        now = loop.time()
        stalled = [
            task
            for task, copier in pending.items()
            if copier.waiting_since is not None
            and now - max(copier.waiting_since, exited_at) >= DRAIN_AFTER_EXIT_SECONDS
        ]
        for task in stalled:
            del pending[task]


async def _feed(chunks: AsyncIterator[bytes] | None, target: asyncio.StreamWriter | None) -> None:
    if chunks is None or target is None:
        return
    try:
        async for chunk in chunks:
            target.write(chunk)
            await target.drain()
    except (BrokenPipeError, ConnectionResetError):
        return  # the command stopped reading; what is left of stdin has nowhere to go
    finally:
        target.close()


async def _end(process: asyncio.subprocess.Process, tasks: Sequence[asyncio.Future[None]]) -> None:
    """Kill what is left of the command's session (if it is still running) and stop every copier."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks)


def _make_controlling_terminal() -> None:
    # Runs in the child between fork and exec, after setsid (start_new_session): fd 0 is the terminal's
    # replica side, and taking it as controlling terminal gives the shell job control and SIGWINCH.
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def set_terminal_size(fd: int, size: TerminalSize) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", size.height, size.width, 0, 0))


async def _exec_with_tty(
    command: Sequence[str],
    streams: ContainerStreams,
    *,
    env: Mapping[str, str],
    working_dir: str,
    enter: Callable[[], None] | None,
) -> int:
    def prepare_child() -> None:
        if enter is not None:
            enter()
        _make_controlling_terminal()

    controller, replica = os.openpty()
    try:
        process = await _start(
            command,
            working_dir,
            env=dict(env),
            stdin=replica,
            stdout=replica,
            stderr=replica,
            preexec_fn=prepare_child,  # system calls only (setns, an ioctl): no lock is taken
        )
    except BaseException:
        os.close(controller)
        raise
    finally:
        os.close(replica)
    os.set_blocking(controller, False)
    terminal = _Terminal(controller)
    output = _Copier(terminal.read, streams.stdout)
    tasks = [
        asyncio.ensure_future(output.run()),
        asyncio.ensure_future(_feed_terminal(streams.stdin, terminal)),
        asyncio.ensure_future(_follow_sizes(streams.resize, controller)),
    ]
    try:
        returncode = await process.wait()
        await _drain([output], tasks[:1])
        return _exit_code(returncode)
    finally:
        await _end(process, tasks)
        terminal.close()


class _Terminal:  # also any other non-blocking descriptor (the attach FIFO)
    """The controller side of a pseudo-terminal, read and written without blocking the event loop."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._loop = asyncio.get_running_loop()

    async def read(self) -> bytes:
        """The next output; b"" once no process has the terminal open any more (Linux says EIO)."""
        while True:
            try:
                return os.read(self.fd, READ_CHUNK_BYTES)
            except BlockingIOError:
                await self._ready(self._loop.add_reader, self._loop.remove_reader)
            except OSError:
                return b""

    async def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.fd, view) :]
            except BlockingIOError:
                await self._ready(self._loop.add_writer, self._loop.remove_writer)

    async def _ready(self, add: Callable[..., object], remove: Callable[[int], object]) -> None:
        ready: asyncio.Future[None] = self._loop.create_future()

        def wake() -> None:
            if not ready.done():
                ready.set_result(None)

        add(self.fd, wake)
        try:
            await ready
        finally:
            remove(self.fd)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


async def _feed_terminal(chunks: AsyncIterator[bytes] | None, terminal: _Terminal) -> None:
    if chunks is None:
        return
    with contextlib.suppress(OSError):
        async for chunk in chunks:
            await terminal.write(chunk)


async def _follow_sizes(sizes: AsyncIterator[TerminalSize] | None, fd: int) -> None:
    if sizes is None:
        return
    with contextlib.suppress(OSError):
        async for size in sizes:
            set_terminal_size(fd, size)


async def attach_process(
    stdin_fifo: Path | None, output: AsyncIterator[bytes], streams: ContainerStreams
) -> None:
    """Feed `streams.stdin` to the FIFO (None: the container has no stdin) and `output` to stdout
    until the output ends (the run has ended) or this is cancelled (the client left)."""
    feeder: asyncio.Future[None] | None = None
    fifo: _Terminal | None = None
    if stdin_fifo is not None and streams.stdin is not None:
        try:
            # Non-blocking: the process holds the FIFO open for reading, so this cannot wait for one.
            fifo = _Terminal(os.open(stdin_fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError as error:
            raise ProviderError(f"cannot attach to the container's stdin: {error.strerror}") from None
        feeder = asyncio.ensure_future(_feed_terminal(streams.stdin, fifo))
    sink = streams.stdout or streams.stderr
    try:
        async for chunk in output:
            if sink is not None:
                await sink(chunk)
    finally:
        if feeder is not None:
            feeder.cancel()
            await asyncio.wait([feeder])
        if fifo is not None:
            fifo.close()


async def forward_port(address: str, port: int, incoming: AsyncIterator[bytes], send: ByteSink) -> None:
    """Copy `incoming` to address:port and the answers to `send`, until both directions are done."""
    try:
        reader, writer = await asyncio.open_connection(address, port)
    except OSError as error:
        raise ProviderError(f"dial tcp {address}:{port}: {error.strerror or error}") from None

    async def upstream() -> None:
        try:
            async for chunk in incoming:
                writer.write(chunk)
                await writer.drain()
            if writer.can_write_eof():
                writer.write_eof()
        except ConnectionError:
            return

    async def downstream() -> None:
        while chunk := await reader.read(READ_CHUNK_BYTES):
            await send(chunk)

    tasks = [asyncio.ensure_future(upstream()), asyncio.ensure_future(downstream())]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            if task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks)
        writer.close()
