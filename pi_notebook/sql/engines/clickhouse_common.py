"""What the two ClickHouse paths share (chDB embedded, a server through clickhouse-connect):
the statement text the tool sends, the write plan of a mutation, ``EXPLAIN ESTIMATE`` and the
catalog read. Each path runs the statements its own way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
from sqlalchemy.engine import URL

from pi_notebook.sql import classify, lexical
from pi_notebook.sql.backend.derive import WritePlan, plan_write
from pi_notebook.sql.backend.fetch import RunSettings
from pi_notebook.sql.engines.base import ReadEstimate
from pi_notebook.sql.engines.direct import DirectBackend, statement_body

__all__ = [
    "NO_ROLLBACK",
    "READ_CLAUSE",
    "ROW_STARTS",
    "STREAMED",
    "ClickHouseBackend",
    "ClickHouseCatalog",
    "clickhouse_plan",
    "explain_estimate",
    "first_word",
    "has_totals",
    "mutated_table",
    "quote",
    "read_limits",
]

ROW_STARTS = frozenset({"SELECT", "WITH", "SHOW", "DESCRIBE", "DESC", "EXPLAIN", "EXISTS"})
"""First words of statements that return rows (an approved ``SELECT ... SETTINGS`` too)."""
STREAMED = frozenset({"SELECT", "WITH"})
"""Of those, the ones read as a stream (block by block, so a read stops at its bounds)."""
READ_CLAUSE = "\nSETTINGS readonly = 1"
"""After every read, which runs with ``readonly=1`` already: the same value, so allowed, but
only statements that take a SETTINGS clause parse with it (``SYSTEM``, ``USE`` do not:
readonly alone lets them run)."""
NO_ROLLBACK = (
    "ClickHouse has no transactions: what the write had done before it was stopped stays "
    "(blocks already inserted; parts a mutation had already rewritten, its unfinished rest "
    "killed)"
)
"""What a stopped write's error says instead of "nothing was written"."""


class ClickHouseBackend(DirectBackend):
    """What chDB's and a server's backends share beyond :class:`DirectBackend`: the write
    plan of a mutation, ``EXPLAIN ESTIMATE``, and what a stopped write leaves behind."""

    engine_name = "ClickHouse"
    no_rollback = NO_ROLLBACK
    dialect = "clickhouse"

    def _plan(self, sql: str) -> WritePlan:
        return clickhouse_plan(sql)

    def _estimate(
        self, sql: str, *, canceller: Any, progress: Callable[[int], None] | None = None
    ) -> ReadEstimate:
        """``EXPLAIN ESTIMATE`` and the tables' widths, read-only, in one call on the worker."""
        return explain_estimate(sql, lambda text: self._read_frame(text, canceller), canceller)


def read_limits(settings: RunSettings, memory_limit: int) -> dict[str, str]:
    """The settings every read runs with: ``readonly=1`` (which no statement can lift), the
    statement timeout, the memory limit and a result row limit (``break``: past it the
    result ends, it does not fail)."""
    return {
        "readonly": "1",
        "max_execution_time": f"{settings.statement_timeout_s:g}",
        "max_memory_usage": str(memory_limit),
        "max_result_rows": str(settings.count_limit),
        "result_overflow_mode": "break",
    }


def clickhouse_plan(sql: str) -> WritePlan:
    """:func:`plan_write`, plus ClickHouse's mutations: ``ALTER TABLE t DELETE WHERE c`` and
    ``ALTER TABLE t UPDATE ... WHERE c`` change the rows of ``SELECT count() FROM t WHERE c``
    (kept only when that count is itself a read)."""
    plan = plan_write(sql, "clickhouse")
    if plan.count_sql is not None or plan.static_rows is not None:
        return plan
    tokens = [t for t in lexical.tokens_of(sql, "clickhouse") if t.text != ";"]
    words = [lexical.word(t) for t in tokens]
    if words[:2] != ["ALTER", "TABLE"] or len(tokens) < 6:
        return plan
    verb = next((i for i, w in enumerate(words) if w in ("DELETE", "UPDATE")), None)
    if verb is None or verb < 3 or "ON" in words[2:verb]:
        return plan  # ON CLUSTER, or no table name
    depth, where = 0, None
    for index in range(verb + 1, len(tokens)):
        text = tokens[index].text
        depth += (text == "(") - (text == ")")
        if depth == 0 and words[index] == "WHERE":
            where = index
            break
    if where is None or where + 1 >= len(tokens):
        return plan
    table = sql[tokens[2].start : tokens[verb - 1].end + 1]
    condition = sql[tokens[where + 1].start : tokens[-1].end + 1]
    count_sql = f"SELECT count() FROM {table} WHERE {condition}"
    sample_sql = f"SELECT * FROM {table} WHERE {condition} LIMIT 5"
    if classify(count_sql, "clickhouse").kind != "read":
        return plan
    operation = "DELETE" if words[verb] == "DELETE" else "UPDATE"
    return WritePlan(
        operation=operation,
        dml=True,
        count_sql=count_sql,
        sample_sql=sample_sql if classify(sample_sql, "clickhouse").is_read else None,
    )


def first_word(sql: str) -> str:
    """The statement's first keyword, upper case (past opening parentheses), or ""."""
    tokens = lexical.tokens_of(sql, "clickhouse")
    first = next((t for t in tokens if t.text != "("), None)
    return lexical.word(first) if first is not None else ""


def has_totals(sql: str) -> bool:
    """``GROUP BY ... WITH TOTALS``: chDB's DataFrame stream fails after the totals block."""
    return "TOTALS" in {lexical.word(t) for t in lexical.tokens_of(sql, "clickhouse")}


def mutated_table(sql: str) -> tuple[str, str] | None:
    """``(database, table)`` a mutation changes (``ALTER TABLE t UPDATE/DELETE``, ``DELETE
    FROM t``), ``database`` "" when not named; ``None`` for any other statement."""
    tokens = [t for t in lexical.tokens_of(sql, "clickhouse") if t.text != ";"]
    words = [lexical.word(t) for t in tokens]
    if words[:2] == ["ALTER", "TABLE"]:
        verb = next((i for i, w in enumerate(words) if w in ("DELETE", "UPDATE")), None)
        names = tokens[2:verb] if verb is not None else []
    elif words[:2] == ["DELETE", "FROM"]:
        end = next((i for i, w in enumerate(words) if w in ("WHERE", "ON", "IN")), len(words))
        names = tokens[2:end]
    else:
        return None
    parts = [t.text.strip('`"') for t in names if t.text != "."]
    if not 1 <= len(parts) <= 2:
        return None
    return (parts[0], parts[1]) if len(parts) == 2 else ("", parts[0])


def quote(text: str) -> str:
    """``text`` as a ClickHouse string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def explain_estimate(sql: str, read: Callable[[str], pd.DataFrame], canceller: Any) -> ReadEstimate:
    """What the read ``sql`` would scan, from ``EXPLAIN ESTIMATE`` (rows of the MergeTree
    tables it reads, after primary-key and partition pruning) times each table's uncompressed
    bytes per row (all its columns: an upper bound for a read of a few). ``read`` runs a
    derived read read-only and returns its rows; a failing ``EXPLAIN`` is said, not raised
    (unless ``canceller`` has a reason: Stop or the timeout)."""
    word = first_word(sql)
    if word not in STREAMED:
        return ReadEstimate(
            rows=None, bytes=None, source=f"no estimate for {word or 'this'} statements"
        )
    try:
        parts = read(f"EXPLAIN ESTIMATE {statement_body(sql, 'clickhouse')}")
    except Exception as exc:
        if canceller.reason is not None:
            raise
        text = " ".join(str(exc).split())[:200]
        return ReadEstimate(rows=None, bytes=None, source=f"EXPLAIN ESTIMATE failed: {text}")
    if parts.empty:
        return ReadEstimate(
            rows=None,
            bytes=None,
            source="EXPLAIN ESTIMATE: no MergeTree "
            "table to estimate (table functions, Memory tables)",
        )
    rows = {
        (str(db), str(table)): int(n)
        for db, table, n in parts[["database", "table", "rows"]].itertuples(index=False, name=None)
    }
    wanted = ", ".join(f"({quote(db)}, {quote(table)})" for db, table in rows)
    widths = read(
        "SELECT database, table, sum(data_uncompressed_bytes) / greatest(sum(rows), "
        f"1) AS width FROM system.parts WHERE active AND (database, table) IN ({wanted}) "
        "GROUP BY database, table"
    )
    width = {
        (str(db), str(table)): float(w)
        for db, table, w in widths.itertuples(index=False, name=None)
    }
    total = sum(rows.values())
    size = int(sum(n * width.get(key, 0.0) for key, n in rows.items()))
    return ReadEstimate(
        rows=total,
        bytes=size,
        source="ClickHouse EXPLAIN ESTIMATE (rows "
        "after pruning) x the tables' uncompressed bytes per row",
    )


TableRow = tuple[str, str, str | None]
"""A table of :meth:`ClickHouseCatalog.catalog`: name, kind (``table`` or ``view``), comment."""
ColumnRow = tuple[str, str, str, bool, str | None, bool]
"""A column of :meth:`ClickHouseCatalog.catalog`: table, name, type, nullable, comment, in
the key."""


class ClickHouseCatalog:
    """The catalog of a ClickHouse database, as plain rows for the schema cache of the
    database extension (``pi_notebook.database.schema``), which builds its schema from them.

    Args:
        read: runs a read-only query and returns its rows (blocking).
        url: the database's URL.
    """

    dialect = "clickhouse"

    def __init__(self, read: Callable[[str], pd.DataFrame], url: URL) -> None:
        self._read = read
        self.url = url

    def catalog(self) -> tuple[list[TableRow], list[ColumnRow]]:
        """Tables and columns of the current database, as plain rows (blocking).

        Tables: ``(name, kind, comment)``, kind ``view`` or ``table``. Columns: ``(table, name,
        type, nullable, comment, in_primary_key)``, in each table's column order.
        """
        tables = self._read(
            "SELECT name, engine, comment FROM system.tables WHERE database = currentDatabase() "
            "ORDER BY name"
        )
        columns = self._read(
            "SELECT table, name, type, comment, is_in_primary_key FROM system.columns WHERE "
            "database = currentDatabase() ORDER BY table, position"
        )
        table_rows: list[TableRow] = [
            (str(name), "view" if "View" in str(engine) else "table", str(comment) or None)
            for name, engine, comment in tables.itertuples(index=False, name=None)
        ]
        column_rows: list[ColumnRow] = [
            (
                str(table),
                str(name),
                str(type_),
                str(type_).startswith("Nullable("),
                str(comment) or None,
                bool(in_key),
            )
            for table, name, type_, comment, in_key in columns.itertuples(index=False, name=None)
        ]
        return table_rows, column_rows
