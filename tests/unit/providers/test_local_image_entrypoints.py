"""Which configured entrypoint a `local` container without a command runs: its image's own key, else
its repository's (so a digest-pinned image of a release runs as its tag does)."""

from __future__ import annotations

import pytest

from vk_providers.local.config import entrypoint_for, image_repository

pytestmark = pytest.mark.unit

DIGEST = "sha256:" + "0" * 64


@pytest.mark.parametrize(
    ("image", "repository"),
    [
        ("vk-provider", "vk-provider"),
        ("vk-provider:0.1.0", "vk-provider"),
        (f"vk-provider@{DIGEST}", "vk-provider"),
        (f"ghcr.io/acme/vk-provider:0.1.0@{DIGEST}", "ghcr.io/acme/vk-provider"),
        ("registry.local:5000/team/app", "registry.local:5000/team/app"),
        ("registry.local:5000/team/app:2", "registry.local:5000/team/app"),
    ],
)
def test_the_repository_is_the_image_without_tag_and_digest(image: str, repository: str) -> None:
    assert image_repository(image) == repository


def test_an_exact_key_wins_and_a_repository_key_takes_every_tag_and_digest() -> None:
    entrypoints = {"app": ("by-repository",), "app:debug": ("exact",)}
    assert entrypoint_for("app:debug", entrypoints) == ("exact",)
    assert entrypoint_for("app:1.0", entrypoints) == ("by-repository",)
    assert entrypoint_for(f"app@{DIGEST}", entrypoints) == ("by-repository",)
    assert entrypoint_for("other/app:1.0", entrypoints) is None
    assert entrypoint_for("app:1.0", {"app:debug": ("exact",)}) is None  # a tag's key is not its repository's
