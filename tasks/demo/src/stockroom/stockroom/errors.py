"""The errors stockroom raises; all of them are :class:`StockroomError`."""

from __future__ import annotations

__all__ = ["CsvFormatError", "InsufficientStock", "OrderStateError", "StockroomError", "UnknownSKU"]


class StockroomError(Exception):
    """Base class of every stockroom error."""


class UnknownSKU(StockroomError, KeyError):
    """No product has this SKU."""

    def __init__(self, sku: str) -> None:
        super().__init__(sku)
        self.sku = sku

    def __str__(self) -> str:
        return f"unknown SKU {self.sku!r}"


class InsufficientStock(StockroomError):
    """A reservation or shipment asks for more units than there are."""

    def __init__(self, sku: str, requested: int, available: int) -> None:
        super().__init__(f"{sku}: requested {requested}, only {available} available")
        self.sku = sku
        self.requested = requested
        self.available = available


class OrderStateError(StockroomError):
    """The order is not in a state that allows this operation."""


class CsvFormatError(StockroomError):
    """A CSV file cannot be read; the message names the line and the column."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line
