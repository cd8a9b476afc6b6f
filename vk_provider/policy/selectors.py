"""Kubernetes label selectors (`matchLabels` + `matchExpressions`): read, matched, and written as a query.

The policy lists Offloads, nodes and namespaces by selector on the apiserver (the query string) and
matches objects it already holds against the same selector (`matches`), so both agree by construction.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})


class InvalidSelector(ValueError):
    """The selector cannot be used as written; the message names the field."""


@dataclasses.dataclass(frozen=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        if self.operator == "In":
            return labels.get(self.key) in self.values
        return labels.get(self.key) not in self.values  # NotIn: an absent label is not in the set

    def query(self) -> str:
        if self.operator == "Exists":
            return self.key
        if self.operator == "DoesNotExist":
            return f"!{self.key}"
        word = "in" if self.operator == "In" else "notin"
        return f"{self.key} {word} ({','.join(self.values)})"


@dataclasses.dataclass(frozen=True)
class LabelSelector:
    match_labels: tuple[tuple[str, str], ...] = ()
    expressions: tuple[Requirement, ...] = ()

    @property
    def empty(self) -> bool:
        """An empty selector selects everything."""
        return not self.match_labels and not self.expressions

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        present = labels or {}
        return all(present.get(key) == value for key, value in self.match_labels) and all(
            requirement.matches(present) for requirement in self.expressions
        )

    def query(self) -> str:
        """The `labelSelector` query parameter ("" selects everything)."""
        parts = [f"{key}={value}" for key, value in self.match_labels]
        parts += [requirement.query() for requirement in self.expressions]
        return ",".join(parts)


def parse_selector(raw: Any, field: str) -> LabelSelector:
    """A LabelSelector from its API form; None or {} is the empty selector."""
    if raw is None:
        return LabelSelector()
    if not isinstance(raw, Mapping):
        raise InvalidSelector(f"{field} must be a label selector (matchLabels/matchExpressions)")
    labels = raw.get("matchLabels") or {}
    if not isinstance(labels, Mapping) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in labels.items()
    ):
        raise InvalidSelector(f"{field}.matchLabels must map label keys to string values")
    expressions = []
    for index, item in enumerate(raw.get("matchExpressions") or ()):
        where = f"{field}.matchExpressions[{index}]"
        if not isinstance(item, Mapping) or not isinstance(item.get("key"), str) or not item["key"]:
            raise InvalidSelector(f"{where} needs a key")
        operator = item.get("operator")
        if operator not in OPERATORS:
            raise InvalidSelector(f"{where}.operator must be one of {sorted(OPERATORS)}, not {operator!r}")
        values = tuple(str(value) for value in item.get("values") or ())
        if operator in ("In", "NotIn") and not values:
            raise InvalidSelector(f"{where}: operator {operator} needs values")
        if operator in ("Exists", "DoesNotExist") and values:
            raise InvalidSelector(f"{where}: operator {operator} takes no values")
        expressions.append(Requirement(item["key"], operator, values))
    return LabelSelector(tuple(sorted(labels.items())), tuple(expressions))
