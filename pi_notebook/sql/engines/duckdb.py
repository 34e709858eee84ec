"""DuckDB on the seam (duckdb-engine, in a worker process under an OS memory cap: see
:mod:`pi_notebook.sql.backend.engine_process`)."""

from __future__ import annotations

from typing import Any

from pi_notebook.sql.engines.base import EngineInfo, ReadEstimate
from pi_notebook.sql.engines.plans import explain_prefix, leaves, not_planned, plan_json

__all__ = ["ENGINE", "estimate"]

ENGINE = EngineInfo(
    engine="duckdb",
    dialect="duckdb",
    url_scheme="duckdb:///PATH",
    schemes=("duckdb",),
    read_only_backstop="BEGIN TRANSACTION READ ONLY; no external access, no Python "
    "replacement scans, configuration locked",
    bounds="a LIMIT of the cap + 1 on the relation, bytes kept bounded; a worker process "
    "capped at memory_limit_bytes (RLIMIT_DATA), DuckDB's memory_limit at 60 % of it",
    cancel="the connection's interrupt() in the worker; the worker killed if it does not stop",
    write_preview="run in a transaction that is rolled back, else SELECT count(*)",
    estimate="EXPLAIN (FORMAT JSON): Estimated Cardinality of the plan's scans (rows only)",
    arrow=True,
    read_path="Arrow record batches",
    extra="db",
    modules=("duckdb", "duckdb_engine"),
    memory_capped=True,
)

SOURCE = "DuckDB EXPLAIN (Estimated Cardinality of the plan's scans; no byte estimate)"
_CARDINALITY = "Estimated Cardinality"


def estimate(raw: Any, sql: str) -> ReadEstimate:
    """What the read ``sql`` scans, from DuckDB's optimizer (plain ``EXPLAIN``: nothing
    runs), on ``raw`` inside the read's own read-only transaction. DuckDB gives no row
    width, so ``bytes`` is ``None`` (a byte budget alone never holds a DuckDB read)."""
    explain = explain_prefix(sql)
    if explain is None:
        return not_planned(sql)
    # A cursor() would be a second connection with its own transaction: use the connection.
    found = raw.driver_connection.execute(explain).fetchall()
    plans = [plan_json(value) for _kind, value in found]
    counts = [
        int(node["extra_info"][_CARDINALITY])
        for node in leaves(plans, "children")
        if str(node.get("extra_info", {}).get(_CARDINALITY, "")).isdigit()
    ]
    if not counts:
        return ReadEstimate(
            rows=None, bytes=None, source="DuckDB EXPLAIN: no cardinality estimate in the plan"
        )
    return ReadEstimate(rows=sum(counts), bytes=None, source=SOURCE)
