"""Measuring a write on an open transaction: what it would change, and whether it may be run
to find out (the blocking half of the write preview and of the bounds check).

Runs in the backend's worker thread on a connection inside a transaction the caller opened
and will end. Two ways to count the rows a write changes:

* ``execute``: run the statement and read the engine's count, in a transaction that is
  rolled back. Only when a rollback is certain to undo everything: a DML statement whose
  every expression is a pure read (:class:`~.derive.WritePlan` ``pure``), on a table whose
  engine is transactional and that fires no trigger or rule (PostgreSQL: none on the
  table, its partitions, or any table that references it by foreign key; MySQL/MariaDB:
  InnoDB and no trigger; SQLite and DuckDB: DML is always transactional, SQLite triggers can
  only do DML, DuckDB has none). Sequences and AUTO_INCREMENT counters still advance: they
  are not rows, and no engine rolls them back.
* ``select``: run the derived ``SELECT count(*)``; the statement itself is not run. Used
  for everything else that has one (DDL, which MySQL/MariaDB commits implicitly; tables with
  triggers; non-transactional storage engines).

What does not belong here: deciding whether the statement may run at all, or the audit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd

from pi_notebook.sql.backend.derive import SAMPLE_ROWS, WritePlan

__all__ = [
    "METHOD_TEXT",
    "CountMethod",
    "Measured",
    "Result",
    "choose_method",
    "count_rows",
    "execute_counting",
    "explain",
    "query",
    "sample",
]

CountMethod = Literal["execute", "select", "static"]

METHOD_TEXT: dict[CountMethod, str] = {
    "execute": "counted by running the statement in a transaction that was rolled back",
    "select": "counted with SELECT count(*); the statement itself was not run",
    "static": "stated by the statement itself",
}
_PLAN_CHARS = 4_000
_DML_START = re.compile(r"^\s*(?:INSERT|UPDATE|DELETE|MERGE|REPLACE|WITH)\b", re.I)

# PostgreSQL: the table, its partitions, and every table reachable through foreign keys that
# reference it (cascades run their triggers); any user trigger or rule there, or a relation
# that is not a plain or partitioned table, makes a rollback uncertain.
_PG_SAFETY = """
WITH RECURSIVE rel(oid) AS (
    SELECT to_regclass(%s)::oid
    UNION SELECT i.inhrelid FROM pg_inherits i JOIN rel ON i.inhparent = rel.oid
), touched(oid) AS (
    SELECT oid FROM rel
    UNION SELECT c.conrelid FROM pg_constraint c JOIN touched t ON c.confrelid = t.oid
    WHERE c.contype = 'f'
)
SELECT
    (SELECT count(*) FROM rel WHERE oid IS NULL),
    (SELECT count(*) FROM pg_class WHERE oid IN (SELECT oid FROM rel) AND relkind NOT IN ('r', 'p')),
    (SELECT count(*) FROM pg_trigger WHERE tgrelid IN (SELECT oid FROM touched) AND NOT tgisinternal),
    (SELECT count(*) FROM pg_rewrite WHERE ev_class IN (SELECT oid FROM touched) AND rulename <> '_RETURN')
"""
_MYSQL_ENGINE = (
    "SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = COALESCE(%s, DATABASE()) "
    "AND TABLE_NAME = %s AND TABLE_TYPE = 'BASE TABLE'"
)
_MYSQL_TRIGGERS = (
    "SELECT count(*) FROM information_schema.TRIGGERS WHERE "
    "EVENT_OBJECT_SCHEMA = COALESCE(%s, DATABASE()) AND EVENT_OBJECT_TABLE = %s"
)


@dataclass(kw_only=True)
class Measured:
    """The blocking part of a preview, before it becomes a ``WritePreview``."""

    affected_rows: int | None = None
    method: CountMethod | None = None
    plan: str | None = None
    sample: pd.DataFrame | None = None
    notes: list[str]


@dataclass(frozen=True)
class Result:
    """What one statement returned: its columns (empty without a result set), rows, and the
    driver's row count."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    rowcount: int


def query(
    raw: Any,
    backend: str,
    sql: str,
    params: tuple[Any, ...] | None = None,
    limit: int | None = None,
) -> Result:
    """Run one statement on ``raw``; return its columns, (up to ``limit``) rows, rowcount."""
    # DuckDB: a cursor() is a second connection with its own transaction; use the connection.
    cur = raw.driver_connection if backend == "duckdb" else raw.cursor()
    try:
        if params:
            cur.execute(sql, params)
        else:
            cur.execute(sql)
        if cur.description is None:
            return Result([], [], int(cur.rowcount if cur.rowcount is not None else -1))
        columns = [str(d[0]) for d in cur.description]
        rows = cur.fetchmany(limit) if limit is not None else cur.fetchall()
        if backend == "duckdb" and limit is not None:
            cur.fetchall()  # DuckDB refuses the next statement while a result is open
        return Result(columns, [tuple(r) for r in rows], len(rows))
    finally:
        if backend != "duckdb":
            cur.close()


def choose_method(raw: Any, backend: str, plan: WritePlan) -> tuple[CountMethod | None, str | None]:
    """How the rows of ``plan``'s statement can be counted here, and why not ``execute``."""
    safe, why = _rollback_certain(raw, backend, plan)
    if safe:
        return "execute", None
    if plan.count_sql is not None:
        return "select", why
    if plan.static_rows is not None:
        return "static", why
    return None, why or plan.note


def _rollback_certain(raw: Any, backend: str, plan: WritePlan) -> tuple[bool, str | None]:
    if not plan.dml:
        return False, None
    if not plan.pure:
        return False, plan.note or "it evaluates something that is not a pure read"
    if plan.target is None:
        return False, plan.note or "the table it writes is not known"
    if backend in ("sqlite", "duckdb"):
        return True, None
    target = plan.target
    if backend == "postgresql":
        row = query(raw, backend, _PG_SAFETY, (target.sql,)).rows[0]
        missing, odd, triggers, rules = (int(v) for v in row)
        if missing or odd:
            return False, "the table is not a plain table"
        if triggers or rules:
            return False, "the table (or one referencing it) has triggers or rules"
        return True, None
    if backend == "mysql":
        schema = target.schema or None
        engines = query(raw, backend, _MYSQL_ENGINE, (schema, target.name)).rows
        if len(engines) != 1 or str(engines[0][0] or "").lower() != "innodb":
            return False, "the table is not an InnoDB table, so a rollback may not undo the write"
        triggers = query(raw, backend, _MYSQL_TRIGGERS, (schema, target.name)).rows
        if int(triggers[0][0]):
            return False, "the table has triggers"
        return True, None
    return False, f"no rollback check for {backend}"  # pragma: no cover


def explain(raw: Any, backend: str, sql: str) -> str | None:
    """The engine's plan of the DML statement ``sql`` (planned, never executed), as text.

    Only a text that starts with a DML keyword is prefixed with ``EXPLAIN`` (so the prefix
    can never combine with the text into ``EXPLAIN ANALYZE``, which executes).
    """
    if not _DML_START.match(sql):
        return None
    prefix = "EXPLAIN QUERY PLAN " if backend == "sqlite" else "EXPLAIN "
    rows = query(raw, backend, prefix + sql).rows
    if backend == "sqlite":
        lines = [str(r[-1]) for r in rows]
    elif backend == "duckdb":
        lines = [str(r[-1]) for r in rows]
    else:
        lines = [" | ".join("" if v is None else str(v) for v in r) for r in rows]
    text = "\n".join(lines).strip()
    return text if len(text) <= _PLAN_CHARS else text[: _PLAN_CHARS - 1] + "…"


def sample(raw: Any, backend: str, plan: WritePlan) -> pd.DataFrame | None:
    """Up to :data:`~.derive.SAMPLE_ROWS` rows the statement would touch, if derivable."""
    if plan.sample_sql is not None:
        got = query(raw, backend, plan.sample_sql, limit=SAMPLE_ROWS)
        return pd.DataFrame.from_records(got.rows, columns=got.columns)
    if plan.sample is not None:
        columns, rows = plan.sample
        return pd.DataFrame.from_records(rows, columns=columns)
    return None


def count_rows(raw: Any, backend: str, plan: WritePlan, method: CountMethod) -> int:
    """The count by ``select`` or ``static`` (``execute`` is :func:`execute_counting`)."""
    if method == "static" and plan.static_rows is not None:
        return plan.static_rows
    if method == "select" and plan.count_sql is not None:
        return int(query(raw, backend, plan.count_sql).rows[0][0])
    raise ValueError(f"no {method} count for this statement")


def execute_counting(raw: Any, backend: str, sql: str) -> int:
    """Run the write ``sql`` and return the rows it changed (rows it returned, with
    RETURNING). The caller decides whether the transaction commits."""
    got = query(raw, backend, sql)
    if backend == "duckdb" and got.columns == ["Count"] and len(got.rows) == 1:
        return int(got.rows[0][0])  # DuckDB answers DML with a one-row "Count" result
    return got.rowcount
