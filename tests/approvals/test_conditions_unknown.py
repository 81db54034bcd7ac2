"""The condition language decides in three values: a condition holds, does not, or cannot be decided on
the arguments (an operand it reads is missing or unreadable), and says why. Money-like strings read as
numbers where they say one unambiguously. Before, `amount > 1000` was simply false for "$2,500", "2,500",
"2500 USD" and for a missing amount, so the policy it belongs to did not apply."""

from __future__ import annotations

import pytest

from approvals import conditions
from approvals.condition_numbers import read_number


@pytest.mark.parametrize(
    "text, expected",
    [
        ("1500", 1500.0),
        (" 1500.5 ", 1500.5),
        ("$2,500", 2500.0),
        ("2,500", 2500.0),
        ("2,500.00", 2500.0),
        ("1,234,567.89", 1234567.89),
        ("USD 2500", 2500.0),
        ("2500 usd", 2500.0),
        ("2500USD", 2500.0),
        ("US$ 12", 12.0),
        ("€12.50", 12.5),
        ("-$5", -5.0),
        ("$-5", -5.0),
        ("0.125", 0.125),
        ("1e3", 1000.0),
        (".5", 0.5),
        ("1234.567", 1234.567),
        (7, 7.0),
        ("1.800,00", None),  # 1800 in much of Europe: not one number unambiguously
        ("1.800", None),  # 1800 there, 1.8 in English
        ("1.000.000", None),
        ("1,5", None),
        ("12,34", None),
        ("1 000", None),
        ("2.5k", None),
        ("two thousand", None),
        ("$2,500 USD", None),  # two markers
        ("-$-5", None),
        ("1_000", None),
        ("١٢٣", None),  # other scripts' digits
        ("1e400", None),
        ("nan", None),
        ("inf", None),
        ("", None),
        (True, None),
        (None, None),
        ([1], None),
        ("9" * 200, None),
    ],
)
def test_read_number_reads_what_says_one_number(text, expected):
    assert read_number(text) == expected


@pytest.mark.parametrize(
    "text, args, holds, why",
    [
        ("amount > 1000", {"amount": "$2,500"}, True, ""),
        ("amount > 1000", {"amount": "2500 USD"}, True, ""),
        ("amount > 1000", {"amount": "$200"}, False, ""),
        ("amount == 2500", {"amount": "2,500.00"}, True, ""),
        ("amount > 1000", {"amount": "2.500,00"}, None, "amount '2.500,00' could not be read as a number"),
        ("amount > 1000", {"amount": "lots"}, None, "amount 'lots' could not be read as a number"),
        ("amount > 1000", {"amount": None}, None, "amount null could not be read as a number"),
        ("amount > 1000", {"amount": [1]}, None, "amount [1] could not be read as a number"),
        ("amount > 1000", {}, None, "amount is missing"),
        ("amount <= 1000", {}, None, "amount is missing"),
        ("not (amount <= 1000)", {"amount": "lots"}, None, "amount 'lots' could not be read as a number"),
        ("amount == 5", {"amount": "lots"}, None, "amount 'lots' could not be read as a number"),
        ("amount != 5", {"amount": "lots"}, None, "amount 'lots' could not be read as a number"),
        ("amount in [5, 6]", {"amount": "lots"}, None, "amount 'lots' could not be read as a number"),
        ("amount in [5, 'lots']", {"amount": "lots"}, True, ""),
        ('recipient == "Bob"', {}, None, "recipient is missing"),
        ("order.total > 5", {"order": {}}, None, "order.total is missing"),
        ("len(items) > 2", {"items": 5}, None, "len(items) null could not be read as a number"),
        ('purpose > "m"', {"purpose": None}, None, "purpose null does not compare with 'm'"),
        ("urgent", {}, None, "urgent is missing"),
        # Unknown combines as in SQL: false and unknown is false, true or unknown is true.
        ('amount > 1000 and purpose == "travel"', {"amount": "lots", "purpose": "meals"}, False, ""),
        ('amount > 1000 or purpose == "travel"', {"amount": "lots", "purpose": "travel"}, True, ""),
        ('amount > 1000 or purpose == "travel"', {"amount": "lots", "purpose": "meals"}, None, None),
        (
            "amount > 1000 or total > 5",
            {"amount": "x", "total": "y"},
            None,
            "amount 'x' could not be read as a number; total 'y' could not be read as a number",
        ),
        # Asking whether an argument is there is decided.
        ("amount == null", {}, True, ""),
        ("amount != null", {}, False, ""),
        ("amount == null", {"amount": None}, True, ""),
        ("amount != null", {"amount": 5}, True, ""),
        # Strings compare with strings as before.
        ('"2,500" > "1,000"', {}, True, ""),
        ('lower(purpose) == "hardware"', {"purpose": "HardWare"}, True, ""),
    ],
)
def test_decide_says_when_a_condition_cannot_be_decided_and_why(text, args, holds, why):
    verdict = conditions.decide(text, args)
    assert verdict.holds is holds
    if why is not None:
        assert verdict.why == why


def test_a_missing_argument_may_be_null_instead():
    """For a policy that names no tool: the argument may be another tool's; a call without it does not meet it."""
    assert conditions.decide("amount > 1000", {}, missing_is_unknown=False).holds is False
    assert conditions.decide('recipient == "Bob"', {}, missing_is_unknown=False).holds is False
    assert conditions.decide('recipient != "Bob"', {}, missing_is_unknown=False).holds is True
    assert conditions.decide("amount > 1000", {"amount": "lots"}, missing_is_unknown=False).holds is None


def test_a_long_unreadable_value_is_shown_cut():
    why = conditions.decide("amount > 1", {"amount": "x" * 500}).why
    assert len(why) < 120 and why.endswith("could not be read as a number")
