from decimal import Decimal

import pytest
from stockroom import InsufficientStock, Inventory, Product, UnknownSKU


def test_product_normalises_price():
    product = Product("X-1", "Thing", 2.5)
    assert product.price == Decimal("2.5")
    assert product.category == "general"


@pytest.mark.parametrize(
    "sku", ["", " X-1", "X-1 "], ids=["empty", "leading-space", "trailing-space"]
)
def test_product_rejects_bad_sku(sku):
    with pytest.raises(ValueError):
        Product(sku, "Thing", Decimal("1"))


def test_product_rejects_negative_price():
    with pytest.raises(ValueError, match="negative"):
        Product("X-1", "Thing", Decimal("-1"))


def test_lookup(inventory):
    assert inventory.product("MUG-01").name == "Coffee mug"
    assert "MUG-01" in inventory and "NOPE" not in inventory
    assert len(inventory) == 4
    assert [p.sku for p in inventory] == ["BK-001", "CF-250", "MUG-01", "TEA-10"]
    with pytest.raises(UnknownSKU, match="unknown SKU 'NOPE'"):
        inventory.product("NOPE")


def test_add_twice_is_an_error(inventory):
    with pytest.raises(ValueError, match="already"):
        inventory.add(Product("MUG-01", "Other mug", Decimal("1")))


def test_receive_and_reserve(inventory):
    inventory.receive("TEA-10", 10)
    inventory.reserve("TEA-10", 4)
    assert (inventory.on_hand("TEA-10"), inventory.reserved("TEA-10")) == (10, 4)
    assert inventory.available("TEA-10") == 6


def test_reserve_more_than_on_hand(inventory):
    with pytest.raises(InsufficientStock) as caught:
        inventory.reserve("MUG-01", 4)
    assert (caught.value.requested, caught.value.available) == (4, 3)
    assert inventory.reserved("MUG-01") == 0


def test_release_and_ship(inventory):
    inventory.reserve("CF-250", 5)
    inventory.release("CF-250", 2)
    inventory.ship("CF-250", 3)
    assert (inventory.on_hand("CF-250"), inventory.reserved("CF-250")) == (37, 0)
    with pytest.raises(InsufficientStock):
        inventory.ship("CF-250", 1)
    with pytest.raises(ValueError):
        inventory.release("CF-250", 1)


def test_set_on_hand_respects_reservations(inventory):
    inventory.reserve("BK-001", 5)
    inventory.set_on_hand("BK-001", 5)
    assert inventory.available("BK-001") == 0
    with pytest.raises(InsufficientStock):
        inventory.set_on_hand("BK-001", 4)


@pytest.mark.parametrize("quantity", [0, -1, 1.5, True])
def test_quantities_must_be_positive_ints(inventory, quantity):
    with pytest.raises((TypeError, ValueError)):
        inventory.receive("MUG-01", quantity)


def test_empty_inventory():
    assert list(Inventory()) == []
