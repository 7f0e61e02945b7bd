import io
from decimal import Decimal

import pytest
from stockroom import CsvFormatError, read_inventory, write_inventory


def test_read_fixture(data_dir):
    inventory = read_inventory(data_dir / "products.csv")
    assert len(inventory) == 4
    guide = inventory.product("BK-001")
    assert guide.name == "Field Guide to Mushrooms, 2nd ed."
    assert (guide.price, guide.category) == (Decimal("24.00"), "books")
    assert inventory.product("CF-250").price == Decimal("9.90")
    assert inventory.on_hand("CF-250") == 40
    assert inventory.on_hand("TEA-10") == 0


def test_headers_are_flexible_and_optional_columns_default():
    text = " SKU , Name ,PRICE,notes\nX-1,Thing,2.50,ignored\n\n"
    inventory = read_inventory(io.StringIO(text))
    assert inventory.product("X-1").category == "general"
    assert inventory.on_hand("X-1") == 0


def test_round_trip(inventory, tmp_path):
    path = tmp_path / "out.csv"
    write_inventory(inventory, path)
    again = read_inventory(path)
    assert [(p, again.on_hand(p.sku)) for p in again] == [
        (p, inventory.on_hand(p.sku)) for p in inventory
    ]


def test_write_to_stream(inventory):
    out = io.StringIO()
    write_inventory(inventory, out)
    lines = out.getvalue().splitlines()
    assert lines[0] == "sku,name,price,category,quantity"
    assert lines[1] == "BK-001,Field guide,24.00,books,12"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "line 1: the file is empty"),
        ("sku,name\n", "line 1: missing column(s) price"),
        ("sku,name,price\nX-1,Thing,cheap\n", "line 2: invalid price 'cheap'"),
        ("sku,name,price,quantity\nX-1,Thing,1,-4\n", "line 2: invalid quantity '-4'"),
        ("sku,name,price\nX-1,A,1\nX-1,B,2\n", "line 3: duplicate SKU 'X-1'"),
        ("sku,name,price\n,Nameless,1\n", "line 2: SKU must be non-empty"),
    ],
    ids=["empty", "missing-column", "bad-price", "negative-quantity", "duplicate", "no-sku"],
)
def test_errors_name_the_line(text, message):
    with pytest.raises(CsvFormatError) as caught:
        read_inventory(io.StringIO(text))
    assert str(caught.value).startswith(message)
