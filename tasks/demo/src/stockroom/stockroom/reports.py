"""Plain-text reports: what to reorder, and what sold."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal

from stockroom.models import Inventory
from stockroom.money import ZERO, format_money
from stockroom.orders import Order, OrderStatus
from stockroom.pricing import line_discounts

__all__ = ["StockLine", "inventory_report", "low_stock", "render_table", "sales_by_category"]


@dataclass(frozen=True)
class StockLine:
    sku: str
    name: str
    on_hand: int
    reserved: int
    available: int


def low_stock(inventory: Inventory, threshold: int = 5) -> list[StockLine]:
    """Products whose available units are at or below ``threshold``, fewest first."""
    lines = [
        StockLine(p.sku, p.name, inventory.on_hand(p.sku), inventory.reserved(p.sku),
                  inventory.available(p.sku))
        for p in inventory
        if inventory.available(p.sku) <= threshold
    ]
    return sorted(lines, key=lambda line: (line.available, line.sku))


def sales_by_category(orders: Iterable[Order]) -> dict[str, Decimal]:
    """Net sales (after discounts, before tax) per product category, largest first.

    Only orders that were placed or shipped count: open orders are not sales yet and
    cancelled orders never will be.
    """
    totals: dict[str, Decimal] = {}
    for order in orders:
        if order.status is OrderStatus.OPEN:
            continue
        for line, discount in zip(order.lines, line_discounts(order), strict=True):
            totals[line.category] = totals.get(line.category, ZERO) + line.amount - discount
    return dict(sorted(totals.items(), key=lambda item: (-item[1], item[0])))


def render_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A fixed-width text table; numbers (and money) are right-aligned, text left-aligned."""
    cells = [[str(value) for value in row] for row in rows]
    numeric = [
        all(_looks_numeric(row[i]) for row in cells) and bool(cells) for i in range(len(headers))
    ]
    widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        columns = zip(values, widths, numeric, strict=True)
        parts = [value.rjust(w) if num else value.ljust(w) for value, w, num in columns]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * width for width in widths)
    return "\n".join([line(list(headers)), rule, *(line(row) for row in cells)])


def inventory_report(inventory: Inventory) -> str:
    """Every product with its stock and unit price, as a table."""
    rows = [
        (p.sku, p.name, inventory.on_hand(p.sku), inventory.reserved(p.sku),
         inventory.available(p.sku), format_money(p.price))
        for p in inventory
    ]
    return render_table(("SKU", "Name", "On hand", "Reserved", "Available", "Price"), rows)


def _looks_numeric(text: str) -> bool:
    stripped = text.replace(",", "").replace("$", "").lstrip("-")
    return stripped.replace(".", "", 1).isdigit()
