"""`--help` that shows every option's default.

Most options' help says its default in words, `(default: every namespace)`, where the value alone would
not say what it means; this formatter adds `(default: <value>)` to the others, so no default goes unsaid.
Switches (off unless given), required options and options without a default are left as they are.
"""

from __future__ import annotations

import argparse


class DefaultsShown(argparse.HelpFormatter):
    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "(default" in text or not _has_a_default_to_show(action):
            return action.help
        return f"{text} (default: %(default)s)".strip()


def _has_a_default_to_show(action: argparse.Action) -> bool:
    if not action.option_strings or action.required or action.nargs == 0:
        return False
    return action.default not in (None, argparse.SUPPRESS, [], ())
