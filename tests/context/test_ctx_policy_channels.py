"""Value channels that are not projections, through real sessions on SQLite, DuckDB and
PostgreSQL: a value computed from a protected column keeps its protection however it reaches
the output (a count over a set it sizes, LIMIT/OFFSET, a length, an order, a condition that
relates it to a generated series, storage statistics), while counts of rows stay visible."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd
import pytest
from ctx_support import EMAILS, NAMES, PHONES, assert_nothing_leaked, run

from pi_notebook.ai.messages import content_text
from pi_notebook.testing import ScriptedApprovalUI, ScriptedModel, text, tool_call

POLICY = {
    "version": "v-channels",
    "columns": {"customers.email": "mask", "customers.phone": "drop", "customers.name": "mask"},
}

Secrets = Callable[[pd.DataFrame], set[str]]


def cells(frame: pd.DataFrame) -> set[str]:
    """Every value of the result (two characters or more: one digit says nothing)."""
    return {str(v) for v in frame.to_numpy().ravel() if v is not None and len(str(v)) >= 2}


def row_count(frame: pd.DataFrame) -> set[str]:
    """How many rows the result has (the channel is the size, not the cells)."""
    return {str(len(frame))}


def first_and_count(frame: pd.DataFrame) -> set[str]:
    return {str(frame.iloc[0, 0]), str(len(frame))}


def column(name: str) -> Secrets:
    return lambda frame: {str(v) for v in frame[name] if v is not None}


def emails_within(frame: pd.DataFrame) -> set[str]:
    """The protected emails that occur inside any value of the result (an XML document)."""
    text = " ".join(str(v) for v in frame.to_numpy().ravel())
    return {e for e in EMAILS if e in text}


@dataclass(frozen=True)
class Channel:
    secrets: Secrets
    sql: dict[str, str]  # engine -> statement (absent: not valid there)
    approved: bool = False  # the statement is no plain read: the user approves it


def _codes(call: str, pairs: list[tuple[str, int]]) -> str:
    return ", ".join(call.format(col=c, i=i) + f" AS {c[0]}{i}" for c, i in pairs)


_PAIRS = [("email", 1), ("email", 2), ("phone", 2), ("name", 1)]
_SQLITE_SERIES = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300) "
_BY_GENERATOR = "(SELECT count(*) FROM generate_series(1, ascii(substr(c.{col}, {i}, 1))))"
_FIRST = "(SELECT ascii(substr(email, {i}, 1)) FROM customers WHERE customer_id = 1)"
_SQLITE_FIRST = "(SELECT unicode(substr(email, {i}, 1)) FROM customers WHERE customer_id = 1)"

CHANNELS: dict[str, Channel] = {
    # one column per character: every protected value in one query
    "count over a generator sized by the value": Channel(
        cells,
        {
            "postgres": f"SELECT {_codes(_BY_GENERATOR, _PAIRS)} FROM customers c",
            "duckdb": f"SELECT {_codes(_BY_GENERATOR, _PAIRS)} FROM customers c",
            "sqlite": "SELECT "
            + _codes(
                "(WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
                "WHERE i < unicode(substr(c.{col}, {i}, 1))) SELECT count(*) FROM n)",
                _PAIRS,
            )
            + " FROM customers c",
        },
    ),
    "count over a generator, unqualified column": Channel(
        cells,
        {
            "postgres": "SELECT (SELECT count(*) FROM generate_series(1, ascii(substr(email, 1, 1)))) "
            "AS e1, (SELECT count(*) FROM generate_series(1, ascii(substr(email, 2, 1)))) AS e2 "
            "FROM customers",
            "duckdb": "SELECT (SELECT count(*) FROM generate_series(1, ascii(substr(email, 1, 1)))) "
            "AS e1 FROM customers",
        },
    ),
    "unnest count (a length)": Channel(
        cells,
        {
            "postgres": "SELECT (SELECT count(*) FROM unnest(string_to_array(c.email, NULL))) AS n1, "
            "(SELECT count(*) FROM unnest(string_to_array(c.phone, NULL))) AS n2 FROM customers c",
            "duckdb": "SELECT (SELECT count(*) FROM unnest(string_split(c.email, ''))) AS n1, "
            "(SELECT count(*) FROM unnest(string_split(c.phone, ''))) AS n2 FROM customers c",
        },
    ),
    "set-returning function counted": Channel(
        cells,
        {
            "postgres": "SELECT count(*) AS n FROM (SELECT unnest(string_to_array(email, NULL)) "
            "FROM customers WHERE customer_id = 1) s",
            "duckdb": "SELECT count(*) AS n FROM (SELECT unnest(string_split(email, '')) "
            "FROM customers WHERE customer_id = 1) s",
        },
    ),
    "LIMIT sized by the value": Channel(
        row_count,
        {
            "postgres": f"SELECT g FROM generate_series(1, 300) AS t(g) LIMIT {_FIRST.format(i=1)}",
            "duckdb": f"SELECT g FROM generate_series(1, 300) AS t(g) LIMIT {_FIRST.format(i=1)}",
            "sqlite": f"{_SQLITE_SERIES}SELECT i FROM n LIMIT {_SQLITE_FIRST.format(i=1)}",
        },
    ),
    "OFFSET sized by the value": Channel(
        first_and_count,
        {
            "postgres": "SELECT g FROM generate_series(1, 300) AS t(g) ORDER BY g "
            f"OFFSET {_FIRST.format(i=2)}",
            "duckdb": "SELECT g FROM generate_series(1, 300) AS t(g) ORDER BY g "
            f"OFFSET {_FIRST.format(i=2)}",
            "sqlite": f"{_SQLITE_SERIES}SELECT i FROM n ORDER BY i LIMIT -1 "
            f"OFFSET {_SQLITE_FIRST.format(i=2)}",
        },
    ),
    "ORDER BY a protected column": Channel(
        cells,
        dict.fromkeys(
            ("postgres", "duckdb", "sqlite"), "SELECT city FROM customers ORDER BY email"
        ),
    ),
    "rank over a protected column": Channel(
        column("city"),
        dict.fromkeys(
            ("postgres", "duckdb", "sqlite"),
            "SELECT city, rank() OVER (ORDER BY email) AS r FROM customers ORDER BY r",
        ),
    ),
    "rank by a counted comparison": Channel(
        column("r"),
        dict.fromkeys(
            ("postgres", "duckdb", "sqlite"),
            "SELECT c.city, 40 + (SELECT count(*) FROM customers c2 WHERE c2.email < c.email) AS r "
            "FROM customers c",
        ),
    ),
    "condition against a generated series": Channel(
        column("g"),
        {
            "postgres": "SELECT i, g FROM customers, generate_series(1, 4) AS s(i), "
            "generate_series(32, 126) AS t(g) WHERE customer_id = 1 AND ascii(substr(email, i, 1)) = g",
            "duckdb": "SELECT i, g FROM customers, generate_series(1, 4) AS s(i), "
            "generate_series(32, 126) AS t(g) WHERE customer_id = 1 AND ascii(substr(email, i, 1)) = g",
            "sqlite": f"{_SQLITE_SERIES}SELECT a.i AS i, b.i AS g FROM customers, n AS a, n AS b "
            "WHERE customer_id = 1 AND a.i <= 4 AND unicode(substr(email, a.i, 1)) = b.i",
        },
    ),
    "EXISTS against a generated series": Channel(
        cells,
        {
            "postgres": "SELECT g FROM generate_series(32, 126) AS t(g) WHERE EXISTS "
            "(SELECT 1 FROM customers WHERE customer_id = 1 AND ascii(substr(email, 1, 1)) = t.g)",
            "duckdb": "SELECT g FROM generate_series(32, 126) AS t(g) WHERE EXISTS "
            "(SELECT 1 FROM customers WHERE customer_id = 1 AND ascii(substr(email, 1, 1)) = t.g)",
            "sqlite": f"{_SQLITE_SERIES}SELECT i FROM n WHERE EXISTS (SELECT 1 FROM customers "
            "WHERE customer_id = 1 AND unicode(substr(email, 1, 1)) = n.i)",
        },
    ),
    "count of a condition against a generated series": Channel(
        cells,
        {
            "postgres": "SELECT (SELECT count(CASE WHEN t.g < ascii(substr(c.email, 1, 1)) THEN 1 END) "
            "FROM generate_series(1, 255) AS t(g)) + 1 AS e1 FROM customers c",
            "duckdb": "SELECT (SELECT count(CASE WHEN t.g < ascii(substr(c.email, 1, 1)) THEN 1 END) "
            "FROM generate_series(1, 255) AS t(g)) + 1 AS e1 FROM customers c",
            "sqlite": "SELECT (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE "
            "i < 255) SELECT count(CASE WHEN n.i < unicode(substr(c.email, 1, 1)) THEN 1 END) + 1 "
            "FROM n) AS e1 FROM customers c",
        },
    ),
    "count of a value computed over a generated series": Channel(
        cells,
        {
            "postgres": "SELECT count(CASE WHEN x.flag THEN 1 END) + 1 AS e1 FROM (SELECT t.g < "
            "ascii(substr(c.email, 1, 1)) AS flag FROM customers c, generate_series(1, 255) AS t(g) "
            "WHERE c.customer_id = 1) x",
            "duckdb": "SELECT count(CASE WHEN x.flag THEN 1 END) + 1 AS e1 FROM (SELECT t.g < "
            "ascii(substr(c.email, 1, 1)) AS flag FROM customers c, generate_series(1, 255) AS t(g) "
            "WHERE c.customer_id = 1) x",
            "sqlite": f"{_SQLITE_SERIES}SELECT count(CASE WHEN x.flag THEN 1 END) + 1 AS e1 FROM "
            "(SELECT n.i < unicode(substr(c.email, 1, 1)) AS flag FROM customers c, n "
            "WHERE c.customer_id = 1) x",
        },
    ),
    "condition on a derived table that merged a series": Channel(
        cells,
        {
            "postgres": "SELECT count(*) + 1 AS e1 FROM (SELECT t.g AS g, ascii(substr(c.email, 1, 1)) "
            "AS a FROM customers c, generate_series(1, 255) AS t(g) WHERE c.customer_id = 1) x "
            "WHERE x.g < x.a",
            "duckdb": "SELECT count(*) + 1 AS e1 FROM (SELECT t.g AS g, ascii(substr(c.email, 1, 1)) "
            "AS a FROM customers c, generate_series(1, 255) AS t(g) WHERE c.customer_id = 1) x "
            "WHERE x.g < x.a",
            "sqlite": f"{_SQLITE_SERIES}SELECT count(*) + 1 AS e1 FROM (SELECT n.i AS g, "
            "unicode(substr(c.email, 1, 1)) AS a FROM customers c, n WHERE c.customer_id = 1) x "
            "WHERE x.g < x.a",
        },
    ),
    "rank kept by a condition on a derived table": Channel(
        cells,
        dict.fromkeys(
            ("postgres", "duckdb", "sqlite"),
            "SELECT x.city FROM (SELECT city, row_number() OVER (ORDER BY email) AS rn "
            "FROM customers) x WHERE x.rn = 1",
        ),
    ),
    "QUALIFY by rank": Channel(
        cells,
        {
            "duckdb": "SELECT city FROM customers QUALIFY row_number() OVER (ORDER BY email) = 1",
        },
    ),
    "row count of a result without lineage": Channel(
        row_count,
        {
            "postgres": "SELECT g FROM generate_series(1, 300) AS t(g) WHERE g > (SELECT count(*) "
            f"FROM pg_class WHERE false) LIMIT {_FIRST.format(i=1)}",
            "duckdb": "SELECT g FROM generate_series(1, 300) AS t(g) WHERE g > (SELECT count(*) "
            f"FROM duckdb_tables() WHERE false) LIMIT {_FIRST.format(i=1)}",
            "sqlite": f"{_SQLITE_SERIES}SELECT i FROM n WHERE i > (SELECT count(*) FROM "
            f"pragma_table_list WHERE 0) LIMIT {_SQLITE_FIRST.format(i=1)}",
        },
    ),
    "storage statistics (min/max prefixes)": Channel(
        column("stats"),
        {
            "duckdb": "SELECT column_name, stats FROM pragma_storage_info('customers')",
        },
    ),
    "SQL run from a string the policy cannot read": Channel(
        emails_within,
        {
            "postgres": "SELECT CAST(xpath('//email/text()', query_to_xml('SELECT em' || 'ail FROM "
            "cust' || 'omers', true, false, '')) AS text) AS x",
            "duckdb": "SELECT e FROM query('SELECT em' || 'ail AS e FROM cust' || 'omers')",
        },
        approved=True,
    ),
}


def shows(body: str, value: str) -> bool:
    """Whether the model's text shows ``value``: as a word when it is a number, else anywhere."""
    if re.fullmatch(r"-?\d+(\.\d+)?", value):
        return re.search(rf"(?<![\w.]){re.escape(value)}(?![\w]|\.\d)", body) is not None
    return value.casefold() in body.casefold()


@pytest.mark.parametrize("name", list(CHANNELS))
async def test_value_channels_carry_their_protection(name: str, shop) -> None:
    engine, url = shop
    channel = CHANNELS[name]
    sql = channel.sql.get(engine)
    if sql is None:
        pytest.skip(f"not a valid statement on {engine}")
    model = ScriptedModel([tool_call("query_database", {"sql": sql}, id="q"), text("done")])
    ui = ScriptedApprovalUI("approved") if channel.approved else None
    session = await run(url, model, "Find the customers' details.", data_policy=POLICY, ui=ui)
    [result] = [m for m in session.messages if m.role == "toolResult"]
    body = content_text(result.content)
    assert not result.is_error, body
    frame = result.details["dataframe"]
    assert isinstance(frame, pd.DataFrame) and len(frame) > 0  # the analyst has the result
    secrets = channel.secrets(frame)
    assert secrets, f"{name}: the statement returned nothing to protect"
    shown = sorted(s for s in secrets if shows(body, s))
    assert not shown, f"{name} showed {shown}:\n{body}"
    assert result.details["protected_columns"], body
    assert_nothing_leaked(model, {*EMAILS, *PHONES, *NAMES, *(s for s in secrets if len(s) > 3)})


STAY_VISIBLE = {
    "count(*)": ("SELECT count(*) AS n FROM customers", ["3"]),
    "count(DISTINCT email)": ("SELECT count(DISTINCT email) AS n FROM customers", ["3"]),
    "GROUP BY city": (
        "SELECT city, count(*) AS n FROM customers GROUP BY city ORDER BY city",
        ["London | 1", "Manchester | 1", "New York | 1"],
    ),
    "a predicate on a protected column (documented: a few bits)": (
        "SELECT count(*) AS n FROM customers WHERE email LIKE 'a%'",
        ["2"],
    ),
    "rows kept by a predicate": (
        "SELECT city FROM customers WHERE email LIKE 'a%' ORDER BY city",
        ["London", "Manchester"],
    ),
    "a join on an unprotected key": (
        "SELECT c.city, count(o.order_id) AS n FROM customers c JOIN orders o "
        "ON o.customer_id = c.customer_id GROUP BY c.city ORDER BY c.city",
        ["London | 2", "New York | 1"],
    ),
    "a count over a fixed series": (
        "SELECT count(*) AS n FROM (SELECT 1 AS x UNION ALL SELECT 2 UNION ALL SELECT 3) s "
        "CROSS JOIN customers",
        ["9"],
    ),
}


async def test_counts_of_rows_stay_visible(shop) -> None:
    _, url = shop
    steps = [
        tool_call("query_database", {"sql": sql}, id=name)
        for name, (sql, _) in STAY_VISIBLE.items()
    ]
    model = ScriptedModel([*steps, text("done")])
    session = await run(url, model, "How many customers?", data_policy=POLICY)
    shown = {
        m.tool_call_id: content_text(m.content) for m in session.messages if m.role == "toolResult"
    }
    for name, (_, expected) in STAY_VISIBLE.items():
        body = shown[name]
        assert "Data policy" not in body and "withheld" not in body, f"{name}: {body}"
        missing = [e for e in expected if not shows(body, e)]
        assert not missing, f"{name}: {missing} not in\n{body}"
    assert_nothing_leaked(model, {*EMAILS, *PHONES, *NAMES})


async def test_hash_shows_only_stored_values_and_masks_what_is_computed(shop) -> None:
    """Equal digests of a length, a letter or an order would give them away (a UNION with a
    guess compares digests): only a column as stored is hashed."""
    _, url = shop
    queries = {
        "stored": "SELECT email FROM customers ORDER BY customer_id",
        "length": "SELECT length(email) AS n FROM customers",
        "letter with a guess": "SELECT substr(email, 1, 1) AS l FROM customers UNION ALL SELECT 'a'",
        "ordered constant": "SELECT 'London' AS x FROM customers ORDER BY email",
        "first two by order": "SELECT email FROM customers ORDER BY email LIMIT 2",
    }
    steps = [tool_call("query_database", {"sql": sql}, id=name) for name, sql in queries.items()]
    model = ScriptedModel([*steps, text("done")])
    policy = {"customers.email": "hash"}
    session = await run(url, model, "go", data_policy=policy)
    shown = {
        m.tool_call_id: content_text(m.content) for m in session.messages if m.role == "toolResult"
    }
    assert shown["stored"].count("\nh:") == 3, shown["stored"]
    first_two = shown["first two by order"]  # the order cuts which rows, not how many
    assert first_two.startswith("2 row(s)") and first_two.count("\nh:") == 2, first_two
    for name in ("length", "letter with a guess", "ordered constant"):
        body = shown[name]
        assert "h:" not in body and "[masked]" in body, f"{name}: {body}"
    assert_nothing_leaked(model, set(EMAILS))
