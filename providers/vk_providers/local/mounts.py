"""A container's volumes, bound at their mount paths in a mount namespace of its own.

The monitor calls `enter_private_mounts` before it starts the container: a new mount namespace whose
mounts do not propagate back to the host, with each volume's folder bind-mounted at its `mountPath`
(read-only when the mount says so), so the process finds its ServiceAccount token at
/var/run/secrets/kubernetes.io/serviceaccount as in any pod, and no other process sees it there. An
exec joins that namespace (`joining_mounts_of`). Mount namespaces need CAP_SYS_ADMIN: the local provider
mounts volumes only when `mount_volumes` is on, and refuses to start without the capability.

A mount point that does not exist on the host is created (an empty folder), as a container runtime
creates it in the image's root; the folder stays behind, empty, once the pod is gone.

Light on purpose: the monitor imports this at every container start.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

CLONE_NEWNS = 0x00020000
MS_RDONLY = 0x1
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000

_libc: Any = None


def _c() -> Any:
    global _libc  # noqa: PLW0603 - loaded once, on first use
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    return _libc


class MountError(OSError):
    """A mount the container needs could not be made; `strerror` says which and why."""


def _check(result: int, what: str) -> None:
    if result != 0:
        error = ctypes.get_errno()
        raise MountError(error, f"{what}: {os.strerror(error)}")


def enter_private_mounts(mounts: Iterable[Mapping[str, Any]]) -> None:
    """Move this process into a new mount namespace and bind each mount's `source` at its `target`."""
    libc = _c()
    _check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "making / private")
    for mount in mounts:
        source, target = os.fsencode(mount["source"]), os.fsencode(mount["target"])
        os.makedirs(target, exist_ok=True)
        _check(libc.mount(source, target, None, MS_BIND | MS_REC, None), f"binding {mount['target']}")
        if mount.get("read_only"):
            flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_REC
            _check(libc.mount(None, target, None, flags, None), f"making {mount['target']} read-only")


@contextlib.contextmanager
def joining_mounts_of(pid: int) -> Iterator[Callable[[], None]]:
    """A function for a child process to run between fork and exec (`preexec_fn`): it joins `pid`'s
    mount namespace. The namespace is opened here, in the parent, and closed when the block ends, so
    the child makes one system call and takes no lock."""
    descriptor = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    setns = _c().setns

    def join() -> None:
        if setns(descriptor, CLONE_NEWNS) != 0:
            os._exit(126)  # it could not see the container's files: fail, never run beside them

    try:
        yield join
    finally:
        os.close(descriptor)
