"""A container's volumes, bound at their mount paths in a mount namespace of its own.

The monitor calls `enter_private_mounts` before it starts the container: a new mount namespace whose
mounts do not propagate back to the host, with each volume's folder bind-mounted at its `mountPath`
(read-only when the mount says so), so the process finds its ServiceAccount token at
/var/run/secrets/kubernetes.io/serviceaccount as in any pod, and no other process sees it there. An
exec joins that namespace (`joining_mounts_of`). Mount namespaces need CAP_SYS_ADMIN: the local provider
mounts volumes only when `mount_volumes` is on, and refuses to start without the capability.

Such a container also gets a UTS namespace with the pod's name as its host name, as in any pod: what
`socket.gethostname()` returns there names the pod (a leader-election identity, for one), not the host.

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
CLONE_NEWUTS = 0x04000000
HOST_NAME_MAX = 63
"""What the kubelet cuts a pod's host name to: a DNS label."""
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


def pod_host_name(pod_name: str) -> str:
    """The host name of a pod's containers, cut as the kubelet cuts it."""
    return pod_name[:HOST_NAME_MAX].rstrip("-.")


def enter_private_mounts(mounts: Iterable[Mapping[str, Any]], *, host_name: str | None = None) -> None:
    """Move this process into a new mount namespace and bind each mount's `source` at its `target`;
    with `host_name`, also into a new UTS namespace of that host name.

    Every mount is bound before any is made read-only: a mount inside a read-only one (credentials
    under a ConfigMap's folder) needs its mount point created first."""
    libc = _c()
    if host_name:
        _check(libc.unshare(CLONE_NEWNS | CLONE_NEWUTS), "unshare(CLONE_NEWNS | CLONE_NEWUTS)")
        name = host_name.encode()
        _check(libc.sethostname(name, len(name)), f"sethostname({host_name})")
    else:
        _check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "making / private")
    mounts = list(mounts)
    for mount in mounts:
        source, target = os.fsencode(mount["source"]), os.fsencode(mount["target"])
        os.makedirs(target, exist_ok=True)
        _check(libc.mount(source, target, None, MS_BIND | MS_REC, None), f"binding {mount['target']}")
    for mount in mounts:
        if mount.get("read_only"):
            flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_REC
            target = os.fsencode(mount["target"])
            _check(libc.mount(None, target, None, flags, None), f"making {mount['target']} read-only")


@contextlib.contextmanager
def joining_mounts_of(pid: int) -> Iterator[Callable[[], None]]:
    """A function for a child process to run between fork and exec (`preexec_fn`): it joins `pid`'s
    mount and UTS namespaces. They are opened here, in the parent, and closed when the block ends, so
    the child makes only system calls and takes no lock."""
    mounts = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    try:
        host = os.open(f"/proc/{pid}/ns/uts", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        os.close(mounts)
        raise
    setns = _c().setns

    def join() -> None:
        if setns(mounts, CLONE_NEWNS) != 0 or setns(host, CLONE_NEWUTS) != 0:
            os._exit(126)  # it could not see the container's files: fail, never run beside them

    try:
        yield join
    finally:
        os.close(mounts)
        os.close(host)
