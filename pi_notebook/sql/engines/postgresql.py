"""PostgreSQL on the seam (SQLAlchemy with psycopg 3)."""

from __future__ import annotations

from typing import Any

from pi_notebook.sql.backend.readonly import take_pending_begin
from pi_notebook.sql.engines.base import EngineInfo, ReadEstimate
from pi_notebook.sql.engines.plans import explain_prefix, leaves, not_planned, plan_json

__all__ = ["ENGINE", "estimate"]

ENGINE = EngineInfo(
    engine="postgresql",
    dialect="postgres",
    url_scheme="postgresql+psycopg://user@host:5432/db",
    schemes=("postgresql",),
    read_only_backstop="BEGIN READ ONLY with SET LOCAL statement_timeout",
    bounds="a server-side cursor FETCHes to the cap + 1, in batches sized by the byte bound",
    cancel="libpq's cancel request (psycopg cancel_safe)",
    write_preview="run in a transaction that is rolled back, else SELECT count(*)",
    estimate="EXPLAIN (FORMAT JSON): Plan Rows of the plan's scans, x Plan Width as bytes",
    arrow=True,
    read_path="rows, or ADBC's Arrow for large reads",
    extra="db",
    modules=("psycopg",),
)

SOURCE = "PostgreSQL EXPLAIN (planner's Plan Rows x Plan Width of the plan's scans)"


def estimate(raw: Any, sql: str) -> ReadEstimate:
    """What the read ``sql`` scans, from the planner (never ``EXPLAIN ANALYZE``: nothing
    runs), on ``raw`` inside the read's own read-only transaction. The transaction's
    ``BEGIN`` (when still pending), the ``EXPLAIN`` and the ``ROLLBACK`` go in one message."""
    explain = explain_prefix(sql)
    if explain is None:
        return not_planned(sql)
    begin = take_pending_begin(raw)
    text = f"{begin}; {explain}; ROLLBACK" if begin is not None else explain
    cur = raw.driver_connection.cursor()
    try:
        cur.execute(text)
        while cur.description is None and cur.nextset():  # on to the EXPLAIN's result
            pass
        row = cur.fetchone()
    finally:
        cur.close()
    plan = plan_json(row[0] if row else None)
    top = plan[0]["Plan"] if isinstance(plan, list) and plan else None
    scans = list(leaves(top, "Plans"))
    if not scans:
        return ReadEstimate(rows=None, bytes=None, source="PostgreSQL EXPLAIN: no plan")
    rows = sum(int(node.get("Plan Rows", 0)) for node in scans)
    size = sum(int(node.get("Plan Rows", 0)) * int(node.get("Plan Width", 0)) for node in scans)
    return ReadEstimate(rows=rows, bytes=size, source=SOURCE)
