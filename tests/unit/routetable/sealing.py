"""Away pods' seals for the route table's unit tests: what a node holding `TEST_KEY` writes."""

from __future__ import annotations

from typing import Any

from vk_provider.kit.traffic_signature import SecretLocation, TrafficKey, seal, secret_body
from vk_provider.offload.names import TRAFFIC_SIGNATURE_CONDITION

TEST_KEY = TrafficKey(b"a test key, 32 bytes long, fixed")
OTHER_KEY = TrafficKey(b"another key that no node ever had")
TEST_KEY_SECRET = secret_body(SecretLocation("default"), TEST_KEY)


def seal_condition(uid: str, address: str, marker: str = "", *, key: TrafficKey = TEST_KEY) -> dict[str, Any]:
    """The `TrafficSignature` condition a node holding `key` writes beside this address and marker."""
    return {
        "type": TRAFFIC_SIGNATURE_CONDITION,
        "status": "True",
        "reason": "Published",
        "message": seal(key, uid=uid, address=address, marker=marker),
    }
