"""What a node runs in place of its provider: the `placement` node wrapper's answer, asked by name."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from vk_provider import plugins
from vk_provider.provider import PodLifecycle, ProviderContext
from vk_providers.mock import MockProvider


def context(tmp_path: Path) -> ProviderContext:
    return ProviderContext("node-a", {}, "10.0.0.1", tmp_path)


def install_wrappers(monkeypatch: pytest.MonkeyPatch, **wrappers: Callable[..., Any]) -> None:
    """Install exactly `wrappers` as node wrappers (by entry-point name); the providers stay as they are."""
    installed = plugins.entry_points

    def entry_points(*, group: str) -> Any:
        if group != plugins.NODE_WRAPPER_GROUP:
            return installed(group=group)
        return [
            SimpleNamespace(name=name, value=f"tests:{name}", load=lambda wrap=wrap: wrap)
            for name, wrap in wrappers.items()
        ]

    monkeypatch.setattr(plugins, "entry_points", entry_points)


def test_the_placement_wrapper_is_asked_with_the_name_the_context_and_the_provider_built(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    asked: list[tuple[str, ProviderContext, PodLifecycle]] = []
    wrapped = MockProvider(context(tmp_path))

    def placement(name: str, node_context: ProviderContext, provider: PodLifecycle) -> PodLifecycle:
        asked.append((name, node_context, provider))
        return wrapped

    def other(name: str, node_context: ProviderContext, provider: PodLifecycle) -> PodLifecycle:
        raise AssertionError("only the wrapper named placement is asked")

    install_wrappers(monkeypatch, other=other, placement=placement)
    assert plugins.build_for_node("mock", context(tmp_path)) is wrapped
    [(name, node_context, provider)] = asked
    assert (name, node_context, type(provider)) == ("mock", context(tmp_path), MockProvider)


def test_without_a_placement_wrapper_the_node_runs_its_provider_as_it_is_and_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    install_wrappers(monkeypatch)
    with caplog.at_level(logging.WARNING, logger=plugins.__name__):
        assert isinstance(plugins.build_for_node("mock", context(tmp_path)), MockProvider)
    assert "no 'placement' node wrapper is installed" in caplog.text


def test_a_wrapper_that_returns_no_provider_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    install_wrappers(monkeypatch, placement=lambda name, node_context, provider: object())
    with pytest.raises(
        TypeError, match=r"provider 'mock' \(tests:placement\) does not implement PodLifecycle"
    ):
        plugins.build_for_node("mock", context(tmp_path))
