"""``pi_notebook.database.engines()``: one row per engine, from the seam's own facts."""

from __future__ import annotations

import pi_notebook.database
from pi_notebook.sql import classify
from pi_notebook.sql.engines import ENGINES, engine_for_url


def test_engines_lists_each_engine_with_its_walls() -> None:
    frame = pi_notebook.database.engines()
    assert list(frame.columns) == ["engine", "dialect", "url_scheme", "read_only_backstop",
                                   "cancel", "arrow", "estimate", "tested_against"]  # fmt: skip
    assert list(frame["engine"]) == ["sqlite", "postgresql", "mysql", "duckdb", "clickhouse"]
    assert set(frame["tested_against"]) <= {"live", "emulator", "dialect only"}
    assert frame["arrow"].dtype == bool and frame["read_only_backstop"].str.len().min() > 20
    clickhouse = frame.set_index("engine").loc["clickhouse"]
    assert (
        clickhouse["dialect"] == "clickhouse" and "readonly=1" in clickhouse["read_only_backstop"]
    )
    assert clickhouse["url_scheme"].startswith("chdb:///") and "KILL QUERY" in clickhouse["cancel"]
    assert not clickhouse["arrow"]  # chDB's native DataFrame stream, not its Arrow output
    assert "EXPLAIN ESTIMATE" in clickhouse["estimate"]


def test_every_listed_engine_is_classified_and_dispatched() -> None:
    examples = {"sqlite": "sqlite:///x.db", "postgresql": "postgresql+psycopg://u@h/db",
                "mysql": "mysql+pymysql://u@h/db", "duckdb": "duckdb:///x.duckdb",
                "clickhouse": "chdb:///data/ch"}  # fmt: skip
    for info in ENGINES:
        assert classify("SELECT 1", info.dialect).kind == "read"
        assert classify("DELETE FROM t", info.dialect).kind == "write"
        assert engine_for_url(examples[info.engine]) is info
