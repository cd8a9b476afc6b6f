"""Whether the migration controller runs, judged by its leader Lease.

`kubectl offload uninstall` brings Offloads home through the controller; without one, nothing would
ever move and the command would only wait out its timeout. The leader renews its Lease every few
seconds, so a Lease with a holder renewed within its duration (plus a margin for the clocks of the
apiserver and of whoever runs the command) means a controller acts now. A cleanly stopped controller
gives its Lease up (no holder); a crashed one stops renewing it.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime

from vk_provider.kit.kube import KubeApi, KubeApiError, RawObject, resource_path
from vk_provider.kit.timestamps import parse_timestamp

DEFAULT_LEASE = "vk-provider-system/vk-provider-controller"
"""Where the manifests' controller holds its Lease; the chart's is in the release's namespace."""
CLOCK_MARGIN_SECONDS = 10.0
"""Added to the Lease's duration before it counts as expired: the renewTime is the controller's clock."""


@dataclasses.dataclass(frozen=True)
class Presence:
    running: bool | None
    """True: a controller holds the Lease now; False: none does; None: the Lease cannot be read."""
    text: str
    """For people: what the Lease says (or why it cannot be read)."""


def parse_lease(text: str) -> tuple[str, str]:
    """`NAMESPACE/NAME` as its two parts, or ValueError with the reason."""
    namespace, slash, name = text.partition("/")
    if not slash or not namespace or not name or "/" in name:
        raise ValueError(f"{text!r} is not NAMESPACE/NAME (e.g. {DEFAULT_LEASE})")
    return namespace, name


def lease_path(namespace: str, name: str) -> str:
    return resource_path("coordination.k8s.io/v1", "leases", namespace=namespace, name=name)


def judge(lease: RawObject | None, where: str, now: datetime) -> Presence:
    """What the Lease at `where` (None: there is none) says about the controller at `now`."""
    if lease is None:
        return Presence(False, f"no controller holds the Lease {where} (it does not exist)")
    spec = lease.get("spec") or {}
    holder = spec.get("holderIdentity")
    renewed = parse_timestamp(spec.get("renewTime"))
    if not holder:
        return Presence(False, f"no controller holds the Lease {where} (it was given up)")
    if renewed is None:
        return Presence(False, f"the Lease {where} of {holder} was never renewed")
    age = (now - renewed).total_seconds()
    duration = float(spec.get("leaseDurationSeconds") or 15)
    if age > duration + CLOCK_MARGIN_SECONDS:
        return Presence(False, f"the Lease {where} of {holder} expired: last renewed {age:.0f}s ago")
    return Presence(True, f"controller {holder} holds the Lease {where}")


async def presence(api: KubeApi, namespace: str, name: str, now: datetime) -> Presence:
    where = f"{namespace}/{name}"
    try:
        lease = await api.get(lease_path(namespace, name))
    except KubeApiError as error:
        if error.not_found:
            return judge(None, where, now)
        return Presence(None, f"cannot read the Lease {where}: {error.status} {error.reason}")
    return judge(lease, where, now)
