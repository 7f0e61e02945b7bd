"""Orders: lines of products, and the life cycle open -> placed -> shipped (or cancelled)."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from enum import Enum
from typing import TYPE_CHECKING

from stockroom.errors import InsufficientStock, OrderStateError
from stockroom.models import Inventory, Product

if TYPE_CHECKING:
    from stockroom.pricing import Discount

__all__ = ["Order", "OrderLine", "OrderStatus"]


class OrderStatus(Enum):
    OPEN = "open"  # being filled in; nothing reserved
    PLACED = "placed"  # stock reserved
    SHIPPED = "shipped"  # stock left the building
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class OrderLine:
    """``quantity`` units of one product at the price it had when it was ordered."""

    sku: str
    name: str
    quantity: int
    unit_price: Decimal
    category: str = "general"

    @property
    def amount(self) -> Decimal:
        return self.unit_price * self.quantity


@dataclass
class Order:
    """A customer order. Lines can only change while the order is open."""

    order_id: str
    customer: str = ""
    discount: Discount | None = None
    lines: list[OrderLine] = field(default_factory=list)
    status: OrderStatus = OrderStatus.OPEN

    def add_line(self, product: Product, quantity: int) -> OrderLine:
        """Adds ``quantity`` of ``product``, merging with an existing line for it."""
        self._require(OrderStatus.OPEN, "add lines to")
        if quantity <= 0:
            raise ValueError(f"quantity must be positive, got {quantity}")
        for index, line in enumerate(self.lines):
            if line.sku == product.sku:
                merged = OrderLine(line.sku, line.name, line.quantity + quantity,
                                   line.unit_price, line.category)
                self.lines[index] = merged
                return merged
        line = OrderLine(product.sku, product.name, quantity, product.price, product.category)
        self.lines.append(line)
        return line

    def quantity_of(self, sku: str) -> int:
        return sum(line.quantity for line in self.lines if line.sku == sku)

    def place(self, inventory: Inventory) -> None:
        """Reserves stock for every line, all or nothing."""
        self._require(OrderStatus.OPEN, "place")
        if not self.lines:
            raise OrderStateError(f"order {self.order_id} has no lines")
        done: list[OrderLine] = []
        try:
            for line in self.lines:
                inventory.reserve(line.sku, line.quantity)
                done.append(line)
        except InsufficientStock:
            for line in done:
                inventory.release(line.sku, line.quantity)
            raise
        self.status = OrderStatus.PLACED

    def ship(self, inventory: Inventory) -> None:
        self._require(OrderStatus.PLACED, "ship")
        for line in self.lines:
            inventory.ship(line.sku, line.quantity)
        self.status = OrderStatus.SHIPPED

    def cancel(self, inventory: Inventory) -> None:
        """Cancels an open or placed order, releasing what it reserved."""
        if self.status not in (OrderStatus.OPEN, OrderStatus.PLACED):
            raise OrderStateError(f"order {self.order_id} is {self.status.value}; cannot cancel")
        if self.status is OrderStatus.PLACED:
            for line in self.lines:
                inventory.release(line.sku, line.quantity)
        self.status = OrderStatus.CANCELLED

    def _require(self, status: OrderStatus, action: str) -> None:
        if self.status is not status:
            raise OrderStateError(
                f"cannot {action} order {self.order_id}: it is {self.status.value}, "
                f"not {status.value}"
            )
