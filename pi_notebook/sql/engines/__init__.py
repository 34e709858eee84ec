"""The engine seam: one module per engine, one table of what each does, one dispatch point.

Each module names its engine's URL scheme, sqlglot dialect, read-only backstop, how a read
is bounded, how a statement is cancelled, how a write is previewed, how a read's cost is
estimated and whether results come as Arrow (:class:`EngineInfo`).
:func:`create_backend` is the one way a URL becomes the backend that runs its statements:
the four SQLAlchemy engines share :class:`~pi_notebook.sql.backend.DatabaseBackend` (their
per-engine paths live in ``pi_notebook.sql.backend``); the engines reached through their own
client share :class:`~pi_notebook.sql.engines.direct.DirectBackend`'s statement path, each
giving only its hooks: chDB (:class:`ChdbBackend`), a ClickHouse server
(:class:`ClickHouseServerBackend`), Trino (:class:`TrinoBackend`), Spark Connect
(:class:`SparkBackend`), Snowflake and BigQuery (:class:`SnowflakeBackend` and
:class:`BigQueryBackend`, through :mod:`.warehouse_base`). A URL whose engine's extra is
missing is refused in one line naming the extra.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from sqlalchemy.engine import URL, make_url

from pi_notebook.ai.abort import AbortSignal
from pi_notebook.sql.backend import DatabaseBackend, QueryAborted, QueryError
from pi_notebook.sql.engines import (
    bigquery,
    chdb,
    clickhouse_server,
    duckdb,
    mysql,
    postgresql,
    snowflake,
    spark,
    sqlite,
    trino,
)
from pi_notebook.sql.engines.base import DialectOnly, EngineInfo, MissingExtra, ReadEstimate
from pi_notebook.sql.engines.bigquery import BigQueryBackend
from pi_notebook.sql.engines.chdb import ChdbBackend
from pi_notebook.sql.engines.clickhouse_server import ClickHouseServerBackend
from pi_notebook.sql.engines.direct import DirectBackend
from pi_notebook.sql.engines.snowflake import SnowflakeBackend
from pi_notebook.sql.engines.spark_connect import SparkBackend
from pi_notebook.sql.engines.trino import TrinoBackend
from pi_notebook.sql.engines.warehouse_base import WarehouseBackend

__all__ = [
    "ENGINES",
    "SQLALCHEMY_ENGINES",
    "BigQueryBackend",
    "ChdbBackend",
    "ClickHouseServerBackend",
    "DialectOnly",
    "EngineInfo",
    "MissingExtra",
    "ReadEstimate",
    "SnowflakeBackend",
    "SparkBackend",
    "TrinoBackend",
    "WarehouseBackend",
    "create_backend",
    "embedded_path",
    "engine_for_url",
    "estimate_read",
    "schema_source",
]

ENGINES: tuple[EngineInfo, ...] = (
    sqlite.ENGINE,
    postgresql.ENGINE,
    mysql.ENGINE,
    duckdb.ENGINE,
    chdb.ENGINE,
    clickhouse_server.ENGINE,
    trino.ENGINE,
    spark.ENGINE,
    snowflake.ENGINE,
    bigquery.ENGINE,
)
"""Every engine on the seam, in the order :func:`pi_notebook.database.engines` lists them
(Snowflake and BigQuery tested against their emulators; a ClickHouse server and Trino against
scripted servers only). An engine whose ``connects`` is false would be classified but never
connected; none is, today."""


SQLALCHEMY_ENGINES: tuple[EngineInfo, ...] = (
    sqlite.ENGINE,
    postgresql.ENGINE,
    mysql.ENGINE,
    duckdb.ENGINE,
)
"""The engines run through SQLAlchemy (:class:`DatabaseBackend`); the others through their
own client (:class:`DirectBackend`)."""


def embedded_path(url: str | URL) -> tuple[Literal["file", "directory"], Path] | None:
    """What an embedded engine's URL names on disk: ``("file", path)`` for SQLite and
    DuckDB, ``("directory", path)`` for chDB (whose engine creates a missing one);
    ``None`` for an in-memory database or a server.

    Raises:
        ValueError: no engine on the seam runs this URL; a chDB URL with options.
    """
    parsed = make_url(url)
    info = engine_for_url(parsed)
    if info is chdb.ENGINE:
        path = chdb.chdb_path(parsed)
        return None if path == ":memory:" else ("directory", Path(path))
    if info in (sqlite.ENGINE, duckdb.ENGINE) and parsed.database not in (None, "", ":memory:"):
        return "file", Path(parsed.database or "").expanduser()
    return None


def engine_for_url(url: str | URL) -> EngineInfo:
    """The engine of ``url`` (its SQLAlchemy backend name, or its scheme).

    Raises:
        ValueError: no engine on the seam runs this URL.
    """
    name = make_url(url).get_backend_name()
    for info in ENGINES:
        if name in info.schemes:
            return info
    known = ", ".join(info.url_scheme.split(" ")[0] for info in ENGINES if info.connects)
    raise ValueError(f"Unsupported database {name!r}: the URLs the tool runs are {known}.")


def create_backend(url: str | URL, **options: Any) -> DatabaseBackend:
    """The backend that runs ``url``'s statements (options as :class:`DatabaseBackend`'s;
    ``memory_capped`` defaults to the engine's :attr:`EngineInfo.memory_capped`).

    Raises:
        DialectOnly: the engine's SQL is classified, but the tool cannot connect to it yet.
        MissingExtra: the engine's client is not installed (the message names the extra).
        ValueError: an unsupported URL; ``role_per_user`` on an engine other than PostgreSQL.
    """
    info = engine_for_url(url)
    dialect_only = info.dialect_only()
    if dialect_only is not None:
        raise DialectOnly(dialect_only)
    missing = info.missing_extra()
    if missing is not None:
        raise MissingExtra(missing)
    if (options.get("role_per_user") or options.get("role_for") is not None) and (
        info is not postgresql.ENGINE
    ):
        raise ValueError(
            f"role_per_user needs PostgreSQL; {info.engine} statements would run "
            "with the login's own privileges."
        )
    if info is chdb.ENGINE:
        return ChdbBackend(url, **options)
    if info is spark.ENGINE:
        return SparkBackend(url, **options)
    if info is snowflake.ENGINE:
        return SnowflakeBackend(url, **options)
    if info is bigquery.ENGINE:
        return BigQueryBackend(url, **options)
    if info is clickhouse_server.ENGINE:
        return ClickHouseServerBackend(url, **options)
    if info is trino.ENGINE:
        return TrinoBackend(url, **options)
    options.setdefault("memory_capped", info.memory_capped)
    return DatabaseBackend(url, **options)


def schema_source(backend: DatabaseBackend) -> Any:
    """What :class:`~pi_notebook.database.schema.SchemaCache` reads the schema from: the
    SQLAlchemy engine, or the backend's own schema reader (chDB, a ClickHouse server, Trino,
    Spark, the warehouses' clients)."""
    if isinstance(backend, DirectBackend):
        return backend.schema_source
    return backend.engine


_ESTIMATES = {"postgresql": postgresql.estimate, "duckdb": duckdb.estimate}
"""The estimate hook of each SQLAlchemy engine that has one (run by
:meth:`~pi_notebook.sql.backend.DatabaseBackend.estimate_with`)."""


async def estimate_read(
    backend: DatabaseBackend, sql: str, *, signal: AbortSignal | None = None
) -> ReadEstimate:
    """The engine's estimate of what the read ``sql`` scans, at most one round trip before
    the read (ClickHouse ``EXPLAIN ESTIMATE``, Trino ``EXPLAIN (TYPE IO, FORMAT JSON)``,
    Snowflake ``EXPLAIN USING JSON``, Spark ``EXPLAIN COST``, a BigQuery dry run, PostgreSQL and DuckDB ``EXPLAIN (FORMAT JSON)``, inside
    the read's own read-only transaction). An engine without one (SQLite,
    MySQL) or an estimate that fails says so, and the read follows the engine's own limits.

    Raises:
        QueryAborted: ``signal`` aborted.
        QueryError: the database could not be reached.
    """
    if isinstance(backend, DirectBackend):
        return await backend.estimate(sql, signal=signal)
    hook = _ESTIMATES.get(backend.backend)
    if hook is None:
        return ReadEstimate(
            rows=None,
            bytes=None,
            source=f"no estimate on {backend.backend} yet: the read is not held "
            "to the budget, only to the row, size and time limits",
        )
    try:
        return await backend.estimate_with(hook, sql, signal=signal)
    except QueryAborted:
        raise
    except QueryError as error:  # the estimate is advice: the read's own limits still hold
        return ReadEstimate(
            rows=None,
            bytes=None,
            source=f"{backend.backend} EXPLAIN failed, so the read runs as "
            f"without a budget: {error}",
        )
