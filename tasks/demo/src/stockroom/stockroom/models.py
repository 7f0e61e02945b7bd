"""Products and the stock kept of them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal

from stockroom.errors import InsufficientStock, UnknownSKU
from stockroom.money import to_decimal

__all__ = ["Inventory", "Product"]


@dataclass(frozen=True)
class Product:
    """Something the shop sells. ``price`` is the unit price before tax."""

    sku: str
    name: str
    price: Decimal
    category: str = "general"

    def __post_init__(self) -> None:
        if not self.sku or self.sku != self.sku.strip():
            raise ValueError(f"SKU must be non-empty without surrounding spaces: {self.sku!r}")
        price = to_decimal(self.price)
        if price < 0:
            raise ValueError(f"{self.sku}: price must not be negative, got {price}")
        object.__setattr__(self, "price", price)


class Inventory:
    """Products and their stock.

    For each product the inventory tracks the units *on hand* (physically in the stockroom)
    and the units *reserved* for placed orders that have not shipped yet. Units on hand that
    are not reserved are *available*; a reservation can only take available units.
    """

    def __init__(self) -> None:
        self._products: dict[str, Product] = {}
        self._on_hand: dict[str, int] = {}
        self._reserved: dict[str, int] = {}

    def add(self, product: Product, quantity: int = 0) -> None:
        """Adds a new product with ``quantity`` units on hand."""
        if product.sku in self._products:
            raise ValueError(f"product {product.sku!r} is already in the inventory")
        _check_quantity(quantity, allow_zero=True)
        self._products[product.sku] = product
        self._on_hand[product.sku] = quantity
        self._reserved[product.sku] = 0

    def product(self, sku: str) -> Product:
        try:
            return self._products[sku]
        except KeyError:
            raise UnknownSKU(sku) from None

    def __contains__(self, sku: object) -> bool:
        return sku in self._products

    def __len__(self) -> int:
        return len(self._products)

    def __iter__(self) -> Iterator[Product]:
        """Products in SKU order."""
        return iter(sorted(self._products.values(), key=lambda product: product.sku))

    def on_hand(self, sku: str) -> int:
        self.product(sku)
        return self._on_hand[sku]

    def reserved(self, sku: str) -> int:
        self.product(sku)
        return self._reserved[sku]

    def available(self, sku: str) -> int:
        return self.on_hand(sku) - self.reserved(sku)

    def receive(self, sku: str, quantity: int) -> None:
        """Books a delivery of ``quantity`` units."""
        _check_quantity(quantity)
        self._on_hand[self.product(sku).sku] += quantity

    def reserve(self, sku: str, quantity: int) -> None:
        """Sets ``quantity`` available units aside for an order."""
        _check_quantity(quantity)
        if quantity > self.on_hand(sku):
            raise InsufficientStock(sku, quantity, self.available(sku))
        self._reserved[sku] += quantity

    def release(self, sku: str, quantity: int) -> None:
        """Returns reserved units to the available stock (an order was cancelled)."""
        _check_quantity(quantity)
        if quantity > self.reserved(sku):
            raise ValueError(
                f"{sku}: cannot release {quantity}, only {self.reserved(sku)} reserved"
            )
        self._reserved[sku] -= quantity

    def ship(self, sku: str, quantity: int) -> None:
        """Removes reserved units from the stockroom (an order shipped)."""
        _check_quantity(quantity)
        if quantity > self.reserved(sku):
            raise InsufficientStock(sku, quantity, self.reserved(sku))
        self._reserved[sku] -= quantity
        self._on_hand[sku] -= quantity

    def set_on_hand(self, sku: str, quantity: int) -> None:
        """Corrects the count after a stocktake; it may not drop below what is reserved."""
        _check_quantity(quantity, allow_zero=True)
        if quantity < self.reserved(sku):
            raise InsufficientStock(sku, self.reserved(sku), quantity)
        self._on_hand[sku] = quantity


def _check_quantity(quantity: int, allow_zero: bool = False) -> None:
    if isinstance(quantity, bool) or not isinstance(quantity, int):
        raise TypeError(f"quantity must be an int, got {quantity!r}")
    if quantity < 0 or (quantity == 0 and not allow_zero):
        expected = "at least 0" if allow_zero else "positive"
        raise ValueError(f"quantity must be {expected}, got {quantity}")
