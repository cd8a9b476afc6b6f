"""Proof that one of our node daemons published an away pod's traffic address.

The router sends an away pod's traffic where the pod's status says (the `TrafficAddress` condition)
and authenticates it as the pod's `TrafficAuth` marker says. Kubernetes narrows who may write a pod's
status (the pod's own node under NodeRestriction, and whoever RBAC grants `pods/status`), and the
router takes only pods bound to Nodes with our label, which no kubelet may set on itself; but anyone
RBAC lets patch `pods/status` (a cluster-wide operator, a compromised controller) or label Nodes could
still publish an address pointing anywhere. So the node seals what it publishes: an HMAC-SHA256, keyed
by a secret only the node's and the router's ServiceAccounts may read, over the pod's UID, the address
and the marker, written beside them as a third condition (`TrafficSignature`). The router takes an
address only when its seal verifies.

- Bound to the pod's UID: a seal copied onto another pod (one bound to a Node labelled like ours, say)
  does not verify there.
- Over the marker too: a forged marker on a sealed address (signing for S3 with the router's
  credentials) breaks the seal.
- The key lives in a Secret (`vk-provider-traffic-key`, in the node's and router's namespace), its
  current key under `key` and, while a rotation is under way, the one before under `previous`: the
  router accepts both, the node seals with `key`. A node creates the Secret (32 random bytes) when it
  is missing; the first creation wins, and every node and router reads that one.
- A seal reads `v1 <key id> <signature>`: the key id (the first 16 hex digits of the key's SHA-256)
  says which key made it without revealing it; the signature is base64url without padding.

Pure: no I/O. Reading and creating the Secret is the node's (`vk_provider.node.traffickey`) and the
router's (`vk_provider.routetable.feed`) business.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from vk_provider.kit.kubeconfigs import SERVICE_ACCOUNT_NAMESPACE_FILE, pod_namespace

DEFAULT_SECRET_NAME: Final = "vk-provider-traffic-key"  # noqa: S105 - a Secret's name, not its value
KEY_FIELD: Final = "key"
"""The Secret's entry the node seals with."""
PREVIOUS_KEY_FIELD: Final = "previous"
"""An entry the router still accepts seals of, while the nodes move to a new `key`."""
KEY_BYTES: Final = 32
"""As long as the HMAC's hash output: a longer key adds nothing, a shorter one weakens it."""
MIN_KEY_BYTES: Final = 16
"""A key given by hand may be shorter than the generated one, not shorter than this."""
SEAL_VERSION: Final = "v1"
OUTSIDE_A_POD_NAMESPACE: Final = "default"
"""Where the key lives for daemons that run outside a pod and are told nothing: the namespace every
cluster has, so that a node and a router started by hand on one machine find the same Secret."""


@dataclasses.dataclass(frozen=True)
class TrafficKey:
    """One key of the Secret."""

    secret: bytes = dataclasses.field(repr=False)

    def __post_init__(self) -> None:
        if len(self.secret) < MIN_KEY_BYTES:
            raise ValueError(f"a traffic key needs at least {MIN_KEY_BYTES} bytes, got {len(self.secret)}")

    @property
    def key_id(self) -> str:
        return hashlib.sha256(self.secret).hexdigest()[:16]

    @classmethod
    def generate(cls) -> TrafficKey:
        return cls(secrets.token_bytes(KEY_BYTES))


@dataclasses.dataclass(frozen=True)
class SecretLocation:
    """Where the traffic key lives: `namespace/name`."""

    namespace: str
    name: str = DEFAULT_SECRET_NAME

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def secret_location(
    text: str | None, namespace_file: Path = SERVICE_ACCOUNT_NAMESPACE_FILE
) -> SecretLocation:
    """`NAMESPACE/NAME` as given; else `vk-provider-traffic-key` in the pod's own namespace (its service
    account mount), or in `default` outside a pod. ValueError for text that is not `NAMESPACE/NAME`."""
    if text:
        namespace, separator, name = text.partition("/")
        if not separator or not namespace or not name or "/" in name:
            raise ValueError(f"expected NAMESPACE/NAME for the traffic key Secret, got {text!r}")
        return SecretLocation(namespace, name)
    return SecretLocation(pod_namespace(namespace_file) or OUTSIDE_A_POD_NAMESPACE)


def secret_body(location: SecretLocation, key: TrafficKey) -> dict[str, Any]:
    """A new Secret holding `key` as the current one."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": location.name,
            "namespace": location.namespace,
            "labels": {"app.kubernetes.io/part-of": "vk-provider"},
        },
        "type": "Opaque",
        "data": {KEY_FIELD: base64.b64encode(key.secret).decode()},
    }


def keys_of(secret: Mapping[str, Any]) -> tuple[TrafficKey, ...]:
    """The keys a Secret holds, current first; ValueError naming what is wrong with one."""
    data = secret.get("data") or {}
    keys = []
    for field in (KEY_FIELD, PREVIOUS_KEY_FIELD):
        encoded = data.get(field)
        if not encoded:
            if field == KEY_FIELD:
                raise ValueError(f"the traffic key Secret has no {KEY_FIELD!r} entry")
            continue
        try:
            keys.append(TrafficKey(base64.b64decode(encoded, validate=True)))
        except (binascii.Error, ValueError) as error:
            raise ValueError(f"the traffic key Secret's {field!r} entry is unusable: {error}") from error
    return tuple(keys)


def seal(key: TrafficKey, *, uid: str, address: str, marker: str) -> str:
    """The seal of a pod's traffic address and auth marker (empty when it has none)."""
    return f"{SEAL_VERSION} {key.key_id} {_encode(_mac(key, uid, address, marker))}"


def seal_refusal(
    keys: Sequence[TrafficKey], seal_text: str, *, uid: str, address: str, marker: str
) -> str | None:
    """Why `seal_text` does not prove that a node holding one of `keys` published this address and
    marker for the pod `uid`; None when it does."""
    if not keys:
        return "the router holds no traffic key to verify it with"
    if not seal_text.strip():
        return "it carries no seal (no TrafficSignature condition)"
    version, _, rest = seal_text.strip().partition(" ")
    key_id, _, signature = rest.partition(" ")
    if version != SEAL_VERSION or not key_id or not signature:
        return f"its seal is not '{SEAL_VERSION} <key id> <signature>'"
    key = next((key for key in keys if key.key_id == key_id), None)
    if key is None:
        return f"its seal was made with key {key_id}, which the router does not hold"
    if not hmac.compare_digest(_encode(_mac(key, uid, address, marker)), signature.strip()):
        return "its seal does not match its address, marker and UID"
    return None


def _mac(key: TrafficKey, uid: str, address: str, marker: str) -> bytes:
    # A JSON list: fields cannot run into each other, whatever characters they hold.
    message = json.dumps([SEAL_VERSION, uid, address.strip(), marker.strip()]).encode()
    return hmac.new(key.secret, message, hashlib.sha256).digest()


def _encode(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")
