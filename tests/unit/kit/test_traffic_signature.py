"""Seals of traffic addresses: what they bind, the keys a Secret holds, where the Secret is."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from vk_provider.kit.traffic_signature import (
    SecretLocation,
    TrafficKey,
    keys_of,
    seal,
    seal_refusal,
    secret_body,
    secret_location,
)

KEY = TrafficKey(b"k" * 32)
NEXT = TrafficKey(b"n" * 32)
SEALED = {"uid": "u1", "address": "http://10.0.0.1:80", "marker": ""}


def test_a_seal_names_its_key_and_verifies_only_what_it_sealed() -> None:
    text = seal(KEY, **SEALED)
    version, key_id, signature = text.split(" ")
    assert (version, key_id) == ("v1", KEY.key_id)
    assert len(key_id) == 16
    assert KEY.secret.hex() not in text
    assert "=" not in signature
    assert seal_refusal((KEY,), text, **SEALED) is None
    assert seal_refusal((NEXT, KEY), text, **SEALED) is None  # found by its id among several
    # Surrounding blanks are no difference: the router strips what it reads, so does the seal.
    assert seal_refusal((KEY,), text, **{**SEALED, "address": " http://10.0.0.1:80 "}) is None
    assert seal_refusal((KEY,), text, **{**SEALED, "address": "http://10.0.0.1:81"}) is not None
    assert seal_refusal((NEXT,), text, **SEALED) == (
        f"its seal was made with key {KEY.key_id}, which the router does not hold"
    )


def test_fields_cannot_be_shifted_into_one_another() -> None:
    """An address ending where a marker begins must not seal like another split of the same text."""
    one = seal(KEY, uid="u1", address="http://a", marker="b")
    assert seal_refusal((KEY,), one, uid="u1", address="http://ab", marker="") is not None


def test_a_secret_holds_the_current_key_and_maybe_the_previous_one() -> None:
    body = secret_body(SecretLocation("ns"), NEXT)
    assert keys_of(body) == (NEXT,)
    body["data"]["previous"] = base64.b64encode(KEY.secret).decode()
    assert keys_of(body) == (NEXT, KEY)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({}, "no 'key' entry"),
        ({"key": "not base64!"}, "'key' entry is unusable"),
        ({"key": base64.b64encode(b"short").decode()}, "at least 16 bytes"),
        ({"key": base64.b64encode(b"k" * 32).decode(), "previous": "%%"}, "'previous' entry is unusable"),
    ],
)
def test_an_unusable_secret_says_what_is_wrong(data: dict[str, str], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        keys_of({"data": data})


def test_the_secret_is_where_it_is_told_else_in_the_pods_namespace_else_in_default(tmp_path: Path) -> None:
    own = tmp_path / "namespace"
    own.write_text("vk-provider-system\n")
    assert secret_location("ns/name", own) == SecretLocation("ns", "name")
    assert secret_location(None, own) == SecretLocation("vk-provider-system", "vk-provider-traffic-key")
    assert secret_location("", tmp_path / "missing") == SecretLocation("default")
    for bad in ("name", "/name", "ns/", "a/b/c"):
        with pytest.raises(ValueError, match="NAMESPACE/NAME"):
            secret_location(bad, own)
