"""`$(VAR)` expansion follows Kubernetes' rules exactly, odd corners included."""

from __future__ import annotations

import pytest

from vk_provider.environment import expand

VARIABLES = {"A": "alpha", "B": "beta", "EMPTY": "", "SELF": "$(A)"}


@pytest.mark.parametrize(
    ("text", "expanded"),
    [
        pytest.param("plain text", "plain text", id="text without a dollar is unchanged"),
        pytest.param("$(A)", "alpha", id="a known reference is replaced by its value"),
        pytest.param("x-$(A)-y", "x-alpha-y", id="a reference inside text is replaced in place"),
        pytest.param("$(A)$(B)", "alphabeta", id="adjacent references are each replaced"),
        pytest.param("$(MISSING)", "$(MISSING)", id="an unknown reference is left as written"),
        pytest.param("[$(EMPTY)]", "[]", id="a reference to an empty variable becomes empty"),
        pytest.param("$$(A)", "$(A)", id="a doubled dollar escapes a reference"),
        pytest.param("$$$(A)", "$alpha", id="an escaped dollar may precede a real reference"),
        pytest.param("$$", "$", id="a doubled dollar becomes one dollar anywhere"),
        pytest.param("$$$$", "$$", id="each pair of dollars becomes one"),
        pytest.param("$A", "$A", id="a dollar without a parenthesis stays as written"),
        pytest.param("cost: 5$", "cost: 5$", id="a trailing dollar stays as written"),
        pytest.param("$", "$", id="a lone dollar stays as written"),
        pytest.param("$(A", "$(A", id="an unterminated reference stays as written"),
        pytest.param("$($$", "$($", id="reading goes on after an unterminated reference"),
        pytest.param("$()", "$()", id="an empty name is an unknown reference"),
        pytest.param("$(A$(B))", "$(A$(B))", id="a name runs to the first closing parenthesis"),
        pytest.param("$(SELF)", "$(A)", id="a value put in is not expanded again"),
        pytest.param("(A) $ (B)", "(A) $ (B)", id="a dollar before a space stays as written"),
        pytest.param("$é and $(A)", "$é and alpha", id="a non-ASCII character after a dollar is kept"),
    ],
)
def test_expansion(text: str, expanded: str) -> None:
    assert expand(text, VARIABLES) == expanded


def test_expansion_uses_any_mapping_and_never_changes_it() -> None:
    variables = {"A": "1"}
    assert expand("$(A)$(B)", variables) == "1$(B)"
    assert variables == {"A": "1"}
