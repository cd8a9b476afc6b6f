"""ServiceAccount tokens for pods whose provider mounts them, requested and rotated as the kubelet does.

Each projected `serviceAccountToken` source gets a bound token from the TokenRequest API: for the pod's
ServiceAccount, bound to the pod (deleting the pod revokes it), with the source's audience and lifetime.
The kubelet's token manager replaces a token once it has lived 80% of its lifetime, or 24 hours; so
does this, with the fraction a node setting (`token_refresh_fraction`) so tests need not wait minutes:
the API refuses lifetimes under 10 minutes. The lifetime counted is the shorter of the one asked for and
the one granted (the API server may extend the default 3607 s token for old clients).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from vk_provider.kit.kube import KubeApi

MAX_TOKEN_AGE_SECONDS = 24 * 3600.0
"""A token older than this is replaced whatever its lifetime (the kubelet's rule)."""


class ServiceAccountTokens:
    """Requests tokens (`environment.TokenIssuer`) and remembers when each pod's first one is due."""

    def __init__(
        self,
        api: KubeApi,
        *,
        refresh_fraction: float = 0.8,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = api
        self._refresh_fraction = refresh_fraction
        self._clock = clock
        self._due: dict[str, float] = {}
        """When the earliest token handed for each pod must be replaced (the clock's time), by UID."""

    async def service_account_token(
        self, pod: Mapping[str, Any], *, audience: str, expiration_seconds: int
    ) -> bytes:
        metadata = pod["metadata"]
        account = (pod.get("spec") or {}).get("serviceAccountName") or "default"
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "audiences": [audience] if audience else [],
                "expirationSeconds": expiration_seconds,
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": metadata["name"],
                    "uid": metadata["uid"],
                },
            },
        }
        path = f"/api/v1/namespaces/{metadata['namespace']}/serviceaccounts/{account}/token"
        asked_at = self._clock()
        answer = await self._api.create(path, body)
        status = answer.get("status") or {}
        token = str(status.get("token") or "")
        if not token:
            raise ValueError(f"the TokenRequest for {path} came back without a token")
        granted = _seconds_until(str(status.get("expirationTimestamp") or ""))
        lifetime = min(float(expiration_seconds), granted if granted is not None else math.inf)
        due = asked_at + min(lifetime * self._refresh_fraction, MAX_TOKEN_AGE_SECONDS)
        uid = str(metadata["uid"])
        self._due[uid] = min(self._due.get(uid, math.inf), due)
        return token.encode()

    def start_over(self, uid: str) -> None:
        """Forget the pod's tokens: called before all of them are requested again, or when it is gone."""
        self._due.pop(uid, None)

    def seconds_until_due(self, uid: str) -> float | None:
        """Seconds until the pod's tokens must be replaced (0 when overdue); None if it has none."""
        due = self._due.get(uid)
        return None if due is None else max(0.0, due - self._clock())


def _seconds_until(timestamp: str) -> float | None:
    try:
        moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (moment - datetime.now(UTC)).total_seconds()
