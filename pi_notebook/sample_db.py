"""The bundled sample database: a small shop (customers, products, orders, order items).

Generated deterministically (fixed seed), so the demo, the notebooks and the tests see the
same rows on every machine and engine. The SQLite copy is created on first use in the user's
data directory, never inside the installed package.
"""

from __future__ import annotations

import os
import random
import tempfile
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import sqlalchemy as sa

from pi_notebook._paths import data_dir

__all__ = ["SAMPLE_COUNTS", "create_sample_database", "sample_database_url", "sample_rows"]

SEED = 20240501
SAMPLE_COUNTS = {"customers": 400, "products": 80, "orders": 1_500, "order_items": 0}
_FILE = "sample.sqlite"

_FIRST = (
    "Ada Alan Ana Ben Chloe Dara Elif Emil Eva Farah Felix Grace Hana Ivan Jonas Julia Kai "
    "Lena Liam Lucia Maya Mateo Mia Nadia Noah Olga Omar Paula Priya Rafael Sara Sofia "
    "Tariq Theo Uma Victor Wen Yara Yusuf Zoe"
).split()
_LAST = (
    "Andersen Becker Costa Dubois Eriksen Fischer Garcia Hoffmann Ivanova Jensen Kowalski "
    "Lopez Martin Novak Okafor Petrov Quinn Rossi Schmidt Tanaka Usman Varga Weber Xu "
    "Yilmaz Zimmermann"
).split()
_CITIES = (
    ("Berlin", "DE"),
    ("Hamburg", "DE"),
    ("Munich", "DE"),
    ("Paris", "FR"),
    ("Lyon", "FR"),
    ("Madrid", "ES"),
    ("Barcelona", "ES"),
    ("Rome", "IT"),
    ("Milan", "IT"),
    ("Amsterdam", "NL"),
    ("Vienna", "AT"),
    ("Zurich", "CH"),
    ("Warsaw", "PL"),
    ("Prague", "CZ"),
    ("Stockholm", "SE"),
    ("Copenhagen", "DK"),
    ("Lisbon", "PT"),
    ("Dublin", "IE"),
)
_CATALOGUE = {
    "Books": (["Novel", "Cookbook", "Atlas", "Biography", "Poetry Collection"], 8, 45),
    "Electronics": (["Headphones", "Keyboard", "Monitor", "Webcam", "Speaker"], 25, 600),
    "Garden": (["Trowel", "Hose", "Planter", "Seed Kit", "Pruner"], 5, 120),
    "Kitchen": (["Kettle", "Chef Knife", "Blender", "Pan", "Teapot"], 12, 250),
    "Sports": (
        ["Yoga Mat", "Dumbbell Set", "Running Shoes", "Tennis Racket", "Bike Light"],
        10,
        180,
    ),
    "Toys": (["Puzzle", "Board Game", "Kite", "Building Blocks", "Plush Bear"], 6, 90),
}
_ADJ = ["Classic", "Compact", "Deluxe", "Eco", "Pro", "Smart", "Travel", "Urban"]
_STATUSES = (
    ("delivered", 70),
    ("shipped", 12),
    ("processing", 8),
    ("cancelled", 6),
    ("returned", 4),
)

metadata = sa.MetaData()
customers = sa.Table(
    "customers",
    metadata,
    sa.Column("customer_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("name", sa.String(100), nullable=False),
    sa.Column("email", sa.String(200), nullable=False),
    sa.Column("city", sa.String(60), nullable=False),
    sa.Column("country", sa.String(2), nullable=False),
    sa.Column("signup_date", sa.Date, nullable=False),
)
products = sa.Table(
    "products",
    metadata,
    sa.Column("product_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("name", sa.String(100), nullable=False),
    sa.Column("category", sa.String(40), nullable=False),
    sa.Column("price", sa.Numeric(10, 2), nullable=False),
)
orders = sa.Table(
    "orders",
    metadata,
    sa.Column("order_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("customer_id", sa.Integer, sa.ForeignKey("customers.customer_id"), nullable=False),
    sa.Column("order_date", sa.Date, nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
)
order_items = sa.Table(
    "order_items",
    metadata,
    sa.Column("order_id", sa.Integer, sa.ForeignKey("orders.order_id"), primary_key=True),
    sa.Column("line_no", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("product_id", sa.Integer, sa.ForeignKey("products.product_id"), nullable=False),
    sa.Column("quantity", sa.Integer, nullable=False),
    sa.Column("unit_price", sa.Numeric(10, 2), nullable=False),
)


def sample_rows() -> dict[str, list[dict[str, Any]]]:
    """The sample data, table by table (same output on every call and machine)."""
    rng = random.Random(SEED)
    start = date(2023, 1, 1)
    cust: list[dict[str, Any]] = []
    for i in range(1, SAMPLE_COUNTS["customers"] + 1):
        first, last = rng.choice(_FIRST), rng.choice(_LAST)
        city, country = rng.choice(_CITIES)
        cust.append(
            {
                "customer_id": i,
                "name": f"{first} {last}",
                "city": city,
                "email": f"{first}.{last}{i}@example.com".lower(),
                "country": country,
                "signup_date": start + timedelta(days=rng.randrange(0, 540)),
            }
        )
    prods: list[dict[str, Any]] = []
    categories = sorted(_CATALOGUE)
    for i in range(1, SAMPLE_COUNTS["products"] + 1):
        category = categories[(i - 1) % len(categories)]
        nouns, low, high = _CATALOGUE[category]
        price = Decimal(rng.randrange(low * 100, high * 100)) / 100
        prods.append(
            {
                "product_id": i,
                "name": f"{rng.choice(_ADJ)} {rng.choice(nouns)}",
                "category": category,
                "price": price.quantize(Decimal("0.01")),
            }
        )
    ords: list[dict[str, Any]] = []
    items: list[dict[str, Any]] = []
    status_names = [s for s, _ in _STATUSES]
    status_weights = [w for _, w in _STATUSES]
    for i in range(1, SAMPLE_COUNTS["orders"] + 1):
        customer = rng.choice(cust)
        earliest = (customer["signup_date"] - start).days
        day = start + timedelta(days=rng.randrange(earliest, 730))
        ords.append(
            {
                "order_id": i,
                "customer_id": customer["customer_id"],
                "order_date": day,
                "status": rng.choices(status_names, status_weights)[0],
            }
        )
        for line in range(1, rng.choice((1, 1, 2, 2, 3, 4)) + 1):
            product = rng.choice(prods)
            items.append(
                {
                    "order_id": i,
                    "line_no": line,
                    "product_id": product["product_id"],
                    "quantity": rng.choice((1, 1, 1, 2, 2, 3, 5)),
                    "unit_price": product["price"],
                }
            )
    return {"customers": cust, "products": prods, "orders": ords, "order_items": items}


def create_sample_database(url: str | sa.URL) -> None:
    """Create the four sample tables in the database at ``url`` and fill them.

    Existing tables of the same names are dropped first, so the result is always the same.
    """
    engine = sa.create_engine(url)
    try:
        data = sample_rows()
        with engine.begin() as conn:
            metadata.drop_all(conn)
            metadata.create_all(conn)
            for table in metadata.sorted_tables:
                conn.execute(table.insert(), data[table.name])
    finally:
        engine.dispose()


def sample_database_url() -> str:
    """URL of the sample SQLite database in the data directory, created on first use."""
    path = data_dir() / _FILE
    if not path.exists():
        # Build beside the target and rename, so a half-built file is never picked up.
        fd, tmp = tempfile.mkstemp(prefix=".sample-", suffix=".sqlite", dir=path.parent)
        os.close(fd)
        try:
            create_sample_database(f"sqlite:///{tmp}")
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return f"sqlite:///{path}"
