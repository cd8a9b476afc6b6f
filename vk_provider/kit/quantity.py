"""Kubernetes resource quantities ("250m", "1.5", "2Gi", "1e3", "500M") as exact fractions.

Only what the downward API needs: parsing to an exact `Fraction`, so "0.1" is a tenth and not a
binary approximation, and dividing with the kubelet's rounding stays exact at any size. The grammar
is the API's: an optionally signed decimal number, then one suffix at most:

- binary: Ki Mi Gi Ti Pi Ei (powers of 1024);
- decimal: n u m (none) k M G T P E;
- exponent: e or E followed by a signed integer ("1e3", "5E-2").

"1E" is one exa; "1e" and "1K" are invalid.
"""

from __future__ import annotations

import re
from fractions import Fraction

_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)"
    r"(?P<whole>\d*)(?:\.(?P<fraction>\d*))?"
    r"(?:(?P<binary>[KMGTPE]i)|(?P<decimal>[numkMGTPE])|[eE](?P<exponent>[+-]?\d+))?",
    re.ASCII,
)
_BINARY_POWERS = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_EXPONENTS = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
# Both far beyond any real resource; they keep a hostile "1e999999999" or a megabyte of digits from
# costing minutes (and Python refuses to read integers of more than 4300 digits anyway).
_LARGEST_EXPONENT = 1000
_LONGEST_TEXT = 100


class InvalidQuantityError(ValueError):
    """The text is not a Kubernetes quantity."""


def parse_quantity(text: str) -> Fraction:
    """The exact value of a quantity; raises `InvalidQuantityError` naming the text when it is not one."""
    match = _QUANTITY.fullmatch(text) if len(text) <= _LONGEST_TEXT else None
    if match is None or not (match["whole"] or match["fraction"]):
        raise InvalidQuantityError(f"{text!r} is not a valid quantity (examples: 250m, 1.5, 2Gi, 1e3)")
    digits = match["fraction"] or ""
    value = Fraction(int(match["whole"] + digits or "0"), 10 ** len(digits))
    value *= _suffix_multiplier(text, match)
    return -value if match["sign"] == "-" else value


def _suffix_multiplier(text: str, match: re.Match[str]) -> Fraction:
    if match["binary"]:
        return Fraction(2 ** _BINARY_POWERS[match["binary"]])
    exponent = _DECIMAL_EXPONENTS[match["decimal"]] if match["decimal"] else int(match["exponent"] or 0)
    if abs(exponent) > _LARGEST_EXPONENT:
        raise InvalidQuantityError(f"{text!r} is out of range")
    return Fraction(10) ** exponent
