"""Shared data and helpers of the context tests: a small shop with personal data."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from pi_notebook import create_agent_session
from pi_notebook.database import database_extension
from pi_notebook.sql.backend import create_backend_engine
from pi_notebook.testing import ScriptedModel

POLICY = {"customers.email": "mask", "customers.phone": "drop"}

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
                (10, 1, 120.5, "delivered"),
                (11, 1, 30.0, "shipped"),
                (12, 2, 99.9, "delivered"),
            ]:
                conn.exec_driver_sql(
                    f"INSERT INTO orders VALUES ({order_id}, {customer_id}, {total}, '{status}')"
                )
    finally:
        sa_engine.dispose()


# -- sessions with a data policy ----------------------------------------------------------------
@contextlib.asynccontextmanager
async def opened(url: str, model: ScriptedModel, **kw: Any) -> AsyncIterator[Any]:
    """A session on ``url`` with the data policy (``POLICY`` unless given), closed after."""
    ext = database_extension(url=url, data_policy=kw.pop("data_policy", POLICY))
    kw.setdefault("audit", False)
    extensions = [ext, *kw.pop("extra", ())]
    session = create_agent_session(model=model, extensions=extensions, **kw)
    session.result_retention.keep = None  # every DataFrame stays: the checks read them all
    try:
        yield session
    finally:
        await session.close()


async def run(url: str, model: ScriptedModel, *prompts: str, **kw: Any) -> Any:
    """Run ``prompts`` in a fresh session (closed after); returns the session."""
    async with opened(url, model, **kw) as session:
        for prompt in prompts:
            await session.prompt(prompt)
    return session


def assert_nothing_leaked(model: ScriptedModel, values: set[str]) -> None:
    for i, call in enumerate(model.calls):  # what was sent (blocked requests never were)
        sent = call.payload_text.casefold()
        leaked = sorted(v for v in values if v.casefold() in sent)
        assert not leaked, f"request {i + 1} carries protected values {leaked}"
