"""Label and field selectors in their query-string form, evaluated on objects a cache already holds.

A cached read (`vk_provider._kube.informers`) answers the same `labelSelector` and `fieldSelector`
strings the apiserver would, so a caller cannot tell the two apart. Label selectors follow the
apiserver's grammar: `key=value` (`==` too), `key!=value`, `key in (a,b)`, `key notin (a,b)`, `key`
and `!key`, joined by commas. Field selectors support the fields callers here use (`metadata.name`,
`metadata.namespace`, `status.phase`, `spec.nodeName`) with `=`, `==` and `!=`; any other field makes
`field_matcher` return None, so the caller asks the apiserver instead of guessing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

LabelMatcher = Callable[[Mapping[str, str]], bool]
ObjectMatcher = Callable[[Mapping[str, Any]], bool]

_SET_EXPRESSION = re.compile(r"^(?P<key>[^\s!=(),]+)\s+(?P<operator>in|notin)\s*\((?P<values>[^()]*)\)$")
_EQUALITY = re.compile(r"^(?P<key>[^\s!=(),]+)\s*(?P<operator>==|=|!=)\s*(?P<value>[^\s!=(),]*)$")
_EXISTS = re.compile(r"^(?P<negated>!?)\s*(?P<key>[^\s!=(),]+)$")
_FIELDS: Mapping[str, tuple[str, ...]] = {
    "metadata.name": ("metadata", "name"),
    "metadata.namespace": ("metadata", "namespace"),
    "status.phase": ("status", "phase"),
    "spec.nodeName": ("spec", "nodeName"),
}


class InvalidSelectorQuery(ValueError):
    """The selector string is not one the apiserver would accept."""


def _terms(text: str) -> list[str]:
    """Split on the commas outside parentheses (`a in (x,y),b` is two terms)."""
    terms: list[str] = []
    depth = 0
    current: list[str] = []
    for character in text:
        if character == "(":
            depth += 1
        elif character == ")":
            depth -= 1
            if depth < 0:
                raise InvalidSelectorQuery(f"unbalanced parentheses in {text!r}")
        if character == "," and depth == 0:
            terms.append("".join(current).strip())
            current = []
            continue
        current.append(character)
    if depth:
        raise InvalidSelectorQuery(f"unbalanced parentheses in {text!r}")
    terms.append("".join(current).strip())
    return [term for term in terms if term]


def _label_term(term: str) -> LabelMatcher:
    if match := _SET_EXPRESSION.match(term):
        key = match["key"]
        values = frozenset(value.strip() for value in match["values"].split(",") if value.strip())
        if match["operator"] == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values  # notin: an absent label is not in the set
    if match := _EQUALITY.match(term):
        key, value = match["key"], match["value"]
        if match["operator"] == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    if match := _EXISTS.match(term):
        key = match["key"]
        if match["negated"]:
            return lambda labels: key not in labels
        return lambda labels: key in labels
    raise InvalidSelectorQuery(f"cannot read the label selector term {term!r}")


def label_matcher(text: str | None) -> LabelMatcher:
    """Whether a set of labels matches the `labelSelector` string ("" or None matches everything)."""
    matchers = [_label_term(term) for term in _terms(text or "")]
    return lambda labels: all(matcher(labels) for matcher in matchers)


def required_label(text: str | None) -> tuple[str, str] | None:
    """A (key, value) every match must carry, from the selector's first `key=value` term: what an
    index by label can narrow a search to. None when no term requires one value."""
    for term in _terms(text or ""):
        match = _EQUALITY.match(term)
        if match is not None and match["operator"] != "!=":
            return match["key"], match["value"]
    return None


def _field_value(obj: Mapping[str, Any], path: tuple[str, ...]) -> str:
    value: Any = obj
    for part in path:
        value = value.get(part) if isinstance(value, Mapping) else None
    return "" if value is None else str(value)


def field_matcher(text: str | None) -> ObjectMatcher | None:
    """Whether an object matches the `fieldSelector` string, or None when a field is not one this
    module evaluates (the apiserver then has to answer)."""
    checks: list[tuple[tuple[str, ...], bool, str]] = []
    for term in _terms(text or ""):
        match = _EQUALITY.match(term)
        if match is None:
            raise InvalidSelectorQuery(f"cannot read the field selector term {term!r}")
        path = _FIELDS.get(match["key"])
        if path is None:
            return None
        checks.append((path, match["operator"] == "!=", match["value"]))
    return lambda obj: all((_field_value(obj, path) == value) != negated for path, negated, value in checks)
