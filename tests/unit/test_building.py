"""The binary cache: pins read from go.mod, Go checked first, bad binaries rebuilt, one build at a time."""

from __future__ import annotations

import dataclasses
import fcntl
import io
import os
import stat
from pathlib import Path

import pytest

from vk_devtools.devcluster import building
from vk_devtools.devcluster.building import (
    COMPONENTS,
    BinaryCache,
    BuildInProgressError,
    Component,
    GoToolchainError,
    check_go,
    read_pins,
)


def test_the_pins_come_from_the_committed_go_module() -> None:
    pins = read_pins()
    assert pins.kubernetes_version.startswith("v1.37.")
    assert pins.etcd_version.startswith("v3.")
    assert pins.go_version == "1.26.0"
    assert len(pins.digest) == 12


def fake_go(folder: Path, version: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "go"
    script.write_text(f"#!/bin/sh\necho {version}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


def test_missing_go_is_one_clear_sentence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(GoToolchainError, match=r"Go 1\.26\.0 or newer is needed .* `go` is not on PATH"):
        check_go("1.26.0")


def test_too_old_go_names_what_was_found(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake_go(tmp_path, "go1.22.4")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(GoToolchainError, match=r"Go 1\.26\.0 or newer is needed.*found go1\.22\.4"):
        check_go("1.26.0")


def test_a_new_enough_go_is_accepted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake_go(tmp_path, "go1.26.8")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert check_go("1.26.0") == "go1.26.8"


class FakeBuilder:
    """Writes a small file in place of each binary and remembers what it was asked to build."""

    def __init__(self, cache: BinaryCache) -> None:
        self.cache = cache
        self.built: list[str] = []

    def __call__(self, component: Component) -> None:
        self.built.append(component.binary)
        self.cache.binary(component.binary).write_bytes(f"binary of {component.binary}".encode())


@pytest.fixture
def cache(tmp_path: Path) -> BinaryCache:
    return BinaryCache(tmp_path / "cache", read_pins())


def test_an_empty_cache_builds_every_component_and_then_nothing(cache: BinaryCache) -> None:
    builder = FakeBuilder(cache)
    assert cache.ensure(out=io.StringIO(), build_component=builder) == cache.bin_dir
    assert builder.built == [component.binary for component in COMPONENTS]
    again = FakeBuilder(cache)
    cache.ensure(out=io.StringIO(), build_component=again)
    assert again.built == []


def test_a_corrupt_binary_is_detected_and_only_it_is_rebuilt(cache: BinaryCache) -> None:
    cache.ensure(out=io.StringIO(), build_component=FakeBuilder(cache))
    cache.binary("kube-apiserver").write_bytes(b"binary of kube-apiserveR")  # same size, other bytes
    assert cache.problems() == {"kube-apiserver": "checksum mismatch (corrupt or partial file)"}
    builder = FakeBuilder(cache)
    log = io.StringIO()
    cache.ensure(out=log, build_component=builder)
    assert builder.built == ["kube-apiserver"]
    assert "kube-apiserver: checksum mismatch" in log.getvalue()
    assert cache.problems() == {}


def test_a_truncated_or_unrecorded_binary_is_rebuilt(cache: BinaryCache) -> None:
    cache.ensure(out=io.StringIO(), build_component=FakeBuilder(cache))
    cache.binary("etcd").write_bytes(b"bin")
    cache.stamp_path.write_text("{not json")
    problems = cache.problems()
    assert set(problems) == {component.binary for component in COMPONENTS}
    assert problems["kubectl"].startswith("not recorded")
    builder = FakeBuilder(cache)
    cache.ensure(out=io.StringIO(), build_component=builder)
    assert sorted(builder.built) == sorted(component.binary for component in COMPONENTS)


def test_progress_names_each_component_with_elapsed_time(cache: BinaryCache) -> None:
    log = io.StringIO()
    cache.ensure(out=log, build_component=FakeBuilder(cache))
    lines = log.getvalue().splitlines()
    assert any(line.startswith("[2/5] kube-apiserver: building") for line in lines)
    assert any(line.startswith("[5/5] kubectl: done in 0m00s (total") for line in lines)


def test_a_second_caller_is_told_a_build_is_under_way(cache: BinaryCache) -> None:
    cache.root.mkdir(parents=True)
    with cache.lock_path.open("a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        held.write(f"pid {os.getpid()}, started now")
        held.flush()
        with pytest.raises(BuildInProgressError, match=rf"already under way \(pid {os.getpid()}"):
            cache.ensure(wait=False, out=io.StringIO(), build_component=FakeBuilder(cache))
        assert cache.start_background_build() is None


def test_a_failing_go_build_reports_the_end_of_its_log(
    cache: BinaryCache, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    folder = tmp_path / "fake-go"
    folder.mkdir()
    script = folder / "go"
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = env ]; then echo go1.26.8; exit 0; fi\n'
        'echo "compile: out of cheese" >&2\n'
        "exit 1\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    with pytest.raises(building.BuildError, match=r"building etcd failed \(exit 1\)[\s\S]*out of cheese"):
        cache.ensure(out=io.StringIO())
    assert not cache.binary("etcd").exists()


def test_any_pinned_module_gets_its_own_cache_folder_and_version_stamp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gomod = tmp_path / "gomod-tool"
    gomod.mkdir()
    (gomod / "go.mod").write_text("module x\n\ngo 1.26.0\n\nrequire example.com/tool v0.3.1 // indirect\n")
    (gomod / "go.sum").write_text("")
    stamp = building.VersionStamp("example.com/tool", lambda version: {"example.com/tool/version.V": version})
    tool = building.GoBuild(
        name="the tool",
        cache_folder="tool",
        gomod_dir=gomod,
        components=(Component("tool", "example.com/tool/cmd/tool", stamp),),
        folder_modules=(("tool", "example.com/tool"),),
        cold_build_note="Quick.",
    )
    monkeypatch.setenv("VK_PROVIDER_CACHE_DIR", str(tmp_path / "cache"))
    cache = BinaryCache.for_build(tool)
    assert cache.root.parent == tmp_path / "cache" / "tool"
    assert cache.root.name.startswith("tool-v0.3.1-")
    assert "-X example.com/tool/version.V=v0.3.1" in cache._ldflags(tool.components[0])
    log = io.StringIO()
    cache.ensure(out=log, build_component=FakeBuilder(cache))
    assert "building the tool (example.com/tool v0.3.1)" in log.getvalue()
    assert cache.problems() == {}


def test_a_module_that_does_not_require_a_named_module_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "go.mod").write_text("module x\n\ngo 1.26.0\n")
    (tmp_path / "go.sum").write_text("")
    tool = dataclasses.replace(building.CONTROL_PLANE, gomod_dir=tmp_path)
    with pytest.raises(building.BuildError, match=r"go\.mod does not require go\.etcd\.io/etcd/server/v3"):
        read_pins(tool)
