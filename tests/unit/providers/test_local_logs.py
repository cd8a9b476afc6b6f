"""Container logs of the local provider: CRI files written by the monitor, served as the kubelet does."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from vk_provider.errors import NotFoundError
from vk_provider.provider import LogOptions, PodRef
from vk_providers.local import logs
from vk_providers.local.crilog import MAX_RECORD_CONTENT_BYTES, encode_records, format_timestamp
from vk_providers.local.logs import read_log, tail_start_offset, timestamp_nanoseconds

from .local_support import (
    PYTHON,
    container,
    has_restarted,
    in_phase,
    local_provider,
    logs_contain,
    pod,
    read_logs,
    shell,
    wait_for_pod,
)

SLEEP_FOREVER = "exec sleep 600"
TIMESTAMP = rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z"


def write_cri_log(path: Path, *chunks: tuple[bytes, int]) -> None:
    """A log as the monitor would write it for these reads of output (bytes, nanoseconds since epoch)."""
    with path.open("ab") as log:
        for data, nanoseconds in chunks:
            log.write(encode_records(b"stdout", data, format_timestamp(nanoseconds)))


def open_files() -> set[str]:
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile
            found.add(os.readlink(f"/proc/self/fd/{fd}"))
    return found


async def collect(path: Path, **options: object) -> bytes:
    chunks = []
    async with contextlib.aclosing(read_log(path, LogOptions(**options))) as stream:  # type: ignore[arg-type]
        async for chunk in stream:
            chunks.append(chunk)
    return b"".join(chunks)


async def test_partial_records_are_joined_back_into_the_exact_output(tmp_path: Path) -> None:
    log = tmp_path / "0.log"
    output = [b"one\ntw", b"o\n", b"x" * (MAX_RECORD_CONTENT_BYTES * 2 + 5) + b"\n", b"\xff\xfe no newline"]
    write_cri_log(log, *((chunk, 1_000) for chunk in output))
    records = log.read_bytes().split(b"\n")[:-1]
    assert [record.split(b" ")[2] for record in records] == [b"F", b"P", b"F", b"P", b"P", b"F", b"P"]
    assert await collect(log) == b"".join(output)


async def test_tail_counts_lines_of_output_not_records(tmp_path: Path) -> None:
    log = tmp_path / "0.log"
    write_cri_log(log, (b"a\nb", 1), (b"b\nc\n", 2), (b"d" * 40_000 + b"\n", 3), (b"e", 4))
    assert await collect(log, tail_lines=1) == b"e"
    assert await collect(log, tail_lines=2) == b"d" * 40_000 + b"\ne"
    assert await collect(log, tail_lines=4) == b"bb\nc\n" + b"d" * 40_000 + b"\ne"
    assert await collect(log, tail_lines=100) == b"a\nbb\nc\n" + b"d" * 40_000 + b"\ne"
    assert await collect(log, tail_lines=0) == b""


async def test_tail_reads_backwards_across_block_boundaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(logs, "BLOCK_BYTES", 7)
    log = tmp_path / "0.log"
    lines = [f"line {index}\n".encode() for index in range(50)]
    write_cri_log(log, *((line, index) for index, line in enumerate(lines)))
    with log.open("rb") as file:
        offset = tail_start_offset(file, 3)
    assert log.read_bytes()[offset:].count(b"\n") == 3
    assert await collect(log, tail_lines=3) == b"".join(lines[-3:])


async def test_timestamps_since_and_limit_apply_to_the_output(tmp_path: Path) -> None:
    log = tmp_path / "0.log"
    second = 1_700_000_000 * 10**9
    write_cri_log(log, (b"old\n", second), (b"new", second + 5), (b"er\nlast\n", second + 10**9))
    stamped = await collect(log, timestamps=True)
    assert stamped == (
        b"2023-11-14T22:13:20.000000000Z old\n"
        b"2023-11-14T22:13:20.000000005Z newer\n"
        b"2023-11-14T22:13:21.000000000Z last\n"
    )
    since = datetime.fromtimestamp(1_700_000_000, UTC).replace(microsecond=1)
    assert await collect(log, since_time=since) == b"er\nlast\n"
    assert await collect(log, limit_bytes=9) == b"old\nnewer"
    assert await collect(log, limit_bytes=0) == b""
    assert timestamp_nanoseconds(b"2023-11-14T23:13:20.5+01:00") == second + 500_000_000


async def test_logs_of_a_running_container_support_tail_and_an_exact_byte_limit(tmp_path: Path) -> None:
    request = pod("u1", shell(f"for i in $(seq 1 200); do echo line $i; done; {SLEEP_FOREVER}"))
    async with local_provider(tmp_path) as provider:
        await provider.create_pod(request)
        await logs_contain(provider, request.ref, b"line 200\n")
        assert await read_logs(provider, request.ref, tail_lines=2) == b"line 199\nline 200\n"
        everything = await read_logs(provider, request.ref)
        assert everything == b"".join(f"line {index}\n".encode() for index in range(1, 201))
        for limit in (1, 13, 1000):
            limited = await read_logs(provider, request.ref, limit_bytes=limit)
            assert limited == everything[:limit]
        stamped = await read_logs(provider, request.ref, tail_lines=1, timestamps=True)
        assert re.fullmatch(TIMESTAMP + rb" line 200\n", stamped)


async def test_invalid_utf8_and_a_100_kib_line_survive_byte_for_byte(tmp_path: Path) -> None:
    script = (
        "import sys; out = sys.stdout.buffer; "
        "out.write(b'\\xff\\xfe\\xc3(' + bytes(range(256)).replace(b'\\n', b'') + b'\\n'); "
        "out.write(b'y' * 102400 + b'\\n'); out.write(b'no newline \\xe2\\x82')"
    )
    request = pod("v1", container(PYTHON, "-c", script), restart_policy="Never")
    expected = (
        b"\xff\xfe\xc3("
        + bytes(range(256)).replace(b"\n", b"")
        + b"\n"
        + b"y" * 102400
        + b"\nno newline \xe2\x82"
    )
    async with local_provider(tmp_path) as provider:
        await provider.create_pod(request)
        await wait_for_pod(provider, request.ref, in_phase("Succeeded"))
        assert await read_logs(provider, request.ref) == expected
        assert await read_logs(provider, request.ref, tail_lines=2) == expected[expected.index(b"yyy") :]


async def test_previous_serves_the_log_of_the_run_before(tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    # Fails on its first run only.
    script = f"echo . >> {counter}; n=$(wc -l < {counter}); echo run $n; [ $n -ge 2 ] || exit 1; sleep 600"
    request = pod("w1", shell(script), restart_policy="OnFailure")
    async with local_provider(tmp_path / "state") as provider:
        await provider.create_pod(request)
        await wait_for_pod(provider, request.ref, has_restarted(1))
        await logs_contain(provider, request.ref, b"run 2\n")
        assert await read_logs(provider, request.ref, previous=True) == b"run 1\n"
        assert await read_logs(provider, request.ref) == b"run 2\n"


async def test_follow_stops_when_the_container_ends(tmp_path: Path) -> None:
    request = pod("x1", shell("for i in 1 2 3; do echo tick $i; sleep 0.1; done"), restart_policy="Never")
    async with local_provider(tmp_path) as provider:
        await provider.create_pod(request)
        await logs_contain(provider, request.ref, b"tick 1\n")
        followed = await asyncio.wait_for(read_logs(provider, request.ref, follow=True), timeout=10)
        assert followed == b"tick 1\ntick 2\ntick 3\n"


async def test_follow_ends_cleanly_when_the_reader_stops(tmp_path: Path) -> None:
    request = pod("x2", shell("while :; do echo tick; sleep 0.02; done"))
    async with local_provider(tmp_path) as provider:
        await provider.create_pod(request)
        await logs_contain(provider, request.ref, b"tick\n")
        tasks_before = asyncio.all_tasks()
        stream = provider.stream_logs(request.ref, "main", LogOptions(follow=True, tail_lines=0))
        received = b""
        async with contextlib.aclosing(stream):  # type: ignore[type-var]
            async for chunk in stream:
                received += chunk
                if received.count(b"tick\n") >= 3:
                    break
        assert asyncio.all_tasks() - tasks_before == set()
        assert str(tmp_path / "pods" / "x2" / "main" / "0.log") not in open_files()


async def test_logs_of_unknown_pods_and_containers_are_not_found(tmp_path: Path) -> None:
    request = pod("y1", shell(SLEEP_FOREVER))
    async with local_provider(tmp_path) as provider:
        with pytest.raises(NotFoundError):
            provider.stream_logs(PodRef("default", "ghost", "nobody"), "main", LogOptions())
        await provider.create_pod(request)
        with pytest.raises(NotFoundError):
            provider.stream_logs(request.ref, "other", LogOptions())
        await wait_for_pod(provider, request.ref, in_phase("Running"))
        with pytest.raises(NotFoundError, match="previous"):
            provider.stream_logs(request.ref, "main", LogOptions(previous=True))
