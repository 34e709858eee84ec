"""Snowflake through its official client, ``snowflake-connector-python`` (the ``snowflake``
extra), without SQLAlchemy (snowflake-sqlalchemy does not fit SQLAlchemy 2.1).

The URL is snowflake-sqlalchemy's shape, parsed here:
``snowflake://USER:PASSWORD@ACCOUNT/DATABASE/SCHEMA?warehouse=WH&role=ROLE``; ``host``,
``port`` and ``protocol`` may point the client elsewhere (an emulator such as fakesnow's
server). Any other option is refused.

The policy and statement paths are
:class:`~pi_notebook.sql.engines.direct.DirectBackend`'s (through :mod:`.warehouse_base`);
what is Snowflake's:

* the read-only backstop is the engine's, not the tool's: the URL's ``role`` should be
  granted only SELECT (the tool cannot check grants), and the session carries
  ``STATEMENT_TIMEOUT_IN_SECONDS`` (the tool's statement timeout, rounded up) and
  ``MULTI_STATEMENT_COUNT = 1``, set when it opens;
* a statement is sent with ``execute_async``; Stop and the statement timeout cancel it by
  its query id with the client's ``abort_query`` (the REST abort request). A Snowflake
  statement is atomic: a stopped write changes nothing; a stopped read returns nothing, even
  if the server answered after all;
* rows come as the client's Arrow batches (``fetch_arrow_batches``), kept to the row cap
  and the byte bound, the rest never fetched;
* a read's cost is ``EXPLAIN USING JSON`` (``bytesAssigned``, partitions assigned of
  total); an engine that cannot explain (the emulator) says so in the estimate.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import pandas as pd
from sqlalchemy.engine import URL, make_url

from pi_notebook.sql import lexical
from pi_notebook.sql.backend.errors import ConnectFailed, QueryAborted
from pi_notebook.sql.backend.fetch import Fetched, RunSettings
from pi_notebook.sql.backend.readonly import RunKind
from pi_notebook.sql.engines.base import EngineInfo, ReadEstimate
from pi_notebook.sql.engines.direct import Running, short
from pi_notebook.sql.engines.rows import take_arrow
from pi_notebook.sql.engines.warehouse_base import WarehouseBackend

__all__ = [
    "ENGINE",
    "SnowflakeBackend",
    "SnowflakeSchema",
    "explain_estimate",
    "snowflake_connect_args",
]

ENGINE = EngineInfo(
    engine="snowflake",
    dialect="snowflake",
    url_scheme="snowflake://USER:PASSWORD@ACCOUNT/DATABASE/SCHEMA?warehouse=WH&role=ROLE",
    schemes=("snowflake",),
    read_only_backstop="the engine's: a role with only SELECT grants (the URL's role=, "
    "granted by the deployer) and STATEMENT_TIMEOUT_IN_SECONDS and MULTI_STATEMENT_COUNT=1 "
    "set on the session; the emulator (fakesnow) has no roles or timeouts, so the tests "
    "cannot show them",
    bounds="Arrow batches read until the cap + 1 and the byte bound (the rest never "
    "fetched); STATEMENT_TIMEOUT_IN_SECONDS on the session",
    cancel="abort_query by query id (the client's REST abort request); statements are "
    "atomic, a stopped write changes nothing; a stopped read returns nothing. The emulator "
    "answers before it gives the query id and has no abort request: the tests show the "
    "stopped read's answer dropped, not the server's work stopped",
    write_preview="no transaction is tried: rows counted with the derived SELECT count(*), "
    "else not measured (said so)",
    estimate="EXPLAIN USING JSON: bytesAssigned and partitions assigned (the emulator has "
    "no EXPLAIN: its estimate says so)",
    arrow=True,
    read_path="snowflake-connector's fetch_arrow_batches, one DataFrame from the kept batches",
    extra="snowflake",
    modules=("snowflake.connector",),
    tested_against="emulator",
)

_T = TypeVar("_T")
_OPTIONS = frozenset({"warehouse", "role", "host", "port", "protocol"})
_ROW_STARTS = frozenset({"SELECT", "WITH", "SHOW", "DESCRIBE", "DESC", "EXPLAIN", "LIST"})
_COUNT_PREFIX = "number of rows "
"""Snowflake's DML answers with columns ``number of rows inserted`` / ``updated`` /
``deleted`` (a MERGE with several): their sum is the rows written."""


def snowflake_connect_args(url: str | URL) -> dict[str, Any]:
    """``snowflake.connector.connect`` arguments of a ``snowflake://`` URL (see the module
    docstring for its shape).

    Raises:
        ValueError: no account, or an option the tool does not accept.
    """
    url = make_url(url)
    if not url.host:
        raise ValueError("snowflake URL: the account is missing (snowflake://USER@ACCOUNT/DB)")
    unknown = sorted(set(url.query) - _OPTIONS)
    if unknown:
        raise ValueError(
            f"snowflake URL: unknown option(s) {', '.join(unknown)}; accepted: "
            f"{', '.join(sorted(_OPTIONS))}"
        )
    args: dict[str, Any] = {"account": url.host}
    if url.username:
        args["user"] = url.username
    if url.password is not None:
        args["password"] = url.password
    path = [part for part in (url.database or "").split("/") if part]
    if len(path) > 2:
        raise ValueError("snowflake URL: the path is /DATABASE/SCHEMA at most")
    for key, value in zip(("database", "schema"), path, strict=False):
        args[key] = value
    for key in sorted(_OPTIONS & set(url.query)):
        value = url.query[key]
        value = value[-1] if isinstance(value, tuple) else value
        args[key] = int(value) if key == "port" else value
    return args


class _Client:
    """The backend's one connection, opened lazily on the worker thread."""

    def __init__(self, args: dict[str, Any], session: dict[str, Any], timeout_s: float) -> None:
        self._args, self._session, self._timeout_s = args, session, timeout_s
        self._lock = threading.Lock()
        self._conn: Any = None

    def connection(self) -> Any:
        with self._lock:
            if self._conn is None:
                import snowflake.connector

                try:
                    self._conn = snowflake.connector.connect(
                        **self._args,
                        session_parameters=self._session,
                        autocommit=True,
                        login_timeout=self._timeout_s,
                        network_timeout=self._timeout_s,
                    )
                except Exception as exc:
                    raise ConnectFailed(exc) from exc
            return self._conn

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # closing a connection whose server went away
                pass


TableRow = tuple[str, str, str | None]
ColumnRow = tuple[str, str, str, bool, str | None, bool]


class SnowflakeSchema:
    """The tables and columns of the URL's schema (``INFORMATION_SCHEMA``), as plain rows for
    the database extension's schema cache."""

    dialect = "snowflake"

    def __init__(self, backend: SnowflakeBackend) -> None:
        self._backend = backend
        self.url = backend.url

    def catalog(self) -> tuple[list[TableRow], list[ColumnRow]]:
        """Tables ``(name, kind, comment)`` and columns ``(table, name, type, nullable,
        comment, False)`` of the current schema (blocking)."""
        cursor = self._backend.client.connection().cursor()
        try:
            cursor.execute(
                "SELECT table_name, table_type, comment FROM information_schema.tables "
                "WHERE table_schema = CURRENT_SCHEMA() ORDER BY table_name"
            )
            tables: list[TableRow] = [
                (
                    str(name),
                    "view" if "VIEW" in str(kind).upper() else "table",
                    str(comment) if comment else None,
                )
                for name, kind, comment in cursor.fetchall()
            ]
            cursor.execute(
                "SELECT table_name, column_name, data_type, is_nullable, comment FROM "
                "information_schema.columns WHERE table_schema = CURRENT_SCHEMA() "
                "ORDER BY table_name, ordinal_position"
            )
            columns: list[ColumnRow] = [
                (
                    str(table),
                    str(name),
                    str(type_),
                    str(nullable).upper() == "YES",
                    str(comment) if comment else None,
                    False,
                )
                for table, name, type_, nullable, comment in cursor.fetchall()
            ]
        finally:
            cursor.close()
        return tables, columns


class SnowflakeBackend(WarehouseBackend):
    """``query_database``'s backend for Snowflake (see the module docstring)."""

    backend = "snowflake"
    dialect = "snowflake"

    no_transaction = "Snowflake's write is not tried in a transaction here"

    def __init__(self, url: str | URL, *, statement_timeout_s: float = 30, **options: Any) -> None:
        known = {k: v for k, v in options.items() if k in _BACKEND_OPTIONS}
        super().__init__(url, statement_timeout_s=statement_timeout_s, **known)
        session = {
            "STATEMENT_TIMEOUT_IN_SECONDS": max(1, math.ceil(statement_timeout_s)),
            "MULTI_STATEMENT_COUNT": 1,
            "QUERY_TAG": "pi_notebook",
        }
        self.client = _Client(snowflake_connect_args(self.url), session, statement_timeout_s)
        self.schema_source = SnowflakeSchema(self)

    def close(self) -> None:
        self.client.close()

    def _run(
        self, sql: str, canceller: Any, consume: Callable[[Any], _T], *, read: bool = True
    ) -> _T:
        """Send ``sql`` and ``consume`` its cursor, all in the statement's cancel window (the
        client waits for an async query's end at its first fetch). A read stopped (Stop, the
        statement timeout) returns nothing, even when the server answered after all (one
        that has no abort request, such as the emulator)."""
        cursor = self.client.connection().cursor()
        query_id: list[str] = []

        def cancel() -> None:
            if query_id:
                cursor.abort_query(query_id[0])

        try:
            with Running(canceller, cancel):
                cursor.execute_async(sql)
                query_id.append(cursor.sfqid)
                cursor.get_results_from_sfqid(cursor.sfqid)
                result = consume(cursor)
            if read and canceller.reason is not None:
                raise QueryAborted("stopped while it ran")
            return result
        finally:
            cursor.close()

    def _execute(
        self,
        kind: RunKind,
        sql: str,
        settings: RunSettings,
        canceller: Any,
        progress: Callable[[int], None] | None,
        counted: int | None = None,
    ) -> Fetched:
        def take(cursor: Any) -> Fetched:
            return take_arrow(
                cursor.fetch_arrow_batches(), lambda: _columns(cursor), settings, progress
            )

        fetched = self._run(sql, canceller, take, read=kind == "read")
        if kind == "write" or _first_word(sql) not in _ROW_STARTS:
            counts = [c for c in fetched.columns if c.lower().startswith(_COUNT_PREFIX)]
            frame = fetched.frame if fetched.frame is not None else pd.DataFrame()
            written = int(frame[counts].iloc[0].sum()) if counts and len(frame) else 0
            return Fetched(columns=[], row_count=written, has_rows=False)
        return fetched

    def _read_frame(self, sql: str, canceller: Any) -> pd.DataFrame:
        return self._run(sql, canceller, lambda cursor: cursor.fetch_pandas_all())

    def _estimate(
        self, sql: str, *, canceller: Any, progress: Callable[[int], None] | None = None
    ) -> ReadEstimate:
        if _first_word(sql) not in ("SELECT", "WITH"):
            return ReadEstimate(
                rows=None,
                bytes=None,
                source=f"no estimate for {_first_word(sql) or 'this'} statements",
            )
        try:
            plan = self._read_frame(f"EXPLAIN USING JSON {sql.strip().rstrip(';')}", canceller)
        except Exception as exc:
            if canceller.reason is not None:
                raise
            return ReadEstimate(
                rows=None,
                bytes=None,
                source="Snowflake EXPLAIN USING JSON "
                f"failed, so the read runs as without a budget: {short(exc)}",
            )
        return explain_estimate(str(plan.iloc[0, 0]))


_BACKEND_OPTIONS = frozenset(
    {
        "row_cap",
        "approvals",
        "audit",
        "count_limit",
        "progress_every",
        "tool_name",
        "max_result_bytes",
    }
)


def explain_estimate(plan_json: str) -> ReadEstimate:
    """The estimate in Snowflake's ``EXPLAIN USING JSON`` answer: its ``GlobalStats``
    ``bytesAssigned`` (rows are not estimated by Snowflake's EXPLAIN)."""
    try:
        stats = json.loads(plan_json)["GlobalStats"]
        size = int(stats["bytesAssigned"])
    except (ValueError, KeyError, TypeError):
        return ReadEstimate(
            rows=None,
            bytes=None,
            source="Snowflake EXPLAIN USING JSON gave no GlobalStats.bytesAssigned",
        )
    parts = f"{stats.get('partitionsAssigned', '?')} of {stats.get('partitionsTotal', '?')}"
    return ReadEstimate(
        rows=None,
        bytes=size,
        source=f"Snowflake EXPLAIN USING JSON: bytesAssigned ({parts} partitions after pruning)",
    )


def _columns(cursor: Any) -> list[str]:
    return [str(d.name) for d in cursor.description or ()]


def _first_word(sql: str) -> str:
    tokens = lexical.tokens_of(sql, "snowflake")
    first = next((t for t in tokens if t.text != "("), None)
    return lexical.word(first) if first is not None else ""
