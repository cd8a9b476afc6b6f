"""`$(VAR)` references, expanded by the rules Kubernetes uses for env values, command and args.

The rules, which differ from a shell's:

- `$(NAME)` becomes NAME's value when NAME is known, and stays `$(NAME)` as written when it is not;
- `$$` becomes a single `$`, which is how `$$(NAME)` escapes to a literal `$(NAME)`;
- a `$` followed by anything else, or ending the text, stays as written;
- `$(` with no `)` anywhere after it stays as written, and reading goes on just after it;
- the name runs to the first `)`, so `$(A$(B))` asks for a variable named `A$(B`;
- a value put in is never expanded again.

Kubernetes scans bytes, which mangles a non-ASCII character right after a lone `$`; this scans
characters and keeps such text intact, the only intended difference.
"""

from __future__ import annotations

from collections.abc import Mapping

OPERATOR = "$"
OPENER = "("
CLOSER = ")"


def expand(text: str, variables: Mapping[str, str]) -> str:
    """`text` with every `$(NAME)` of a known NAME replaced by its value (see the module's rules).

    For a container's command and args, as the kubelet does, pass the resolved environment:
    `expand(arg, dict(resolved.variables))`.
    """
    pieces: list[str] = []
    copied_up_to = 0
    cursor = text.find(OPERATOR)
    # A `$` in the last position starts nothing, so it is copied like plain text.
    while 0 <= cursor < len(text) - 1:
        pieces.append(text[copied_up_to:cursor])
        replacement, consumed = _read_reference(text, cursor, variables)
        pieces.append(replacement)
        copied_up_to = cursor + consumed
        cursor = text.find(OPERATOR, copied_up_to)
    pieces.append(text[copied_up_to:])
    return "".join(pieces)


def _read_reference(text: str, cursor: int, variables: Mapping[str, str]) -> tuple[str, int]:
    """What the `$` at `cursor` (never the last character) stands for, and how many characters it spans."""
    following = text[cursor + 1]
    if following == OPERATOR:
        return OPERATOR, 2
    if following != OPENER:
        return OPERATOR + following, 2
    closer = text.find(CLOSER, cursor + 2)
    if closer == -1:
        return OPERATOR + OPENER, 2
    name = text[cursor + 2 : closer]
    return variables.get(name, f"{OPERATOR}{OPENER}{name}{CLOSER}"), closer + 1 - cursor
