"""Money amounts as ``Decimal``: parsing, rounding, formatting and fair splitting."""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation

__all__ = ["CENT", "ZERO", "allocate", "format_money", "parse_money", "round_money", "to_decimal"]

CENT = Decimal("0.01")
ZERO = Decimal("0.00")
CURRENCY_SYMBOLS = "$€£¥"
_AMOUNT = re.compile(r"\d+(?:\.\d*)?|\.\d+")


def to_decimal(value: Decimal | int | float | str) -> Decimal:
    """Converts ``value`` to ``Decimal``; floats go through ``str`` so 0.1 stays 0.1."""
    if isinstance(value, Decimal):
        return value
    if isinstance(value, float):
        return Decimal(str(value))
    try:
        return Decimal(value)
    except InvalidOperation:
        raise ValueError(f"not a number: {value!r}") from None


def parse_money(text: str) -> Decimal:
    """Reads an amount as people write it: ``"12"``, ``"$12.50"``, ``"-3.10"``, ``"(4.00)"``.

    A currency symbol may come first; parentheses mean a negative amount, as in accounting.
    The result is not rounded. Raises ``ValueError`` for anything else.
    """
    cleaned = text.strip()
    negative = False
    if cleaned.startswith("(") and cleaned.endswith(")"):
        negative, cleaned = True, cleaned[1:-1].strip()
    if cleaned.startswith("-"):
        negative, cleaned = not negative, cleaned[1:].strip()
    cleaned = cleaned.lstrip(CURRENCY_SYMBOLS).strip()
    if not _AMOUNT.fullmatch(cleaned):
        raise ValueError(f"not a money amount: {text!r}")
    amount = Decimal(cleaned)
    return -amount if negative else amount


def round_money(amount: Decimal) -> Decimal:
    """Rounds to the cent, halves away from zero (0.125 -> 0.13), as invoices do."""
    return amount.quantize(CENT)


def format_money(amount: Decimal, symbol: str = "$") -> str:
    """``Decimal("-1234.5")`` -> ``"-$1,234.50"``."""
    rounded = round_money(amount)
    sign = "-" if rounded < 0 else ""
    return f"{sign}{symbol}{abs(rounded):,.2f}"


def allocate(amount: Decimal, weights: Sequence[Decimal]) -> list[Decimal]:
    """Splits ``amount`` into cents proportionally to ``weights``; the parts add up exactly.

    Leftover cents go to the parts with the largest remainders (earlier parts win ties).
    Used to spread an order discount over its lines.
    """
    if not weights:
        return []
    total_weight = sum(weights, Decimal(0))
    if total_weight == 0:
        raise ValueError("cannot allocate over weights that sum to zero")
    cents = int(round_money(amount) / CENT)
    exact = [Decimal(cents) * weight / total_weight for weight in weights]
    parts = [int(share) for share in exact]  # int() truncates toward zero
    leftover = cents - sum(parts)
    step = 1 if leftover >= 0 else -1
    by_remainder = sorted(range(len(parts)), key=lambda i: -abs(exact[i] - parts[i]))
    for i in by_remainder[: abs(leftover)]:
        parts[i] += step
    return [Decimal(part) * CENT for part in parts]
