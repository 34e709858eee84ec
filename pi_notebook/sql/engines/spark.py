"""Spark SQL on the seam: its dialect and policy table only ("dialect only": no connection)."""

from pi_notebook.sql.engines.base import EngineInfo

__all__ = ["ENGINE"]

ENGINE = EngineInfo(
    engine="spark",
    dialect="spark",
    url_scheme="sc://HOST:15002",
    schemes=("sc",),
    read_only_backstop="none: the classifier only (Spark has no read-only mode); the tool "
    "cannot connect to Spark yet",
    bounds="none yet: the tool cannot connect to Spark",
    cancel=None,
    write_preview="none yet: the tool cannot connect to Spark",
    connects=False,
    tested_against="dialect only",
)
