"""Old flag names kept working: a deprecated alias sets what its new flag sets, and says so.

Each use prints one line to stderr naming the new flag (`warning: --lease-duration is deprecated, use
--leader-election-lease-duration-seconds`), so a manifest that still carries an old name keeps
working and its log says what to change. The alias is hidden from `--help`. It takes the values its
old flag took: a duration may keep its unit (`30s`) through `flagtypes.seconds_with_unit`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any


def warn_deprecated(old: str, new: str) -> None:
    print(f"warning: {old} is deprecated, use {new}", file=sys.stderr)


class _DeprecatedAlias(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, *, new: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.new = new

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        warn_deprecated(option_string or self.option_strings[0], self.new)
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)


def add_deprecated_alias(
    container: argparse._ActionsContainer,
    old: str,
    new: str,
    *,
    convert: Callable[[str], Any] | None = None,
) -> None:
    """Make `old` set what `new` (already added to `container`) sets, converting its value with
    `convert` (default: `new`'s own type)."""
    # argparse keeps no public index of the options it knows; this is the one it looks flags up in.
    target = container._option_string_actions[new]
    value: dict[str, Any] = {"nargs": 0, "const": target.const}
    if target.nargs != 0:
        value = {"choices": target.choices, "metavar": target.metavar}
        if convert is not None or target.type is not None:
            value["type"] = convert or target.type
    container.add_argument(
        old, action=_DeprecatedAlias, new=new, dest=target.dest, help=argparse.SUPPRESS, **value
    )
