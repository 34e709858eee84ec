"""The read corpus: ordinary analyst queries per dialect, and the small schema they run on.

``tests/fixtures/sql/reads_corpus_{dialect}.sql`` holds one statement per entry, entries
separated by a line holding only ``-- ;;``. :data:`SCHEMA` creates the tables the entries
query (customers, products, orders, order_items) with a few rows, per dialect, and
:data:`COUNTS` is what must be unchanged after running every entry.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "sql"
SEPARATOR = "-- ;;"
TABLES = ("customers", "products", "orders", "order_items")


def load_corpus(dialect: str) -> list[str]:
    """The corpus entries for ``dialect``, in file order, without the header comment."""
    text = (FIXTURES / f"reads_corpus_{dialect}.sql").read_text(encoding="utf-8")
    entries: list[str] = []
    current: list[str] = []
    for line in [*text.splitlines(), SEPARATOR]:
        if line.strip() != SEPARATOR:
            current.append(line)
            continue
        entry = "\n".join(current).strip()
        current = []
        if entries or not entry.startswith("-- Ordinary"):
            entries.append(entry)
        else:
            # The file's header comment is glued to the first entry: drop its lines.
            body = [part for part in entry.splitlines() if not part.startswith("-- ")]
            entries.append("\n".join(body).strip())
    return [entry for entry in entries if entry]


_CUSTOMERS = [
    (1, "Alice", "alice@example.com", "DE", "Berlin", "2024-01-05 10:00:00", "retail", 1000),
    (2, "Bob", "bob@example.org", "FR", "Paris", "2024-02-11 12:30:00", "b2b", 5000),
    (3, "carol", "carol@example.com", "DE", None, "2024-03-20 08:15:00", "", 250),
    (4, "Dave", "dave@example.net", "US", "Boston", "2024-04-01 09:00:00", "retail", 0),
    (5, "Eve", "eve@example.com", "FR", "Lyon", "2024-05-17 17:45:00", "b2b", 7500),
]
_PRODUCTS = [
    (1, "Widget", "tools", 9.99, 4.5, "WID-001", '{"color": "red", "dims": {"w": 3, "h": 4}}'),
    (2, "Gadget", "tools", 24.5, 10.0, "GAD-002", '{"color": "blue"}'),
    (3, "Book", "media", 15.0, 6.0, "BOK-003", '{"pages": 320}'),
    (4, "Lamp", "home", 45.0, 20.0, "LMP-004", '{"color": "red", "gift": true}'),
    (5, "Mug", "home", 7.25, 2.0, "MUG-005", "{}"),
]
_TAGS = {1: ["sale", "new"], 2: ["new"], 3: [], 4: ["sale"], 5: ["gift"]}
_ORDERS = [
    (1, 1, "2024-01-10", "2024-01-10 09:00:00", "paid", 120.5, "DE", '{"channel": "web"}'),
    (2, 1, "2024-02-03", "2024-02-03 14:20:00", "shipped", 35.0, "DE", '{"channel": "app"}'),
    (
        3,
        2,
        "2024-02-15",
        "2024-02-15 11:11:00",
        "paid",
        640.0,
        "FR",
        '{"channel": "web", "gift": 1}',
    ),
    (4, 3, "2024-03-01", "2024-03-01 08:00:00", "cancelled", 15.0, "DE", "{}"),
    (5, 4, "2024-03-22", "2024-03-22 19:30:00", "paid", 88.75, "US", '{"channel": "phone"}'),
    (6, 5, "2024-04-02", "2024-04-02 10:10:00", "new", 210.0, "FR", '{"channel": "web"}'),
    (7, 2, "2024-04-18", "2024-04-18 16:45:00", "paid", 1200.0, "FR", '{"channel": "app"}'),
    (8, 1, "2024-05-05", "2024-05-05 07:30:00", "shipped", 45.0, "DE", '{"channel": "web"}'),
    (9, 5, "2024-06-12", "2024-06-12 13:00:00", "paid", 99.99, "FR", "{}"),
    (10, 3, "2024-06-30", "2024-06-30 22:05:00", "new", 19.5, "DE", '{"channel": "web"}'),
]
_ITEMS = [
    (1, 1, 1, 2, 9.99, 0),
    (2, 1, 2, 4, 24.5, 0.1),
    (3, 2, 3, 1, 15.0, 0),
    (4, 3, 4, 10, 45.0, 0.2),
    (5, 3, 1, 5, 9.99, 0),
    (6, 4, 3, 1, 15.0, 0),
    (7, 5, 5, 3, 7.25, 0),
    (8, 5, 2, 3, 24.5, 0.05),
    (9, 6, 4, 4, 45.0, 0),
    (10, 7, 4, 20, 45.0, 0.15),
    (11, 7, 2, 12, 24.5, 0),
    (12, 8, 3, 3, 15.0, 0),
    (13, 9, 5, 6, 7.25, 0),
    (14, 9, 1, 5, 9.99, 0.1),
    (15, 10, 5, 2, 7.25, 0),
]


def _sql_value(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def _rows(rows: Sequence[tuple[object, ...]]) -> str:
    return ", ".join("(" + ", ".join(map(_sql_value, row)) + ")" for row in rows)


def _tags(dialect: str, product_id: int) -> str:
    tags = _TAGS[product_id]
    if dialect == "postgres":
        return "ARRAY[" + ", ".join(map(_sql_value, tags)) + "]::text[]"
    if dialect == "duckdb":
        return "[" + ", ".join(map(_sql_value, tags)) + "]::VARCHAR[]"
    return _sql_value(",".join(tags))


def _products(dialect: str) -> str:
    rows = []
    for row in _PRODUCTS:
        values = ", ".join(map(_sql_value, row[:6]))
        rows.append(f"({values}, {_tags(dialect, row[0])}, {_sql_value(row[6])})")
    return ", ".join(rows)


_TYPES = {
    #         timestamp     json     tags        money
    "postgres": ("timestamp", "jsonb", "text[]", "numeric(12,2)"),
    "mysql": ("datetime", "json", "varchar(200)", "decimal(12,2)"),
    "sqlite": ("text", "text", "text", "real"),
    "duckdb": ("timestamp", "json", "varchar[]", "decimal(12,2)"),
}


def schema(dialect: str) -> list[str]:
    """Statements that (re)create the corpus tables with their rows in ``dialect``."""
    ts, js, tags, money = _TYPES[dialect]
    text = "varchar(100)" if dialect == "mysql" else "text"
    date = "text" if dialect == "sqlite" else "date"
    return [
        *[f"DROP TABLE IF EXISTS {name}" for name in reversed(TABLES)],
        f"CREATE TABLE customers (id integer PRIMARY KEY, name {text}, email {text}, "
        f"country {text}, city {text}, created_at {ts}, segment {text}, credit_limit {money})",
        f"CREATE TABLE products (id integer PRIMARY KEY, name {text}, category {text}, "
        f"price {money}, cost {money}, sku {text}, tags {tags}, attrs {js})",
        f"CREATE TABLE orders (id integer PRIMARY KEY, customer_id integer, order_date {date}, "
        f"created_at {ts}, status {text}, total {money}, shipping_country {text}, meta {js})",
        "CREATE TABLE order_items (id integer PRIMARY KEY, order_id integer, product_id integer, "
        f"quantity integer, unit_price {money}, discount {money})",
        "CREATE INDEX orders_customer ON orders (customer_id)",
        f"INSERT INTO customers VALUES {_rows(_CUSTOMERS)}",
        f"INSERT INTO products VALUES {_products(dialect)}",
        f"INSERT INTO orders VALUES {_rows(_ORDERS)}",
        f"INSERT INTO order_items VALUES {_rows(_ITEMS)}",
    ]


COUNT_QUERY = "SELECT " + ", ".join(f"(SELECT count(*) FROM {name})" for name in TABLES)
"""Row counts of the corpus tables, checked before and after the corpus runs."""
COUNTS = (len(_CUSTOMERS), len(_PRODUCTS), len(_ORDERS), len(_ITEMS))
