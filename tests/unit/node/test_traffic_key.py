"""The node's traffic key: read from its Secret, the Secret created when missing (the first creation
wins), and a failure reported once per cause while the node asks again.

Against a recording stand-in for the KubeApi wrapper; the real apiserver's side (RBAC, the Secret
created once by many nodes) is tested in tests/integration/test_router_seals.py.
"""

from __future__ import annotations

import base64
from typing import Any

from vk_provider.kit.kube import KubeApiError
from vk_provider.kit.traffic_signature import KEY_BYTES, SecretLocation, TrafficKey, secret_body
from vk_provider.node.traffickey import current_key, wait_for_key

LOCATION = SecretLocation("vk-provider-system")
SECRET_PATH = "/api/v1/namespaces/vk-provider-system/secrets/vk-provider-traffic-key"


class SecretsApi:
    """Answers GETs from `answers` in turn (an exception is raised); records creations."""

    def __init__(
        self, *answers: dict[str, Any] | KubeApiError, create_error: KubeApiError | None = None
    ) -> None:
        self.answers = list(answers)
        self.created: list[tuple[str, dict[str, Any]]] = []
        self.create_error = create_error

    async def get(self, path: str) -> dict[str, Any]:
        assert path == SECRET_PATH
        answer = self.answers.pop(0)
        if isinstance(answer, KubeApiError):
            raise answer
        return answer

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.created.append((path, body))
        if self.create_error is not None:
            raise self.create_error
        return body


NOT_FOUND = KubeApiError(404, "Not Found", "secrets not found")
FORBIDDEN = KubeApiError(403, "Forbidden", "cannot get resource secrets")
EXISTING = TrafficKey(b"someone else's key, 32 bytes ok!")


async def test_an_existing_secret_is_read_and_nothing_is_created() -> None:
    api = SecretsApi(secret_body(LOCATION, EXISTING))
    assert await current_key(api, LOCATION) == EXISTING  # type: ignore[arg-type]
    assert api.created == []


async def test_a_missing_secret_is_created_with_a_fresh_random_key() -> None:
    api = SecretsApi(NOT_FOUND)
    key = await current_key(api, LOCATION)  # type: ignore[arg-type]
    ((path, body),) = api.created
    assert path == "/api/v1/namespaces/vk-provider-system/secrets"
    assert body["metadata"]["name"] == "vk-provider-traffic-key"
    assert base64.b64decode(body["data"]["key"]) == key.secret
    assert len(key.secret) == KEY_BYTES
    assert key != await current_key(SecretsApi(NOT_FOUND), LOCATION)  # type: ignore[arg-type]


async def test_when_another_node_created_it_first_its_key_is_used() -> None:
    api = SecretsApi(
        NOT_FOUND, secret_body(LOCATION, EXISTING), create_error=KubeApiError(409, "Conflict", "exists")
    )
    assert await current_key(api, LOCATION) == EXISTING  # type: ignore[arg-type]


async def test_a_refusal_is_reported_once_and_asked_again_until_the_key_is_read() -> None:
    api = SecretsApi(FORBIDDEN, FORBIDDEN, {"data": {}}, secret_body(LOCATION, EXISTING))
    reports: list[str] = []
    key = await wait_for_key(
        api,  # type: ignore[arg-type]
        LOCATION,
        report=reports.append,
        initial_seconds=0.001,
        max_seconds=0.001,
    )
    assert key == EXISTING
    assert len(reports) == 2  # the 403 once, then the Secret without a key
    assert "403 Forbidden" in reports[0]
    assert "vk-provider-system/vk-provider-traffic-key" in reports[0]
    assert "no 'key' entry" in reports[1]
