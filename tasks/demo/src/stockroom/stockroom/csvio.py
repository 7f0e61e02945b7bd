"""Reading and writing the inventory as CSV (one product per row)."""

from __future__ import annotations

import csv
import io
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TextIO

from stockroom.errors import CsvFormatError
from stockroom.models import Inventory, Product
from stockroom.money import parse_money

__all__ = ["COLUMNS", "read_inventory", "write_inventory"]

COLUMNS = ("sku", "name", "price", "category", "quantity")
_REQUIRED = ("sku", "name", "price")


def read_inventory(source: str | Path | TextIO) -> Inventory:
    """Reads an inventory from a CSV path or open text file.

    Header names are matched case-insensitively and may be surrounded by spaces; unknown
    columns are ignored. Blank rows are skipped. Raises :class:`CsvFormatError` naming the
    line of the first bad row.
    """
    inventory = Inventory()
    with _open(source) as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            raise CsvFormatError(1, "the file is empty; expected a header row")
        columns = _column_indexes(header)
        for row in reader:
            if not any(cell.strip() for cell in row):
                continue
            product, quantity = _parse_row(row, columns, reader.line_num)
            if product.sku in inventory:
                raise CsvFormatError(reader.line_num, f"duplicate SKU {product.sku!r}")
            inventory.add(product, quantity)
    return inventory


def write_inventory(inventory: Inventory, destination: str | Path | TextIO) -> None:
    """Writes ``inventory`` in the format :func:`read_inventory` reads, products in SKU order."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    for product in inventory:
        writer.writerow([product.sku, product.name, f"{product.price:.2f}", product.category,
                         inventory.on_hand(product.sku)])
    if isinstance(destination, (str, Path)):
        Path(destination).write_text(buffer.getvalue(), encoding="utf-8")
    else:
        destination.write(buffer.getvalue())


def _open(source: str | Path | TextIO) -> AbstractContextManager[TextIO]:
    if isinstance(source, (str, Path)):
        # utf-8-sig: spreadsheet programs like to start their exports with a byte-order mark.
        return open(source, newline="", encoding="utf-8-sig")
    return nullcontext(source)  # the caller's file: the caller closes it


def _column_indexes(header: list[str]) -> dict[str, int]:
    names = [name.strip().lower() for name in header]
    missing = [column for column in _REQUIRED if column not in names]
    if missing:
        raise CsvFormatError(1, f"missing column(s) {', '.join(missing)}; have {header}")
    return {name: names.index(name) for name in COLUMNS if name in names}


def _parse_row(row: list[str], columns: dict[str, int], line: int) -> tuple[Product, int]:
    def cell(name: str) -> str:
        index = columns.get(name)
        return row[index].strip() if index is not None and index < len(row) else ""

    try:
        price = parse_money(cell("price"))
    except ValueError:
        raise CsvFormatError(line, f"invalid price {cell('price')!r}") from None
    try:
        quantity = _parse_quantity(cell("quantity"))
    except ValueError:
        raise CsvFormatError(line, f"invalid quantity {cell('quantity')!r}") from None
    try:
        product = Product(cell("sku"), cell("name"), price, cell("category") or "general")
    except ValueError as error:
        raise CsvFormatError(line, str(error)) from None
    return product, quantity


def _parse_quantity(text: str) -> int:
    if not text:
        return 0
    quantity = int(text)
    if quantity < 0:
        raise ValueError(f"negative quantity {quantity}")
    return quantity
