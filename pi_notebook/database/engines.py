"""``engines()``: the table of engines the tool runs, with each one's walls (third wave).

One row per engine on the seam (:mod:`pi_notebook.sql.engines`): the four first-wave engines
and ClickHouse through chDB; a ClickHouse server and Trino, which the tool connects to but
whose client paths were tested against a scripted HTTP server only (``dialect only``, and
their rows say so); then the warehouses whose dialect alone is supported so far (Spark SQL,
Snowflake, BigQuery: ``dialect only``, their URLs refused).
"""

from __future__ import annotations

import pandas as pd

from pi_notebook.sql.engines import ENGINES

__all__ = ["ENGINE_COLUMNS", "engines"]

ENGINE_COLUMNS = (
    "engine",
    "dialect",
    "url_scheme",
    "read_only_backstop",
    "cancel",
    "arrow",
    "estimate",
    "tested_against",
)


def engines() -> pd.DataFrame:
    """One row per engine: ``engine``, ``dialect`` (sqlglot's), ``url_scheme``,
    ``read_only_backstop`` (text), ``cancel`` (text, or ``None`` where the tool runs
    nothing), ``arrow`` (bool), ``estimate`` (text or ``None``: how a read's cost is
    estimated for a read budget) and ``tested_against`` (``live``, ``emulator`` or
    ``dialect only``).

    >>> list(engines()["engine"])  # doctest: +NORMALIZE_WHITESPACE
    ['sqlite', 'postgresql', 'mysql', 'duckdb', 'clickhouse', 'clickhouse server', 'trino',
     'spark', 'snowflake', 'bigquery']
    """
    rows = [
        {
            "engine": info.engine,
            "dialect": info.dialect,
            "url_scheme": info.url_scheme,
            "read_only_backstop": info.read_only_backstop,
            "cancel": info.cancel,
            "arrow": info.arrow,
            "estimate": info.estimate,
            "tested_against": info.tested_against,
        }
        for info in ENGINES
    ]
    frame = pd.DataFrame(rows, columns=list(ENGINE_COLUMNS))
    frame["arrow"] = frame["arrow"].astype(bool)
    frame["estimate"] = frame["estimate"].astype(object)
    frame["cancel"] = frame["cancel"].astype(object)
    return frame
