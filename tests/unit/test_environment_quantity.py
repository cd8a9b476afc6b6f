"""Quantities parse to exact fractions with the API's grammar, and anything else is refused clearly."""

from __future__ import annotations

from fractions import Fraction

import pytest

from vk_provider.kit.quantity import InvalidQuantityError, parse_quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [
        pytest.param("1", Fraction(1), id="a whole number"),
        pytest.param("1.5", Fraction(3, 2), id="a decimal number"),
        pytest.param("0.1", Fraction(1, 10), id="a decimal is exact, not binary floating point"),
        pytest.param("1.", Fraction(1), id="a number may end with its point"),
        pytest.param(".5", Fraction(1, 2), id="a number may start with its point"),
        pytest.param("+2", Fraction(2), id="a plus sign is allowed"),
        pytest.param("-2k", Fraction(-2000), id="a minus sign is allowed"),
        pytest.param("100m", Fraction(1, 10), id="milli"),
        pytest.param("5u", Fraction(5, 10**6), id="micro"),
        pytest.param("7n", Fraction(7, 10**9), id="nano"),
        pytest.param("2k", Fraction(2000), id="kilo is a lower-case k"),
        pytest.param("500M", Fraction(500 * 10**6), id="mega"),
        pytest.param("3G", Fraction(3 * 10**9), id="giga"),
        pytest.param("1T", Fraction(10**12), id="tera"),
        pytest.param("1P", Fraction(10**15), id="peta"),
        pytest.param("1E", Fraction(10**18), id="a bare upper-case E is exa"),
        pytest.param("1Ki", Fraction(1024), id="kibi"),
        pytest.param("2Gi", Fraction(2 * 2**30), id="gibi"),
        pytest.param("1.5Mi", Fraction(3 * 2**19), id="a decimal number of mebi"),
        pytest.param("1Ei", Fraction(2**60), id="exbi"),
        pytest.param("1e3", Fraction(1000), id="a lower-case exponent"),
        pytest.param("1E3", Fraction(1000), id="an upper-case exponent"),
        pytest.param("5e-2", Fraction(1, 20), id="a negative exponent"),
        pytest.param("1.5e+2", Fraction(150), id="a signed exponent on a decimal number"),
        pytest.param("0", Fraction(0), id="zero"),
    ],
)
def test_a_valid_quantity_has_its_exact_value(text: str, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty text"),
        pytest.param(".", id="a point without digits"),
        pytest.param("1e", id="an exponent marker without digits"),
        pytest.param("1K", id="an upper-case K"),
        pytest.param("1ki", id="a lower-case binary suffix"),
        pytest.param(" 1", id="a leading space"),
        pytest.param("1 ", id="a trailing space"),
        pytest.param("one", id="words"),
        pytest.param("1.2.3", id="two points"),
        pytest.param("--1", id="two signs"),
        pytest.param("1Mi1", id="text after the suffix"),
        pytest.param("1e2.5", id="a fractional exponent"),
        pytest.param("1e99999", id="an absurd exponent"),
        pytest.param("1" * 200, id="absurdly many digits"),
    ],
)
def test_an_invalid_quantity_is_refused_with_the_text_in_the_message(text: str) -> None:
    with pytest.raises(InvalidQuantityError) as raised:
        parse_quantity(text)
    assert repr(text) in str(raised.value)


def test_an_invalid_quantity_error_is_a_value_error() -> None:
    assert issubclass(InvalidQuantityError, ValueError)
