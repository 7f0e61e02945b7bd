from decimal import Decimal

import pytest
from stockroom import allocate, format_money, parse_money, round_money


@pytest.mark.parametrize(
    ("text", "amount"),
    [
        ("12", "12"),
        ("12.50", "12.50"),
        (" $9.90 ", "9.90"),
        ("€3", "3"),
        ("-3.10", "-3.10"),
        ("(4.00)", "-4.00"),
        ("$.99", "0.99"),
    ],
    ids=["int", "cents", "dollar-sign", "euro-sign", "minus", "parentheses", "no-int-part"],
)
def test_parse_money(text, amount):
    assert parse_money(text) == Decimal(amount)


@pytest.mark.parametrize(
    "text", ["", "abc", "12.3.4", "$", "1 000"],
    ids=["empty", "letters", "two-points", "symbol-only", "space-grouping"],
)
def test_parse_money_rejects_garbage(text):
    with pytest.raises(ValueError, match="not a money amount"):
        parse_money(text)


def test_round_money():
    assert round_money(Decimal("2.344")) == Decimal("2.34")
    assert round_money(Decimal("2.346")) == Decimal("2.35")
    assert round_money(Decimal("-1.999")) == Decimal("-2.00")
    assert round_money(Decimal("7")) == Decimal("7.00")


def test_format_money():
    assert format_money(Decimal("1234.5")) == "$1,234.50"
    assert format_money(Decimal("-0.5"), symbol="€") == "-€0.50"
    assert format_money(Decimal("0")) == "$0.00"


def test_allocate_adds_up_exactly():
    parts = allocate(Decimal("1.00"), [Decimal(1), Decimal(1), Decimal(1)])
    assert parts == [Decimal("0.34"), Decimal("0.33"), Decimal("0.33")]
    assert sum(parts) == Decimal("1.00")


def test_allocate_is_proportional():
    parts = allocate(Decimal("10.00"), [Decimal("30"), Decimal("10")])
    assert parts == [Decimal("7.50"), Decimal("2.50")]


def test_allocate_edge_cases():
    assert allocate(Decimal("5"), []) == []
    with pytest.raises(ValueError):
        allocate(Decimal("5"), [Decimal(0)])
