"""stockroom: inventory, orders, pricing and reports for small shops."""

from stockroom.csvio import read_inventory, write_inventory
from stockroom.errors import (
    CsvFormatError,
    InsufficientStock,
    OrderStateError,
    StockroomError,
    UnknownSKU,
)
from stockroom.models import Inventory, Product
from stockroom.money import allocate, format_money, parse_money, round_money
from stockroom.orders import Order, OrderLine, OrderStatus
from stockroom.pricing import (
    TAX_RATES,
    AmountOff,
    BuyXGetY,
    PercentOff,
    Totals,
    order_totals,
)
from stockroom.reports import inventory_report, low_stock, render_table, sales_by_category

__version__ = "0.9.0"

__all__ = [
    "TAX_RATES",
    "AmountOff",
    "BuyXGetY",
    "CsvFormatError",
    "InsufficientStock",
    "Inventory",
    "Order",
    "OrderLine",
    "OrderStateError",
    "OrderStatus",
    "PercentOff",
    "Product",
    "StockroomError",
    "Totals",
    "UnknownSKU",
    "allocate",
    "format_money",
    "inventory_report",
    "low_stock",
    "order_totals",
    "parse_money",
    "read_inventory",
    "render_table",
    "round_money",
    "sales_by_category",
    "write_inventory",
]
