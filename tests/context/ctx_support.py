"""Shared data and helpers of the context tests: a small shop with personal data."""

from __future__ import annotations

from pi_notebook.sql.backend import create_backend_engine

# -- a small shop with personal data, on each engine ------------------------------------------
CUSTOMERS = [
    (1, "Ada Lovelace", "ada.lovelace@example.org", "+44 20 7946 0001", "London"),
    (2, "Grace Hopper", "grace.hopper@example.net", "+1 212 555 0142", "New York"),
    (3, "Alan Turing", "alan.turing@example.com", "+44 161 496 0753", "Manchester"),
]
EMAILS = [c[2] for c in CUSTOMERS]
PHONES = [c[3] for c in CUSTOMERS]
NAMES = [c[1] for c in CUSTOMERS]

_COMMENTS = {
    "postgres": [
        "COMMENT ON TABLE customers IS 'People who buy'",
        "COMMENT ON COLUMN customers.email IS 'contact address'",
    ],
    "duckdb": [
        "COMMENT ON TABLE customers IS 'People who buy'",
        "COMMENT ON COLUMN customers.email IS 'contact address'",
    ],
    "mysql": [
        "ALTER TABLE customers COMMENT = 'People who buy'",
        "ALTER TABLE customers MODIFY email VARCHAR(100) NOT NULL COMMENT 'contact address'",
    ],
}


def build_shop(url: str, engine: str) -> None:
    """customers (with email and phone), orders referencing them, and a view over both."""
    sa_engine = create_backend_engine(url)
    try:
        with sa_engine.begin() as conn:
            for ddl in (
                "CREATE TABLE customers (customer_id INTEGER PRIMARY KEY, name VARCHAR(100) NOT NULL, "
                "email VARCHAR(100) NOT NULL, phone VARCHAR(40), city VARCHAR(40))",
                "CREATE TABLE orders (order_id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL "
                "REFERENCES customers (customer_id), total NUMERIC(10, 2), status VARCHAR(20))",
                "CREATE VIEW customer_contacts AS SELECT name, email FROM customers",
                *_COMMENTS.get(engine, []),
            ):
                conn.exec_driver_sql(ddl)
            for row in CUSTOMERS:
                conn.exec_driver_sql(
                    "INSERT INTO customers VALUES ({}, '{}', '{}', '{}', '{}')".format(*row)
                )
            for order_id, customer_id, total, status in [
                (10, 1, 120.5, "delivered"), (11, 1, 30.0, "shipped"), (12, 2, 99.9, "delivered"),
            ]:  # fmt: skip
                conn.exec_driver_sql(
                    f"INSERT INTO orders VALUES ({order_id}, {customer_id}, {total}, '{status}')"
                )
    finally:
        sa_engine.dispose()
