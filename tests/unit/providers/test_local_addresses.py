"""Pod addresses and settings of the local provider: loopback only, stable per UID, reused last."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from vk_provider.errors import TemporaryProviderError
from vk_providers.local.addresses import AddressBook
from vk_providers.local.config import is_local_range, parse_settings

from .local_support import eventually, local_provider, pod, shell, wait_for_pod


def test_addresses_are_stable_per_uid_and_survive_a_new_book(tmp_path: Path) -> None:
    book = AddressBook(tmp_path / "addresses.json", ipaddress.IPv4Network("127.5.0.0/24"))
    first, second = book.reserve("one"), book.reserve("two")
    assert (first, second) == ("127.5.0.1", "127.5.0.2")
    assert book.reserve("one") == first
    again = AddressBook(tmp_path / "addresses.json", ipaddress.IPv4Network("127.5.0.0/24"))
    assert again.lookup("one") == first
    assert again.reserve("two") == second


def test_a_released_address_is_handed_out_again_only_after_the_others(tmp_path: Path) -> None:
    book = AddressBook(tmp_path / "addresses.json", ipaddress.IPv4Network("127.5.0.0/29"))
    taken = [book.reserve(f"pod-{index}") for index in range(3)]
    book.release("pod-0")
    assert book.reserve("pod-3") == "127.5.0.4"
    assert book.reserve("pod-4") == "127.5.0.5"
    assert book.reserve("pod-5") == "127.5.0.6"
    assert book.reserve("pod-6") == taken[0]
    with pytest.raises(TemporaryProviderError):
        book.reserve("pod-7")


def test_127_0_0_1_is_never_handed_out(tmp_path: Path) -> None:
    book = AddressBook(tmp_path / "addresses.json", ipaddress.IPv4Network("127.0.0.0/30"))
    assert book.reserve("only") == "127.0.0.2"
    with pytest.raises(TemporaryProviderError):
        book.reserve("another")


@pytest.mark.parametrize(
    "config",
    [
        {"address_range": "203.0.113.0/24"},
        {"address_range": "not a network"},
        {"restart_backoff_initial_seconds": -1},
        {"capacity": ["nvidia.com/gpu"]},
        {"image_entrypoints": {"tokens": "python -m tokens"}},  # a string, not an argv list
        {"image_entrypoints": {"tokens": []}},
    ],
)
def test_wrong_settings_are_refused_with_the_key_named(config: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=next(iter(config))):
        parse_settings(config)


def test_a_range_outside_loopback_is_accepted_only_when_this_host_routes_it_to_itself() -> None:
    # 203.0.113.0/24 (TEST-NET-3) is never local; 127.0.0.0/8 always is.
    assert not is_local_range(ipaddress.IPv4Network("203.0.113.0/24"))
    assert is_local_range(ipaddress.IPv4Network("127.9.0.0/24"))
    with pytest.raises(ValueError, match=r"ip route replace local 203\.0\.113\.0/24 dev lo"):
        parse_settings({"address_range": "203.0.113.0/24"})


async def test_a_deleted_pod_is_forgotten_after_the_retention_period(tmp_path: Path) -> None:
    request = pod("fg1", shell("exec sleep 600"))
    async with local_provider(tmp_path, terminated_pod_retention_seconds=0.2) as provider:
        await provider.create_pod(request)
        address = await provider.pod_address(request.ref)
        await wait_for_pod(provider, request.ref, lambda state: state.phase == "Running")
        await provider.delete_pod(request.ref, grace_period_seconds=5)
        await wait_for_pod(provider, request.ref, lambda state: state.terminated)

        async def forgotten() -> bool | None:
            return True if await provider.get_pod_state(request.ref) is None else None

        await eventually(forgotten)
        assert not (tmp_path / "pods" / "fg1").exists()
        assert await provider.pod_address(request.ref) != address  # released, and not reused first
