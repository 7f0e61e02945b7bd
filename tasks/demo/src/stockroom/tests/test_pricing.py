from decimal import Decimal

import pytest
from stockroom import AmountOff, Order, PercentOff, order_totals


def make_order(inventory, discount=None, **quantities):
    order = Order("T-1", discount=discount)
    for sku, quantity in quantities.items():
        order.add_line(inventory.product(sku.replace("_", "-")), quantity)
    return order


def totals_as_strings(totals):
    values = (totals.subtotal, totals.discount, totals.tax, totals.total)
    return tuple(str(value) for value in values)


def test_tax_depends_on_category(inventory):
    order = make_order(inventory, BK_001=1, CF_250=2, MUG_01=1)
    # books 24.00 at 0%, food 19.80 at 5%, kitchen (general) 8.50 at 10%
    assert totals_as_strings(order_totals(order)) == ("52.30", "0.00", "1.84", "54.14")


def test_percent_off_lowers_the_tax(inventory):
    order = make_order(inventory, PercentOff(Decimal("10")), MUG_01=2)
    assert totals_as_strings(order_totals(order)) == ("17.00", "1.70", "1.53", "16.83")


def test_amount_off_is_capped(inventory):
    order = make_order(inventory, AmountOff(Decimal("100")), MUG_01=1)
    assert totals_as_strings(order_totals(order)) == ("8.50", "8.50", "0.00", "0.00")


def test_discount_is_spread_over_lines(inventory):
    order = make_order(inventory, AmountOff(Decimal("10.00")), BK_001=1, MUG_01=1)
    # 10.00 over 24.00 and 8.50: 7.38 and 2.62; tax only on the mug's 5.88
    assert totals_as_strings(order_totals(order)) == ("32.50", "10.00", "0.59", "23.09")


def test_custom_tax_rates(inventory):
    order = make_order(inventory, MUG_01=1)
    rates = {"general": Decimal("0.20")}
    assert order_totals(order, rates).tax == Decimal("1.70")


def test_empty_order():
    assert totals_as_strings(order_totals(Order("T-0"))) == ("0.00", "0.00", "0.00", "0.00")


@pytest.mark.parametrize("percent", ["-1", "100.5"])
def test_percent_off_range(percent):
    with pytest.raises(ValueError):
        PercentOff(Decimal(percent))


def test_amount_off_must_not_be_negative():
    with pytest.raises(ValueError):
        AmountOff(Decimal("-5"))
