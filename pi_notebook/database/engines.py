"""``engines()``: the table of engines the tool runs, with each one's walls.

One row per engine on the seam (:mod:`pi_notebook.sql.engines`), in its order: SQLite,
PostgreSQL, MySQL/MariaDB, DuckDB and ClickHouse through chDB; a ClickHouse server and Trino,
which the tool connects to but whose client paths were tested against a scripted HTTP server
only (``dialect only``, and their rows say so); Spark SQL; Snowflake and BigQuery (tested
against their emulators).
"""

from __future__ import annotations

import pandas as pd

from pi_notebook.sql.engines import ENGINES

__all__ = ["ENGINE_COLUMNS", "engines", "engines_markdown"]

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


_HEADINGS = {
    "engine": "Engine",
    "url_scheme": "URL",
    "read_only_backstop": "Read-only backstop",
    "cancel": "Cancel",
    "arrow": "Arrow",
    "estimate": "Read estimate",
    "tested_against": "Tested against",
    "extra": "Install",
}


def engines_markdown(
    columns: tuple[str, ...] = (
        "engine",
        "url_scheme",
        "extra",
        "read_only_backstop",
        "tested_against",
    ),
) -> str:
    """The engine table as Markdown, from the same facts as :func:`engines` (the README's and
    ``docs/deployment.md``'s tables are this text; ``scripts/engine_tables.py`` rewrites them).

    ``columns`` are :data:`ENGINE_COLUMNS` names, or ``extra`` (the ``pip install`` line).
    """
    rows = [
        "| " + " | ".join(_HEADINGS.get(c, c) for c in columns) + " |",
        "|" + "---|" * len(columns),
    ]
    for info in ENGINES:
        cells = []
        for column in columns:
            if column == "extra":
                value = (
                    f"`pi-notebook[{info.extra}]`"
                    if info.extra
                    else "built in"
                    if info.connects
                    else "not yet"
                )
            elif column == "url_scheme":
                value = f"`{info.url_scheme}`"
            elif (
                column == "tested_against"
                and info.connects
                and info.tested_against == "dialect only"
            ):
                value = "dialect only (its client path against a scripted server, never a live one)"
            elif column == "arrow":
                value = "yes" if info.arrow else "no"
            else:
                value = getattr(info, column) or "none"
            cells.append(str(value).replace("|", "\\|").replace("\n", " "))
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"
