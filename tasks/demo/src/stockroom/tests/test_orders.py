import pytest
from stockroom import InsufficientStock, Order, OrderStateError, OrderStatus


def test_lines_merge_by_sku(inventory):
    order = Order("A-1")
    order.add_line(inventory.product("CF-250"), 2)
    order.add_line(inventory.product("MUG-01"), 1)
    order.add_line(inventory.product("CF-250"), 3)
    assert [(line.sku, line.quantity) for line in order.lines] == [("CF-250", 5), ("MUG-01", 1)]
    assert order.quantity_of("CF-250") == 5


def test_line_keeps_price_and_category(inventory):
    line = Order("A-1").add_line(inventory.product("BK-001"), 2)
    assert (str(line.unit_price), line.category, str(line.amount)) == ("24.00", "books", "48.00")


def test_place_reserves_stock(inventory):
    order = Order("A-1")
    order.add_line(inventory.product("CF-250"), 4)
    order.place(inventory)
    assert order.status is OrderStatus.PLACED
    assert inventory.reserved("CF-250") == 4


def test_place_is_all_or_nothing(inventory):
    order = Order("A-1")
    order.add_line(inventory.product("CF-250"), 4)
    order.add_line(inventory.product("MUG-01"), 5)
    with pytest.raises(InsufficientStock):
        order.place(inventory)
    assert order.status is OrderStatus.OPEN
    assert inventory.reserved("CF-250") == 0


def test_ship_and_cancel(inventory):
    shipped = Order("A-1")
    shipped.add_line(inventory.product("MUG-01"), 2)
    shipped.place(inventory)
    shipped.ship(inventory)
    assert inventory.on_hand("MUG-01") == 1
    with pytest.raises(OrderStateError):
        shipped.cancel(inventory)

    cancelled = Order("A-2")
    cancelled.add_line(inventory.product("BK-001"), 2)
    cancelled.place(inventory)
    cancelled.cancel(inventory)
    assert cancelled.status is OrderStatus.CANCELLED
    assert inventory.available("BK-001") == 12


def test_state_errors(inventory):
    order = Order("A-1")
    with pytest.raises(OrderStateError, match="no lines"):
        order.place(inventory)
    with pytest.raises(OrderStateError, match="cannot ship order A-1: it is open"):
        order.ship(inventory)
    order.add_line(inventory.product("MUG-01"), 1)
    order.place(inventory)
    with pytest.raises(OrderStateError):
        order.add_line(inventory.product("MUG-01"), 1)
    with pytest.raises(ValueError):
        Order("A-2").add_line(inventory.product("MUG-01"), 0)
