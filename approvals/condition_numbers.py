"""Reading a condition's operand as a number: JSON numbers, and strings that say one unambiguously,
money included ("1500", "$2,500", "2,500.00", "USD 2500", "2500 usd", "-€12.50"). A currency marker is
decoration: the number is compared as written, in the tool's own unit (no conversion). Strings that do
not say one number unambiguously do not read: "1.800,00" and "1.800" (1800 in much of Europe, 1.8 in
English), "1,5", "1 000", "2.5k", "two thousand". approvals.conditions treats those as unknown."""

from __future__ import annotations

import math
import re
from typing import Any

from .condition_parser import is_number

CURRENCY_SYMBOLS = ("US$", "$", "€", "£", "¥")
CURRENCY_CODES = ("USD", "EUR", "GBP", "CHF", "CAD", "AUD", "NZD", "JPY", "CNY", "INR", "SEK", "NOK", "DKK")
_MARKER = "|".join(re.escape(m) for m in (*CURRENCY_SYMBOLS, *CURRENCY_CODES))
_EXPONENT = r"(?:[eE][+-]?\d+)?"
# Digits with an optional decimal point ("1500", "1500.", ".5", "1e3"), or thousands grouped by commas
# with a decimal point ("2,500", "2,500.00").
_NUMBER = rf"(?:\d+(?:\.\d*)?{_EXPONENT}|\.\d+{_EXPONENT}|\d{{1,3}}(?:,\d{{3}})+(?:\.\d+)?)"
_MONEY = re.compile(
    rf"(?P<sign>[+-]?)\s*(?:(?P<pre>{_MARKER})\s*)?(?P<sign2>[+-]?)(?P<number>{_NUMBER})(?:\s*(?P<post>{_MARKER}))?",
    re.ASCII | re.IGNORECASE,
)
# "1.800": a thousands separator in much of Europe, a decimal point in English.
_AMBIGUOUS = re.compile(r"[1-9]\d{0,2}\.\d{3}", re.ASCII)


def read_number(value: Any) -> float | None:
    """The number `value` says, or None when it says none (or not unambiguously)."""
    if is_number(value):
        return float(value)
    if not isinstance(value, str) or len(value) > 100:
        return None
    m = _MONEY.fullmatch(value.strip())
    if m is None or (m["pre"] and m["post"]) or (m["sign"] and m["sign2"]) or _AMBIGUOUS.fullmatch(m["number"]):
        return None
    n = float(m["number"].replace(",", ""))
    if "-" in (m["sign"], m["sign2"]):
        n = -n
    return n if math.isfinite(n) else None
