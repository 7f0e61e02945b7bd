from decimal import Decimal
from pathlib import Path

import pytest
from stockroom import Inventory, Product

DATA = Path(__file__).parent / "data"


@pytest.fixture
def inventory():
    """A small shop: two food items, a book and a mug."""
    stock = Inventory()
    stock.add(Product("BK-001", "Field guide", Decimal("24.00"), "books"), 12)
    stock.add(Product("CF-250", "Coffee beans", Decimal("9.90"), "food"), 40)
    stock.add(Product("MUG-01", "Coffee mug", Decimal("8.50"), "kitchen"), 3)
    stock.add(Product("TEA-10", "Green tea", Decimal("4.25"), "food"), 0)
    return stock


@pytest.fixture
def data_dir():
    return DATA
