"""Selector strings evaluated on cached objects answer what the apiserver would."""

from __future__ import annotations

import pytest

from vk_provider._kube.selectorquery import InvalidSelectorQuery, field_matcher, label_matcher, required_label

LABELS = {"app": "web", "tier": "gpu", "pool": "a"}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("", True),
        ("app=web", True),
        ("app==web", True),
        ("app=api", False),
        ("app!=api", True),
        ("missing!=x", True),  # an absent label is not equal to anything
        ("tier in (gpu, cpu)", True),
        ("tier in (cpu)", False),
        ("tier notin (cpu)", True),
        ("missing notin (cpu)", True),
        ("app", True),
        ("missing", False),
        ("!missing", True),
        ("!app", False),
        ("app=web,tier in (gpu,cpu),!missing", True),
        ("app=web,tier notin (gpu)", False),
        ("batch.kubernetes.io/job-name=train", False),
    ],
)
def test_label_selectors_match_as_the_apiserver_does(selector: str, expected: bool) -> None:
    assert label_matcher(selector)(LABELS) is expected


@pytest.mark.parametrize("selector", ["app in (a", "app=web)", "a b c", "=x"])
def test_a_selector_the_apiserver_would_refuse_is_an_error(selector: str) -> None:
    with pytest.raises(InvalidSelectorQuery):
        label_matcher(selector)


def test_field_selectors_on_the_fields_callers_use() -> None:
    running = {"metadata": {"name": "p", "namespace": "ns"}, "status": {"phase": "Running"}, "spec": {}}
    done = {"metadata": {"name": "q", "namespace": "ns"}, "status": {"phase": "Succeeded"}, "spec": {}}
    unfinished = field_matcher("status.phase!=Succeeded,status.phase!=Failed")
    assert unfinished is not None
    assert unfinished(running)
    assert not unfinished(done)
    unbound = field_matcher("spec.nodeName=")
    assert unbound is not None
    assert unbound(running)
    named = field_matcher("metadata.name=q")
    assert named is not None
    assert named(done)
    assert not named(running)


def test_a_field_the_cache_cannot_evaluate_is_left_to_the_apiserver() -> None:
    assert field_matcher("spec.schedulerName=default-scheduler") is None


@pytest.mark.parametrize(
    ("selector", "required"),
    [
        ("app=web", ("app", "web")),
        ("tier!=db, app == web", ("app", "web")),
        ("env in (a), app=web,x", ("app", "web")),
        ("app!=web,x", None),
        ("app in (a,b)", None),
        ("", None),
        (None, None),
    ],
)
def test_the_value_a_selector_requires_is_what_an_index_can_narrow_by(
    selector: str | None, required: tuple[str, str] | None
) -> None:
    assert required_label(selector) == required
    if required is not None and selector is not None:
        assert not label_matcher(selector)({"x": "1", "env": "a"})  # without it nothing matches
