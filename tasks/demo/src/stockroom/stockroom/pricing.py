"""Discounts, sales tax and order totals."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol

from stockroom.money import ZERO, allocate, round_money, to_decimal
from stockroom.orders import Order, OrderLine

__all__ = [
    "TAX_RATES",
    "AmountOff",
    "BuyXGetY",
    "Discount",
    "PercentOff",
    "Totals",
    "line_discounts",
    "order_totals",
]

# Sales tax by product category; categories not listed pay the "general" rate.
TAX_RATES: Mapping[str, Decimal] = {
    "general": Decimal("0.10"),
    "food": Decimal("0.05"),
    "books": Decimal("0.00"),
}


class Discount(Protocol):
    """Something that takes money off an order."""

    def amount(self, lines: Sequence[OrderLine]) -> Decimal:
        """The discount on these lines in currency, between 0 and their total."""
        ...


@dataclass(frozen=True)
class PercentOff:
    """``percent`` percent off the whole order."""

    percent: Decimal

    def __post_init__(self) -> None:
        percent = to_decimal(self.percent)
        if not 0 <= percent <= 100:
            raise ValueError(f"percent must be between 0 and 100, got {percent}")
        object.__setattr__(self, "percent", percent)

    def amount(self, lines: Sequence[OrderLine]) -> Decimal:
        return round_money(_subtotal(lines) * self.percent / 100)


@dataclass(frozen=True)
class AmountOff:
    """A fixed amount off the order (never more than the order is worth)."""

    value: Decimal

    def __post_init__(self) -> None:
        value = to_decimal(self.value)
        if value < 0:
            raise ValueError(f"value must not be negative, got {value}")
        object.__setattr__(self, "value", value)

    def amount(self, lines: Sequence[OrderLine]) -> Decimal:
        return min(round_money(self.value), _subtotal(lines))


@dataclass(frozen=True)
class BuyXGetY:
    """A multi-buy offer on one product: in every group of ``buy + free`` units, ``free`` are free.

    "Buy 2, get 1 free" is ``BuyXGetY(sku, buy=2, free=1)``: 3 units cost the price of 2,
    6 units the price of 4; a fourth or fifth unit is paid for.
    """

    sku: str
    buy: int
    free: int

    def __post_init__(self) -> None:
        if self.buy < 1 or self.free < 1:
            raise ValueError(f"buy and free must be at least 1, got {self.buy} and {self.free}")

    def free_units(self, quantity: int) -> int:
        return quantity // self.buy * self.free

    def amount(self, lines: Sequence[OrderLine]) -> Decimal:
        total = ZERO
        for line in lines:
            if line.sku == self.sku:
                total += line.unit_price * self.free_units(line.quantity)
        return round_money(total)


@dataclass(frozen=True)
class Totals:
    """What an order costs. ``total = subtotal - discount + tax``."""

    subtotal: Decimal
    discount: Decimal
    tax: Decimal
    total: Decimal

    def __str__(self) -> str:
        return (
            f"Totals(subtotal={self.subtotal}, discount={self.discount}, "
            f"tax={self.tax}, total={self.total})"
        )


def line_discounts(order: Order) -> list[Decimal]:
    """The order's discount spread over its lines in proportion to their amounts."""
    if order.discount is None or not order.lines:
        return [ZERO for _ in order.lines]
    discount = order.discount.amount(order.lines)
    if discount == 0:
        return [ZERO for _ in order.lines]
    return allocate(discount, [line.amount for line in order.lines])


def order_totals(order: Order, tax_rates: Mapping[str, Decimal] = TAX_RATES) -> Totals:
    """Subtotal, discount, tax and total of ``order``.

    Tax is charged on what the customer pays: each line's share of the discount is taken off
    before its category's rate applies. Tax is rounded once per category.
    """
    discounts = line_discounts(order)
    taxable: dict[str, Decimal] = {}
    for line, discount in zip(order.lines, discounts, strict=True):
        rate_key = line.category if line.category in tax_rates else "general"
        taxable[rate_key] = taxable.get(rate_key, ZERO) + line.amount - discount
    tax = sum((round_money(amount * tax_rates[key]) for key, amount in taxable.items()), ZERO)
    subtotal = round_money(_subtotal(order.lines))
    discount_total = sum(discounts, ZERO)
    return Totals(subtotal, discount_total, tax, subtotal - discount_total + tax)


def _subtotal(lines: Sequence[OrderLine]) -> Decimal:
    return sum((line.amount for line in lines), ZERO)
