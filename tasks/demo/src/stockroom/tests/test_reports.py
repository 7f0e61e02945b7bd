from decimal import Decimal

from stockroom import (
    Order,
    PercentOff,
    inventory_report,
    low_stock,
    render_table,
    sales_by_category,
)


def test_low_stock_lists_fewest_first(inventory):
    inventory.reserve("CF-250", 38)
    report = low_stock(inventory, threshold=5)
    assert [(line.sku, line.available) for line in report] == [("TEA-10", 0), ("CF-250", 2),
                                                               ("MUG-01", 3)]


def test_low_stock_threshold_is_inclusive(inventory):
    assert [line.sku for line in low_stock(inventory, threshold=3)] == ["TEA-10", "MUG-01"]


def test_sales_by_category(inventory):
    placed = Order("S-1", discount=PercentOff(Decimal("50")))
    placed.add_line(inventory.product("CF-250"), 2)
    placed.place(inventory)
    shipped = Order("S-2")
    shipped.add_line(inventory.product("BK-001"), 1)
    shipped.add_line(inventory.product("CF-250"), 1)
    shipped.place(inventory)
    shipped.ship(inventory)
    not_yet = Order("S-3")
    not_yet.add_line(inventory.product("MUG-01"), 1)
    assert sales_by_category([placed, shipped, not_yet]) == {
        "books": Decimal("24.00"),
        "food": Decimal("19.80"),
    }


def test_render_table_alignment():
    table = render_table(("Item", "Qty", "Price"), [("Tea", 3, "$4.25"), ("Coffee", 12, "$9.90")])
    assert table.splitlines() == [
        "Item    Qty  Price",
        "------  ---  -----",
        "Tea       3  $4.25",
        "Coffee   12  $9.90",
    ]


def test_inventory_report(inventory):
    lines = inventory_report(inventory).splitlines()
    assert lines[0].split() == ["SKU", "Name", "On", "hand", "Reserved", "Available", "Price"]
    assert lines[2].split() == ["BK-001", "Field", "guide", "12", "0", "12", "$24.00"]
    assert len(lines) == 6
