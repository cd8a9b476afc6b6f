"""The local provider's exec and port-forward, on real processes, terminals and sockets."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import pytest

from vk_provider.errors import ProviderError
from vk_provider.provider import ContainerStreams, TerminalSize
from vk_providers.local.streams import exec_process, forward_port

pytestmark = pytest.mark.unit


class Collected:
    def __init__(self) -> None:
        self.data = bytearray()
        self.grew = asyncio.Event()

    async def __call__(self, chunk: bytes) -> None:
        self.data += chunk
        self.grew.set()

    async def until(self, predicate: object) -> None:
        async with asyncio.timeout(10):
            while not (callable(predicate) and predicate(bytes(self.data))):
                self.grew.clear()
                await self.grew.wait()


async def chunks(items: Sequence[bytes]) -> AsyncIterator[bytes]:
    for item in items:
        yield item


async def run(command: Sequence[str], tmp_path: Path, **streams: object) -> int:
    return await exec_process(
        command,
        ContainerStreams(**streams),
        env={"PATH": os.environ["PATH"], "GREETING": "hi"},
        working_dir=str(tmp_path),
    )  # type: ignore[arg-type]


async def test_the_outputs_stay_apart_and_the_exit_code_comes_back(tmp_path: Path) -> None:
    out, err = Collected(), Collected()
    code = await run(
        ["sh", "-c", 'echo "$GREETING from $(pwd)"; echo err >&2; exit 3'], tmp_path, stdout=out, stderr=err
    )
    assert code == 3
    assert bytes(out.data) == f"hi from {tmp_path}\n".encode()
    assert bytes(err.data) == b"err\n"


async def test_stdin_reaches_the_command_and_its_end_is_eof(tmp_path: Path) -> None:
    payload = os.urandom(3 * 1024 * 1024)
    out = Collected()
    pieces = [payload[start : start + 100_000] for start in range(0, len(payload), 100_000)]
    assert await run(["sha256sum"], tmp_path, stdin=chunks(pieces), stdout=out) == 0
    assert bytes(out.data).split()[0].decode() == hashlib.sha256(payload).hexdigest()


async def test_a_signal_death_is_128_plus_the_signal(tmp_path: Path) -> None:
    assert await run(["sh", "-c", "kill -9 $$"], tmp_path, stdout=Collected()) == 137


async def test_a_missing_program_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ProviderError, match=r'"no-such-program": executable file not found'):
        await run(["no-such-program"], tmp_path, stdout=Collected())


async def test_a_terminal_has_the_clients_size_and_follows_a_resize(tmp_path: Path) -> None:
    sizes: asyncio.Queue[TerminalSize | None] = asyncio.Queue()
    keys: asyncio.Queue[bytes | None] = asyncio.Queue()

    async def drain(queue: asyncio.Queue[object]) -> AsyncIterator[object]:
        while (item := await queue.get()) is not None:
            yield item

    out = Collected()
    sizes.put_nowait(TerminalSize(width=100, height=30))
    task = asyncio.ensure_future(
        run(["sh"], tmp_path, stdin=drain(keys), stdout=out, tty=True, resize=drain(sizes))  # type: ignore[arg-type]
    )
    keys.put_nowait(b"tty >/dev/null && stty size\n")
    await out.until(lambda data: b"30 100" in data)
    sizes.put_nowait(TerminalSize(width=120, height=40))
    await asyncio.sleep(
        0.2
    )  # lets the resize land before the shell is asked; no event for it (noqa: sleep-ok)
    keys.put_nowait(b"stty size; exit 4\n")
    await out.until(lambda data: b"40 120" in data)
    assert await asyncio.wait_for(task, 10) == 4


async def test_cancelling_kills_the_command_and_its_children(tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    task = asyncio.ensure_future(
        run(["sh", "-c", f"sleep 300 & echo $! > {marker}; wait"], tmp_path, stdout=Collected())
    )
    await wait_until(lambda: marker.exists() and bool(marker.read_text().strip()))
    child = int(marker.read_text())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await wait_until(lambda: not _alive(child))


async def wait_until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(10):
        while not condition():  # noqa: ASYNC110 (a file and a process: nothing to wait on but polling)
            await asyncio.sleep(0.05)  # polls (noqa: sleep-ok)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


async def test_port_forward_copies_both_ways_and_half_closes() -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data = await reader.read()  # until our half-close
        writer.write(data.upper())
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    got = Collected()
    async with server:
        await forward_port("127.0.0.1", port, chunks([b"hello ", b"pod"]), got)
    assert bytes(got.data) == b"HELLO POD"


async def test_port_forward_to_a_closed_port_says_so() -> None:
    with pytest.raises(ProviderError, match=r"dial tcp 127\.0\.0\.1:1: "):
        await forward_port("127.0.0.1", 1, chunks([]), Collected())


async def test_a_slow_client_gets_all_the_output_after_the_command_exits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The drain after exit bounds waiting for output, not delivering it (a client behind a plugin
    under load took longer than the drain and lost `echo`'s line before this)."""
    monkeypatch.setattr("vk_providers.local.streams.DRAIN_AFTER_EXIT_SECONDS", 0.2)
    delivered = bytearray()

    async def slow(chunk: bytes) -> None:
        await asyncio.sleep(0.5)  # a client slower than the drain (noqa: sleep-ok)
        delivered.extend(chunk)

    assert await run(["sh", "-c", "echo one; echo two >&2"], tmp_path, stdout=slow, stderr=slow) == 0
    assert sorted(bytes(delivered).splitlines()) == [b"one", b"two"]
