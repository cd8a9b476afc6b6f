"""The strings the product's code spells, with the module constants they are built from filled in.

The catalogue tests (tests/unit/docs) compare what the code names with what `vk_provider.catalogue`
lists. Keys and reasons are rarely bare literals at the point of use: `f"{GROUP}/promote"`,
`PREFIX + "gpu-types"`, a constant imported from another module. So each module's constants are
resolved (through `from ... import` too) and every string expression is evaluated as far as constants
go; a part that is not a constant (a variable, a call) reads as `{}`.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SOURCES = (ROOT / "vk_provider", ROOT / "providers" / "vk_providers")
UNKNOWN = "{}"


@dataclasses.dataclass(frozen=True)
class Spelled:
    text: str
    path: Path
    line: int

    @property
    def where(self) -> str:
        return f"{_shown(self.path)}:{self.line}"


def _module_name(path: Path, root: Path) -> str:
    """`vk_provider.offload.names` for vk_provider/offload/names.py: the path under the package's
    parent (providers/ for vk_providers), as Python imports it."""
    dotted = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(part for part in dotted if part != "__init__")


def _shown(path: Path) -> str:
    """A path as a message shows it: from the repository's root when it is in the repository."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


class Code:
    """Every module under `roots`, parsed once."""

    def __init__(self, roots: tuple[Path, ...] = SOURCES) -> None:
        self.trees: dict[str, tuple[Path, ast.Module]] = {}
        for root in roots:
            for path in sorted(root.rglob("*.py")):
                if not path.name.endswith("_pb2.py"):
                    self.trees[_module_name(path, root)] = (path, ast.parse(path.read_text(), str(path)))
        self._resolving: set[tuple[str, str]] = set()

    @cached_property
    def _assignments(self) -> dict[str, dict[str, ast.expr]]:
        found: dict[str, dict[str, ast.expr]] = {}
        for module, (_, tree) in self.trees.items():
            names = found.setdefault(module, {})
            for statement in tree.body:
                if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                    target = statement.targets[0]
                    if isinstance(target, ast.Name):
                        names[target.id] = statement.value
                elif (
                    isinstance(statement, ast.AnnAssign)
                    and isinstance(statement.target, ast.Name)
                    and statement.value is not None
                ):
                    names[statement.target.id] = statement.value
        return found

    @cached_property
    def _imports(self) -> dict[str, dict[str, tuple[str, str]]]:
        found: dict[str, dict[str, tuple[str, str]]] = {}
        for module, (_, tree) in self.trees.items():
            names = found.setdefault(module, {})
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
                    for alias in node.names:
                        names[alias.asname or alias.name] = (node.module, alias.name)
        return found

    def constant(self, module: str, name: str) -> str | None:
        """The value of the module-level string constant `name` as `module` sees it, or None."""
        key = (module, name)
        if key in self._resolving:
            return None
        self._resolving.add(key)
        try:
            value = self._assignments.get(module, {}).get(name)
            if value is not None:
                text = self.evaluate(module, value)
                return None if text is None or UNKNOWN in text else text
            imported = self._imports.get(module, {}).get(name)
            if imported is not None and imported[0] in self.trees:
                return self.constant(*imported)
            return None
        finally:
            self._resolving.discard(key)

    def evaluate(self, module: str, node: ast.expr) -> str | None:
        """The string `node` makes, constants filled in and anything else as `{}`; None if it is no
        string expression at all."""
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, str) else None
        if isinstance(node, ast.Name):
            return self.constant(module, node.id)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            return self._module_constant(module, node.value.id, node.attr)
        if isinstance(node, ast.JoinedStr):
            return self._joined(module, node)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self._sum(module, node)
        return None

    def _module_constant(self, module: str, name: str, attribute: str) -> str | None:
        """`traffickey.KEY_UNAVAILABLE_REASON`, after `from vk_provider.node import traffickey`."""
        imported = self._imports.get(module, {}).get(name)
        dotted = "" if imported is None else ".".join(imported)
        return self.constant(dotted, attribute) if dotted in self.trees else None

    def _sum(self, module: str, node: ast.BinOp) -> str | None:
        left, right = self.evaluate(module, node.left), self.evaluate(module, node.right)
        if left is None and right is None:
            return None
        return (left if left is not None else UNKNOWN) + (right if right is not None else UNKNOWN)

    def _joined(self, module: str, node: ast.JoinedStr) -> str:
        parts = []
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                inner = self.evaluate(module, value.value)
                parts.append(UNKNOWN if inner is None or value.format_spec is not None else inner)
            else:
                parts.append(self.evaluate(module, value) or "")
        return "".join(parts)

    def alternatives(self, module: str, node: ast.expr) -> list[str]:
        """Every string `node` may make: both branches of a conditional, each operand of an `or`;
        what is not a string expression at all reads as `{}`."""
        if isinstance(node, ast.IfExp):
            return [*self.alternatives(module, node.body), *self.alternatives(module, node.orelse)]
        if isinstance(node, ast.BoolOp):
            return [text for value in node.values for text in self.alternatives(module, value)]
        text = self.evaluate(module, node)
        return [UNKNOWN if text is None else text]

    def strings(self) -> Iterator[Spelled]:
        """Every string expression of the code (the outermost one where they nest), evaluated."""
        for module, (path, tree) in self.trees.items():
            yield from self._strings_in(module, path, tree)

    def _strings_in(self, module: str, path: Path, node: ast.AST) -> Iterator[Spelled]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Expr) and isinstance(child.value, ast.Constant):
                continue  # a docstring: prose, not a name the code uses
            if isinstance(child, (ast.Constant, ast.JoinedStr, ast.BinOp)):
                text = self.evaluate(module, child)
                if text is not None:
                    yield Spelled(text, path, child.lineno)
                    continue
            yield from self._strings_in(module, path, child)

    def calls(self) -> Iterator[Call]:
        """Every call in the code, with where it is: its module and the function around it."""
        for module, (path, tree) in self.trees.items():
            yield from self._calls_in(module, path, tree, "<module>")

    def _calls_in(self, module: str, path: Path, node: ast.AST, function: str) -> Iterator[Call]:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if isinstance(child, ast.Call):
                yield Call(module, path, function, child)
            yield from self._calls_in(module, path, child, inner)


@dataclasses.dataclass(frozen=True)
class Call:
    module: str
    path: Path
    function: str
    """The name of the innermost function the call is in (`<module>` at the top level)."""
    node: ast.Call

    @property
    def name(self) -> str:
        """What is called: `record` for `self._events.record(...)`, `Refusal` for `Refusal(...)`."""
        func = self.node.func
        if isinstance(func, ast.Attribute):
            return func.attr
        return func.id if isinstance(func, ast.Name) else ""

    @property
    def site(self) -> str:
        """Where it is, stable across edits that move lines: `vk_provider/node/pods.py::_failed`."""
        return f"{_shown(self.path)}::{self.function}"
