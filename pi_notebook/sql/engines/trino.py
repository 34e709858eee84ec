"""Trino through the ``trino`` client (``trino://USER@HOST:8080/CATALOG/SCHEMA``, its
``/v1/statement`` REST protocol; ``?secure=true`` for HTTPS, which a password needs).

Trino's read-only wall is the coordinator's own (``access-control.name=read-only``, or
file-based access rules granting the tool's user SELECT only): the tool can neither set it
nor check that it is there, so the classifier is the only wall the tool itself holds. Give
the tool a user the server holds to reads.

What the tool does hold, per statement (the policy path is
:class:`~pi_notebook.sql.backend.DatabaseBackend`'s, the statement path
:class:`~pi_notebook.sql.engines.direct.DirectBackend`'s):

* a fresh client connection for each statement, with the session property
  ``query_max_execution_time`` (the statement timeout): a session change one statement makes
  (``SET SESSION``, which the classifier asks about) never reaches the next;
* rows fetched page by page with ``fetchmany``, kept to the row cap and the byte bound; past
  the cap + 1 the rest of the query is cancelled;
* Stop and the statement timeout call the client's ``cursor.cancel()``, which sends
  ``DELETE`` to the query's ``nextUri``;
* no transaction: an approved write runs as sent, and a stopped one is not undone (the error
  says so); its preview counts rows with the derived ``SELECT count(*)``;
* a read's cost from ``EXPLAIN (TYPE IO, FORMAT JSON)`` (:func:`io_estimate`).

Verified only against a scripted ``/v1/statement`` server in the tests (nextUri paging, the
DELETE on Stop, the session property, a refused connection), never against a live Trino.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from typing import Any

import pandas as pd
from sqlalchemy.engine import URL

from pi_notebook.sql.backend.derive import WritePlan, plan_write
from pi_notebook.sql.backend.errors import ConnectFailed, QueryAborted
from pi_notebook.sql.backend.fetch import Fetched, RunSettings
from pi_notebook.sql.backend.readonly import RunKind
from pi_notebook.sql.engines.base import EngineInfo, ReadEstimate
from pi_notebook.sql.engines.direct import DirectBackend, Running, short, statement_body
from pi_notebook.sql.engines.plans import EXPLAINABLE, not_planned
from pi_notebook.sql.engines.rows import Stream, take

__all__ = ["ENGINE", "TrinoBackend", "TrinoCatalog", "io_estimate"]

ENGINE = EngineInfo(
    engine="trino",
    dialect="trino",
    url_scheme="trino://USER@HOST:8080/CATALOG/SCHEMA",
    schemes=("trino",),
    read_only_backstop="server-side access control (access-control.name=read-only or "
    "file-based rules), which the tool cannot set or verify: the classifier is the only wall "
    "the tool itself holds; client path tested against a scripted HTTP server; never against "
    "a live server",
    bounds="fetchmany up to the cap + 1 and the byte bound, then the rest cancelled; the "
    "session property query_max_execution_time",
    cancel="the client's cursor.cancel() (DELETE of the query's nextUri); no rollback: what a "
    "write had done stays",
    write_preview="no transaction to roll back: rows counted with the derived SELECT "
    "count(*), else not measured (said so)",
    estimate="EXPLAIN (TYPE IO, FORMAT JSON): the input tables' estimate.outputRowCount and "
    "outputSizeInBytes",
    arrow=False,
    read_path="the trino client's rows (JSON pages), fetchmany into DataFrames; client path "
    "tested against a scripted HTTP server; never against a live server",
    extra="trino",
    modules=("trino",),
    tested_against="dialect only",
)

_FETCH = 1000
"""Rows asked of the client per ``fetchmany`` (it pages as the server sends them)."""
_OPTIONS = frozenset({"secure"})
_NO_ROLLBACK = (
    "Trino runs a write without a transaction here: what it had done before it was stopped stays"
)


class _Coordinator:
    """How to open a client connection to the coordinator (one per statement)."""

    def __init__(self, url: URL, statement_timeout_s: float, connect_timeout_s: float) -> None:
        options = dict(url.query)
        unknown = sorted(set(options) - _OPTIONS)
        if unknown:
            raise ValueError(
                f"trino URL: unknown option(s) {', '.join(unknown)}; only ?secure=true is accepted"
            )
        parts = [part for part in (url.database or "").split("/") if part]
        if len(parts) != 2 or not url.username:
            raise ValueError("trino URL: write it as trino://USER@HOST:8080/CATALOG/SCHEMA")
        self.catalog, self.schema = parts
        secure = str(options.get("secure", "false")).lower() in ("1", "true", "yes")
        if url.password and not secure:
            raise ValueError("trino URL: a password is sent only over HTTPS: add ?secure=true")
        self._args: dict[str, Any] = {
            "host": url.host or "localhost",
            "port": url.port or (443 if secure else 8080),
            "user": url.username,
            "catalog": self.catalog,
            "schema": self.schema,
            "http_scheme": "https" if secure else "http",
            "max_attempts": 1,
            "request_timeout": (connect_timeout_s, statement_timeout_s + 10),
            "session_properties": {
                "query_max_execution_time": f"{max(1, math.ceil(statement_timeout_s))}s"
            },
            "source": "pi-notebook",
        }
        self._password = url.password

    def connect(self) -> Any:
        """A new client connection (sends nothing until a statement runs)."""
        import trino

        args = dict(self._args)
        if self._password:
            args["auth"] = trino.auth.BasicAuthentication(self._args["user"], self._password)
        try:
            return trino.dbapi.connect(**args)
        except Exception as exc:  # TLS required for a password, a malformed host
            raise ConnectFailed(RuntimeError(short(exc))) from None


class TrinoBackend(DirectBackend):
    """``query_database``'s backend for Trino (see the module docstring)."""

    engine_name = "Trino"
    no_rollback = _NO_ROLLBACK

    backend = "trino"
    dialect = "trino"

    def __init__(self, url: str | URL, **options: Any) -> None:
        super().__init__(url, **options)
        self._coordinator = _Coordinator(
            self.url, self.settings.statement_timeout_s, self.connect_timeout_s
        )
        self.schema_source = TrinoCatalog(self._rows, self.url, self._coordinator.schema)

    def dispose(self) -> None:
        """Let the worker thread go (each statement has its own connection)."""
        self._execution.close()

    # -- statements ----------------------------------------------------------------------
    def _plan(self, sql: str) -> WritePlan:
        return plan_write(sql, "trino")

    def _open(self, sql: str, canceller: Any | None) -> tuple[Any, Any]:
        """A cursor that has sent ``sql`` (``execute`` returns at its first rows), cancellable
        from the moment the request leaves."""
        connection = self._coordinator.connect()
        cursor = connection.cursor()
        try:
            if canceller is None:
                cursor.execute(sql)
            else:
                with Running(canceller, cursor.cancel):
                    cursor.execute(sql)
        except BaseException as exc:
            connection.close()
            if _unreachable(exc):
                raise ConnectFailed(RuntimeError(_connect_cause(exc))) from None
            raise
        return connection, cursor

    def _rows(self, sql: str, canceller: Any | None = None) -> pd.DataFrame:
        """Every row of a small read (a count, a sample, a plan, the catalog)."""
        connection, cursor = self._open(sql, canceller)
        try:
            if canceller is None:
                rows = cursor.fetchall()
            else:
                with Running(canceller, cursor.cancel):
                    rows = cursor.fetchall()
            return pd.DataFrame.from_records(rows, columns=_names(cursor))
        finally:
            connection.close()

    def _read_frame(self, sql: str, canceller: Any) -> pd.DataFrame:
        return self._rows(sql, canceller)

    def _execute(
        self,
        kind: RunKind,
        sql: str,
        settings: RunSettings,
        canceller: Any,
        progress: Callable[[int], None] | None,
        counted: int | None = None,
    ) -> Fetched:
        connection, cursor = self._open(statement_body(sql, "trino"), canceller)
        try:
            with Running(canceller, cursor.cancel):
                names = _names(cursor)
                if kind == "write" and cursor.rowcount >= 0:  # INSERT, UPDATE, DELETE, MERGE
                    cursor.fetchall()
                    fetched = Fetched(columns=[], row_count=int(cursor.rowcount), has_rows=False)
                elif not names:
                    cursor.fetchall()
                    fetched = Fetched(columns=[], row_count=0, has_rows=False)
                else:
                    stream = Stream(_pages(cursor, names), lambda: _finish(cursor))
                    fetched = take(stream, settings, progress)
        finally:
            connection.close()
        if canceller.reason is not None:  # the client ends a cancelled query without an error
            raise QueryAborted("cancelled")
        return fetched

    # -- read estimate -------------------------------------------------------------------
    def _estimate(
        self, sql: str, *, canceller: Any, progress: Callable[[int], None] | None = None
    ) -> ReadEstimate:
        """``EXPLAIN (TYPE IO, FORMAT JSON)``, on the worker (it plans; it reads nothing)."""
        if not EXPLAINABLE.match(sql):
            return not_planned(sql)
        text = "EXPLAIN (TYPE IO, FORMAT JSON) " + statement_body(sql, "trino")
        try:
            frame = self._rows(text, canceller)
            return io_estimate(frame.iloc[0, 0])
        except Exception as exc:
            if canceller.reason is not None:
                raise
            return ReadEstimate(
                rows=None,
                bytes=None,
                source="Trino EXPLAIN (TYPE IO) failed, "
                f"so the read runs as without a budget: {short(exc)}",
            )


def io_estimate(plan: Any) -> ReadEstimate:
    """The estimate in Trino's ``EXPLAIN (TYPE IO, FORMAT JSON)`` output: the input tables'
    ``estimate.outputRowCount`` and ``outputSizeInBytes`` summed (what the read scans), else
    the plan's own ``estimate``; an unknown figure (Trino's ``NaN``) is ``None``."""
    value = json.loads(plan) if isinstance(plan, str | bytes) else plan
    inputs = [info.get("estimate") or {} for info in value.get("inputTableColumnInfos") or []]
    estimates = inputs or [value.get("estimate") or {}]
    rows = _total(e.get("outputRowCount") for e in estimates)
    size = _total(e.get("outputSizeInBytes") for e in estimates)
    where = "the input tables'" if inputs else "the plan's"
    return ReadEstimate(
        rows=rows,
        bytes=size,
        source=f"Trino EXPLAIN (TYPE IO): {where} estimated outputRowCount and outputSizeInBytes",
    )


class TrinoCatalog:
    """The tables and columns of the URL's schema, from its catalog's ``information_schema``
    (as plain rows for the schema cache of the database extension)."""

    dialect = "trino"

    def __init__(self, read: Callable[[str], pd.DataFrame], url: URL, schema: str) -> None:
        self._read, self.url, self._schema = read, url, schema

    def catalog(
        self,
    ) -> tuple[
        list[tuple[str, str, str | None]], list[tuple[str, str, str, bool, str | None, bool]]
    ]:
        """Tables ``(name, kind, None)`` and columns ``(table, name, type, nullable, None,
        False)`` in each table's order (blocking; Trino reports no keys)."""
        schema = "'" + self._schema.replace("'", "''") + "'"
        tables = self._read(
            "SELECT table_name, table_type FROM information_schema.tables "
            f"WHERE table_schema = {schema} ORDER BY table_name"
        )
        columns = self._read(
            "SELECT table_name, column_name, data_type, is_nullable FROM "
            f"information_schema.columns WHERE table_schema = {schema} "
            "ORDER BY table_name, ordinal_position"
        )
        return (
            [
                (str(name), "view" if str(kind).upper() == "VIEW" else "table", None)
                for name, kind in tables.itertuples(index=False, name=None)
            ],
            [
                (str(table), str(name), str(type_), str(nullable).upper() == "YES", None, False)
                for table, name, type_, nullable in columns.itertuples(index=False, name=None)
            ],
        )


def _names(cursor: Any) -> list[str]:
    return [str(column[0]) for column in cursor.description or []]


def _pages(cursor: Any, names: list[str]) -> Iterator[pd.DataFrame]:
    while True:
        rows = cursor.fetchmany(_FETCH)
        if not rows:
            return
        yield pd.DataFrame.from_records(rows, columns=names)


def _finish(cursor: Any) -> None:
    """Cancel what the server still has of a query the read stopped reading."""
    try:
        cursor.cancel()  # a no-op once the query has finished (no nextUri left)
    except Exception:  # a query that ended meanwhile: nothing left to cancel
        pass


def _total(values: Any) -> int | None:
    total = 0.0
    for value in values:
        if not isinstance(value, int | float) or not math.isfinite(value):
            return None
        total += value
    return int(total)


def _unreachable(exc: BaseException) -> bool:
    import trino

    return isinstance(exc, trino.exceptions.TrinoConnectionError) or (
        "Max retries exceeded" in str(exc) or "Connection refused" in str(exc)
    )


def _connect_cause(exc: BaseException) -> str:
    text = str(exc).lower()
    if "connection refused" in text:
        return "connection refused (is a Trino coordinator's HTTP port there?)"
    if "timed out" in text:
        return "no answer in time"
    if "name or service not known" in text or "name resolution" in text:
        return "unknown host"
    return short(exc)
