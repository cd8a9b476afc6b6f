"""Build binaries from pinned upstream Go modules, and cache them.

The development cluster and the integration tests run a real kube-apiserver, kube-controller-manager,
kube-scheduler, kubectl and etcd (and, where asked, Kueue and metrics-server). Nobody ships those for
this machine, so we compile them from the Go module proxy. Each `GoBuild` is a module of ours (a folder
with `go.mod` and `go.sum` and no code) that pins the upstream module and its dependencies; the control
plane's is `gomod/`, which pins `k8s.io/kubernetes` and maps its staging modules to their published
versions; `gomod-1.35/` pins the oldest supported minor the same way (`CONTROL_PLANES`). The binaries
live outside the repository, in a cache folder keyed by the pinned versions and by a digest of the
module files, with a stamp that records each binary's checksum; a missing, partial or corrupt binary is
rebuilt, a valid one never is.

Only one build runs at a time per cache folder (an advisory file lock); a second caller either waits
for it or is told it is under way.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from vk_devtools.devcluster.processes import tail_of_file

GOMOD_DIR = Path(__file__).with_name("gomod")
PROGRESS_INTERVAL_SECONDS = 30.0


@dataclasses.dataclass(frozen=True, slots=True)
class VersionStamp:
    """The `-X package.variable=value` link flags that tell a binary its pinned upstream version."""

    module: str
    """The pinned module whose version is stamped."""
    variables: Callable[[str], Mapping[str, str]]
    """The module's version -> {"package.variable": value}."""


@dataclasses.dataclass(frozen=True, slots=True)
class Component:
    """One binary of a GoBuild and the Go package it is built from."""

    binary: str
    package: str
    version_stamp: VersionStamp | None = None


def _kubernetes_version_variables(version: str) -> dict[str, str]:
    major, minor = version.lstrip("v").split(".")[:2]
    values = {
        "gitVersion": version,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        "buildDate": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    # Both packages carry a copy of the version; kubectl and the servers read different ones.
    return {
        f"{package}.{key}": value
        for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
        for key, value in values.items()
    }


KUBERNETES = "k8s.io/kubernetes"
ETCD = "go.etcd.io/etcd/server/v3"
KUBERNETES_VERSION = VersionStamp(KUBERNETES, _kubernetes_version_variables)
"""Kubernetes binaries get the release version stamped in, as upstream's release build does."""


@dataclasses.dataclass(frozen=True, slots=True)
class GoBuild:
    """One pinned Go module of ours and the binaries built from it."""

    name: str
    """What the binaries are, for messages: "the control plane", "Kueue"."""
    cache_folder: str
    gomod_dir: Path
    components: tuple[Component, ...]
    folder_modules: tuple[tuple[str, str], ...]
    """(label, module) pairs whose pinned versions name the cache folder: `k8s-v1.37.2-etcd-...`."""
    cold_build_note: str
    """How long a cold build takes, said when one starts."""


COMPONENTS: tuple[Component, ...] = (
    Component("etcd", ETCD),
    Component("kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver", KUBERNETES_VERSION),
    Component("kube-controller-manager", "k8s.io/kubernetes/cmd/kube-controller-manager", KUBERNETES_VERSION),
    Component("kube-scheduler", "k8s.io/kubernetes/cmd/kube-scheduler", KUBERNETES_VERSION),
    Component("kubectl", "k8s.io/kubernetes/cmd/kubectl", KUBERNETES_VERSION),
)

CONTROL_PLANE = GoBuild(
    name="the control plane",
    cache_folder="control-plane",
    gomod_dir=GOMOD_DIR,
    components=COMPONENTS,
    folder_modules=(("k8s", KUBERNETES), ("etcd", ETCD)),
    cold_build_note="A cold build takes about 10 minutes on 2 cores.",
)
"""The newest supported minor's plane (1.37): what `dev up` and the tests start unless told otherwise."""
CONTROL_PLANE_1_35 = dataclasses.replace(
    CONTROL_PLANE,
    name="the Kubernetes 1.35 control plane",
    gomod_dir=GOMOD_DIR.with_name("gomod-1.35"),
    cold_build_note=(
        "A cold build takes about as long as 1.37's, 10 minutes on 2 idle cores (31 minutes measured on a "
        "busy shared machine)."
    ),
)
"""The oldest supported minor's plane (vk_provider.kit.kubeversions), for the tests on an older cluster.
Same components, same cache folder (its subfolder is named by its own pins), its own `gomod-1.35/`."""
DEFAULT_KUBERNETES_VERSION = "1.37"
CONTROL_PLANES: Mapping[str, GoBuild] = {
    DEFAULT_KUBERNETES_VERSION: CONTROL_PLANE,
    "1.35": CONTROL_PLANE_1_35,
}
"""Kubernetes minor -> the pinned control plane of that minor (`--kubernetes-version`)."""


class BuildError(Exception):
    """The control plane could not be built; the message says what to do."""


class UnknownKubernetesVersionError(BuildError):
    """`--kubernetes-version` names a minor there is no pinned control plane for."""


def control_plane_build(kubernetes_version: str = DEFAULT_KUBERNETES_VERSION) -> GoBuild:
    """The pinned control plane of a minor ("1.35", "v1.35"); its patch is the pin's, so none is taken."""
    minor = kubernetes_version.strip().removeprefix("v")
    build = CONTROL_PLANES.get(minor)
    if build is None:
        pinned = ", ".join(sorted(CONTROL_PLANES))
        raise UnknownKubernetesVersionError(
            f"no pinned control plane for Kubernetes {kubernetes_version!r}: give a minor, one of {pinned} "
            "(the patch is the one its go.mod pins)"
        )
    return build


class GoToolchainError(BuildError):
    """Go is missing or older than the pinned modules need."""


class BuildInProgressError(BuildError):
    """Another process holds the build lock and the caller chose not to wait."""


@dataclasses.dataclass(frozen=True, slots=True)
class Pins:
    """What a GoBuild's `go.mod` pins, read from the file so there is one source of truth."""

    versions: Mapping[str, str]
    """Module -> pinned version, for the modules the build names (its folder modules and stamps)."""
    go_version: str
    digest: str
    """First 12 hex digits of sha256(go.mod + go.sum): a change of any pin gets a fresh cache folder."""

    def version(self, module: str) -> str:
        return self.versions[module]

    @property
    def kubernetes_version(self) -> str:
        return self.version(KUBERNETES)

    @property
    def etcd_version(self) -> str:
        return self.version(ETCD)


def read_pins(build: GoBuild = CONTROL_PLANE) -> Pins:
    gomod_path = build.gomod_dir / "go.mod"
    gomod = gomod_path.read_text()
    gosum = (build.gomod_dir / "go.sum").read_bytes()

    def required(module: str) -> str:
        match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)} (v\S+)", gomod, re.MULTILINE)
        if match is None:
            raise BuildError(f"{gomod_path} does not require {module}")
        return match.group(1)

    go_match = re.search(r"^go (\S+)$", gomod, re.MULTILINE)
    if go_match is None:
        raise BuildError(f"{gomod_path} has no go directive")
    modules = {module for _, module in build.folder_modules}
    modules |= {c.version_stamp.module for c in build.components if c.version_stamp is not None}
    return Pins(
        versions={module: required(module) for module in sorted(modules)},
        go_version=go_match.group(1),
        digest=hashlib.sha256(gomod.encode() + gosum).hexdigest()[:12],
    )


def cache_root() -> Path:
    """Where built binaries live: $VK_PROVIDER_CACHE_DIR, else the XDG cache folder."""
    explicit = os.environ.get("VK_PROVIDER_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "vk-provider"


def _parse_go_version(text: str) -> tuple[int, ...]:
    match = re.search(r"(?:go)?(\d+)\.(\d+)(?:\.(\d+))?", text)
    if match is None:
        raise GoToolchainError(f"cannot read a Go version from {text!r}")
    return tuple(int(part or 0) for part in match.groups())


def check_go(required: str) -> str:
    """Return the local Go version, or explain in one sentence what is missing."""
    need = f"Go {required} or newer is needed to build the pinned Go modules"
    go = shutil.which("go")
    if go is None:
        raise GoToolchainError(f"{need}, but `go` is not on PATH; install Go {required}+ and try again.")
    result = subprocess.run(
        [go, "env", "GOVERSION"], capture_output=True, text=True, check=False, env=_go_environment()
    )
    found = result.stdout.strip()
    if result.returncode != 0 or not found:
        raise GoToolchainError(f"{need}; `{go} env GOVERSION` failed: {result.stderr.strip()}")
    if _parse_go_version(found) < _parse_go_version(required):
        raise GoToolchainError(f"{need}; found {found} at {go}.")
    return found


def _go_environment() -> dict[str, str]:
    env = dict(os.environ)
    # A stray dependency bump must fail loudly instead of downloading another toolchain, and the
    # server binaries are static, as upstream ships them (no C compiler needed).
    env["GOTOOLCHAIN"] = "local"
    env["CGO_ENABLED"] = "0"
    return env


def module_source(module: str, version: str, *, cwd: Path | None = None) -> Path:
    """A Go module's source in the Go module cache, downloaded through the module proxy if need be
    (upstream manifests such as CRDs live there). `cwd`: a folder whose go.mod pins it."""
    completed = subprocess.run(
        ["go", "mod", "download", "-json", f"{module}@{version}"],
        cwd=cwd,
        env={**_go_environment(), "GOFLAGS": "-mod=mod"},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    try:
        return Path(json.loads(completed.stdout)["Dir"])
    except (ValueError, KeyError, TypeError):
        raise RuntimeError(
            f"cannot find {module}@{version} in the Go module cache: {completed.stderr or completed.stdout}"
        ) from None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _format_duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s"


class BinaryCache:
    """One cache folder: `bin/`, `stamp.json`, the build lock and logs, and a copy of the Go module."""

    def __init__(self, root: Path, pins: Pins, build: GoBuild = CONTROL_PLANE) -> None:
        self.build = build
        self.pins = pins
        self.root = root
        self.bin_dir = root / "bin"
        self.stamp_path = root / "stamp.json"
        self.lock_path = root / "build.lock"
        self.go_log_path = root / "go-build.log"
        self.progress_log_path = root / "build.log"
        self.source_dir = root / "src"

    @classmethod
    def for_build(cls, build: GoBuild) -> BinaryCache:
        pins = read_pins(build)
        labels = "-".join(f"{label}-{pins.version(module)}" for label, module in build.folder_modules)
        return cls(cache_root() / build.cache_folder / f"{labels}-{pins.digest}", pins, build)

    @classmethod
    def default(cls, kubernetes_version: str = DEFAULT_KUBERNETES_VERSION) -> BinaryCache:
        """The cache of the control plane of a minor (`control_plane_build`), by default the newest."""
        return cls.for_build(control_plane_build(kubernetes_version))

    def binary(self, name: str) -> Path:
        return self.bin_dir / name

    def _read_stamp(self) -> dict[str, dict[str, object]]:
        try:
            stamp = json.loads(self.stamp_path.read_text())
            binaries = stamp["binaries"]
        except (OSError, ValueError, KeyError, TypeError):
            return {}
        return binaries if isinstance(binaries, dict) else {}

    def problems(self) -> dict[str, str]:
        """Each component whose binary cannot be trusted, with the reason. Empty when all are good."""
        stamp = self._read_stamp()
        found: dict[str, str] = {}
        for component in self.build.components:
            path = self.binary(component.binary)
            entry = stamp.get(component.binary)
            if not path.is_file():
                found[component.binary] = "missing"
            elif not isinstance(entry, dict):
                found[component.binary] = "not recorded in the stamp (a build was interrupted)"
            elif path.stat().st_size != entry.get("size") or _sha256(path) != entry.get("sha256"):
                found[component.binary] = "checksum mismatch (corrupt or partial file)"
        return found

    def _record(self, component: Component, seconds: float) -> None:
        stamp = self._read_stamp()
        path = self.binary(component.binary)
        stamp[component.binary] = {
            "sha256": _sha256(path),
            "size": path.stat().st_size,
            "build_seconds": round(seconds, 1),
            "package": component.package,
        }
        document = {
            **{label: self.pins.version(module) for label, module in self.build.folder_modules},
            "gomod_digest": self.pins.digest,
            "binaries": stamp,
        }
        temporary = self.stamp_path.with_suffix(".tmp")
        temporary.write_text(json.dumps(document, indent=2) + "\n")
        temporary.replace(self.stamp_path)

    @contextlib.contextmanager
    def _locked(self, *, wait: bool, out: TextIO) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with self.lock_path.open("a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as error:
                if error.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                lock.seek(0)
                owner = lock.read().strip() or "another process"
                message = (
                    f"a build of {self.build.name} is already under way ({owner}); "
                    f"its progress is in {self.progress_log_path}"
                )
                if not wait:
                    raise BuildInProgressError(message) from None
                print(f"{message}; waiting for it to finish", file=out, flush=True)
                fcntl.flock(lock, fcntl.LOCK_EX)
            lock.seek(0)
            lock.truncate()
            lock.write(f"pid {os.getpid()}, started {datetime.now(UTC):%Y-%m-%d %H:%M:%S}Z")
            lock.flush()
            try:
                yield
            finally:
                lock.seek(0)
                lock.truncate()

    def _prepare_source(self) -> None:
        self.source_dir.mkdir(parents=True, exist_ok=True)
        for name in ("go.mod", "go.sum"):
            shutil.copyfile(self.build.gomod_dir / name, self.source_dir / name)

    def _ldflags(self, component: Component) -> str:
        flags = ["-s", "-w"]
        stamp = component.version_stamp
        if stamp is not None:
            variables = stamp.variables(self.pins.version(stamp.module))
            flags += [f"-X {name}={value}" for name, value in variables.items()]
        return " ".join(flags)

    def _build_one(self, component: Component, *, go_log: TextIO) -> None:
        target = self.binary(component.binary)
        partial = target.with_name(target.name + ".partial")
        command = [
            "go", "build", "-trimpath", "-ldflags", self._ldflags(component),
            "-o", str(partial), component.package,
        ]  # fmt: skip
        go_log.write(f"\n$ {' '.join(command)}\n")
        go_log.flush()
        result = subprocess.run(
            command,
            cwd=self.source_dir,
            env=_go_environment(),
            stdout=go_log,
            stderr=subprocess.STDOUT,
            check=False,
        )
        if result.returncode != 0:
            partial.unlink(missing_ok=True)
            raise BuildError(
                f"building {component.binary} failed (exit {result.returncode}); "
                f"the end of {self.go_log_path}:\n{tail_of_file(self.go_log_path, lines=30)}"
            )
        partial.replace(target)

    def ensure(
        self,
        *,
        wait: bool = True,
        out: TextIO = sys.stderr,
        build_component: Callable[[Component], None] | None = None,
    ) -> Path:
        """Return the folder of trusted binaries, building whatever is missing or corrupt first.

        `build_component` replaces the Go build (tests use it to exercise the cache logic alone).
        """
        if not self.problems():
            return self.bin_dir
        with self._locked(wait=wait, out=out):
            problems = self.problems()  # another process may have finished the work while we waited
            if not problems:
                return self.bin_dir
            if build_component is None:
                check_go(self.pins.go_version)
            self.bin_dir.mkdir(parents=True, exist_ok=True)
            self._prepare_source()
            components = self.build.components
            todo = [component for component in components if component.binary in problems]
            pinned = ", ".join(f"{module} {version}" for module, version in self.pins.versions.items())
            print(
                f"building {self.build.name} ({pinned}) into {self.bin_dir}; {len(todo)} of "
                f"{len(components)} binaries to build. {self.build.cold_build_note}",
                file=out,
                flush=True,
            )
            for component in components:
                if component.binary in problems and problems[component.binary] != "missing":
                    print(f"{component.binary}: {problems[component.binary]}; rebuilding", file=out)
            started = time.monotonic()
            with self.go_log_path.open("a") as go_log:
                for index, component in enumerate(todo, start=1):
                    label = f"[{index}/{len(todo)}] {component.binary}"
                    component_started = time.monotonic()
                    print(f"{label}: building {component.package}", file=out, flush=True)
                    with _progress_ticker(label, started, component_started, out):
                        if build_component is None:
                            self._build_one(component, go_log=go_log)
                        else:
                            build_component(component)
                    took = time.monotonic() - component_started
                    self._record(component, took)
                    print(
                        f"{label}: done in {_format_duration(took)} "
                        f"(total {_format_duration(time.monotonic() - started)})",
                        file=out,
                        flush=True,
                    )
            remaining = self.problems()
            if remaining:
                raise BuildError(f"binaries still not trusted after the build: {remaining}")
            return self.bin_dir

    def start_background_build(self, arguments: Sequence[str] = ()) -> int | None:
        """Start `vk-provider dev build [arguments]` detached, logging to build.log; None if one is
        under way."""
        self.root.mkdir(parents=True, exist_ok=True)
        with self.lock_path.open("a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return None
            fcntl.flock(lock, fcntl.LOCK_UN)
        with self.progress_log_path.open("a") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "vk_provider", "dev", "build", *arguments],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return process.pid


@contextlib.contextmanager
def _progress_ticker(label: str, started: float, component_started: float, out: TextIO) -> Iterator[None]:
    """Say every PROGRESS_INTERVAL_SECONDS that a long build is alive, with its elapsed time."""
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(PROGRESS_INTERVAL_SECONDS):
            now = time.monotonic()
            print(
                f"{label}: still building, {_format_duration(now - component_started)} so far "
                f"(total {_format_duration(now - started)})",
                file=out,
                flush=True,
            )

    thread = threading.Thread(target=tick, name=f"progress {label}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
