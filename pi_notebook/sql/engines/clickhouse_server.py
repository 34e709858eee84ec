"""A ClickHouse server through clickhouse-connect (``clickhousedb://USER:PASSWORD@HOST:8123/DB``,
its HTTP interface; ``?secure=true`` for HTTPS).

The policy path is :class:`~pi_notebook.sql.backend.DatabaseBackend`'s (classify, capability,
audit first), the statement path :class:`~pi_notebook.sql.engines.direct.DirectBackend`'s;
what this module adds is how a statement reaches the server:

* every request carries its own settings, and no session (``autogenerate_session_id`` off),
  so nothing one statement sets can reach the next. A read is sent with ``readonly=1``,
  ``max_execution_time`` (the statement timeout), ``max_memory_usage``, ``max_result_rows``
  (the row cap + 1, or the count limit when counting; ``result_overflow_mode=break``: the
  result ends with the block that passes it, and subqueries are not cut, verified on chDB 26)
  and ``cancel_http_readonly_queries_on_client_close``. With ``readonly=1`` in force the
  server refuses writes and any setting change the statement itself makes (``SET``,
  ``SETTINGS``). As on chDB, ``SETTINGS readonly = 1`` follows the statement, so only
  statements that take a SETTINGS clause parse (``SYSTEM`` and ``USE`` do not). The tool's
  user needs a profile with ``readonly`` 0 or 2: ``readonly=1`` in the profile refuses the
  limits each request sets;
* every statement carries a ``query_id`` the tool sets; Stop and the statement timeout send
  ``KILL QUERY WHERE query_id = ...`` (and ``KILL MUTATION`` for a stopped ``ALTER ...
  UPDATE/DELETE``);
* rows come in ClickHouse's Native format (``query_df_stream``: one typed DataFrame per
  block), kept to the row cap and the byte bound; there the query is killed (its
  ``query_id``) and the stream closed. Not Arrow: ClickHouse's Arrow output gives a
  ``DateTime`` column as a bare ``UInt32`` (verified on chDB 26, the same engine), which no
  reader can tell from a ``UInt32`` column; the Native format carries the column types;
* an approved write runs without ``readonly`` (mutations synchronously:
  ``mutations_sync=2``); ClickHouse has no transactions, so a stopped write is not undone
  (the error says so), and its preview counts rows with the derived ``SELECT count()``.

Verified only against a scripted HTTP server in the tests (the requests this module sends,
the ``KILL QUERY`` on Stop, the row bound, a refused connection), never against a live
server: the server's own behaviour (``readonly=1`` sent with other settings in one request,
``KILL QUERY`` ending a streamed result) is ClickHouse's documented one, not observed here.
"""

from __future__ import annotations

import math
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pandas as pd
from sqlalchemy.engine import URL

from pi_notebook.sql.backend.errors import ConnectFailed
from pi_notebook.sql.backend.fetch import Fetched, RunSettings, read_limit
from pi_notebook.sql.backend.readonly import RunKind
from pi_notebook.sql.engines.base import EngineInfo
from pi_notebook.sql.engines.clickhouse_common import (
    READ_CLAUSE,
    ROW_STARTS,
    ClickHouseBackend,
    ClickHouseCatalog,
    first_word,
    mutated_table,
    quote,
    read_limits,
)
from pi_notebook.sql.engines.direct import Running, statement_body
from pi_notebook.sql.engines.rows import take

__all__ = ["CLICKHOUSE_MEMORY_ENV", "CLICKHOUSE_MEMORY_LIMIT", "ENGINE", "ClickHouseServerBackend"]

ENGINE = EngineInfo(
    engine="clickhouse server",
    dialect="clickhouse",
    url_scheme="clickhousedb://USER:PASSWORD@HOST:8123/DB",
    schemes=("clickhousedb",),
    read_only_backstop="the server's readonly=1, sent with every read's request (no SET or "
    "SETTINGS in the statement can lift it), with no session between statements; client "
    "path tested against a scripted HTTP server; never against a live server",
    bounds="a Native stream stopped at the cap + 1 and the byte bound (the rest killed); the "
    "request's max_result_rows (cap + 1), max_execution_time and max_memory_usage",
    cancel="KILL QUERY WHERE query_id = the id the tool set (and KILL MUTATION for a stopped "
    "ALTER ... UPDATE/DELETE); no rollback: what a write had done stays",
    write_preview="no transaction to roll back: rows counted with the derived SELECT count(), "
    "else not measured (said so)",
    estimate="EXPLAIN ESTIMATE (rows of MergeTree tables) x the tables' bytes per row",
    arrow=False,
    read_path="clickhouse-connect's query_df_stream: the Native format, block by block into "
    "typed DataFrames (ClickHouse's Arrow output turns DateTime into UInt32); client path "
    "tested against a scripted HTTP server; never against a live server",
    extra="clickhouse",
    modules=("clickhouse_connect",),
    tested_against="dialect only",
)

CLICKHOUSE_MEMORY_LIMIT = 1 << 30
"""``max_memory_usage`` of a read, in bytes (``PI_NOTEBOOK_CLICKHOUSE_MEMORY_LIMIT``
overrides)."""
CLICKHOUSE_MEMORY_ENV = "PI_NOTEBOOK_CLICKHOUSE_MEMORY_LIMIT"

_OPTIONS = frozenset({"secure"})
_CAUSES = (
    ("connection refused", "connection refused (is a ClickHouse server's HTTP port there?)"),
    ("timed out", "no answer in time"),
    ("name or service not known", "unknown host"),
    ("nodename nor servname", "unknown host"),
    ("temporary failure in name resolution", "unknown host"),
    ("authentication failed", "authentication failed (user or password)"),
    ("code: 516", "authentication failed (user or password)"),
)
"""Known connection failures, as a short cause (clickhouse-connect's own text is long)."""


class _Server:
    """The clickhouse-connect client of one backend, opened on first use on the worker
    thread. One client serves reads, writes and cancels: it keeps no session, so each
    request carries all its settings."""

    def __init__(self, url: URL, connect_timeout_s: float, receive_timeout_s: float) -> None:
        options = dict(url.query)
        unknown = sorted(set(options) - _OPTIONS)
        if unknown:
            raise ValueError(
                f"clickhousedb URL: unknown option(s) {', '.join(unknown)}; "
                "only ?secure=true is accepted"
            )
        secure = str(options.get("secure", "false")).lower() in ("1", "true", "yes")
        self._args: dict[str, Any] = {
            "host": url.host or "localhost",
            "port": url.port or (8443 if secure else 8123),
            "username": url.username or "default",
            "password": url.password or "",
            "database": url.database or "__default__",
            "secure": secure,
            "connect_timeout": max(1, math.ceil(connect_timeout_s)),
            "send_receive_timeout": max(1, math.ceil(receive_timeout_s)),
            "autogenerate_session_id": False,
            "query_limit": 0,
            "query_retries": 0,
            "client_name": "pi-notebook",
        }
        self._lock = threading.Lock()
        self._client: Any = None

    def client(self) -> Any:
        """The client, opened now if needed.

        Raises:
            ConnectFailed: the server could not be reached (a short cause, no credentials).
        """
        with self._lock:
            if self._client is None:
                import clickhouse_connect

                try:
                    self._client = clickhouse_connect.get_client(**self._args)
                except Exception as exc:
                    raise ConnectFailed(RuntimeError(_cause(exc))) from None
            return self._client

    def kill(self, query_id: str, mutated: tuple[str, str] | None = None) -> None:
        """Cancel the statement ``query_id`` (thread-safe; the canceller repeats it), and the
        unfinished mutations of ``mutated`` (``(database, table)``, database "" for the
        current one)."""
        with self._lock:
            client = self._client
        if client is None:
            return
        client.command(f"KILL QUERY WHERE query_id = {quote(query_id)} ASYNC")
        if mutated is not None:
            database, table = mutated
            where = (
                f"database = {quote(database)}" if database else ("database = currentDatabase()")
            )
            client.command(
                f"KILL MUTATION WHERE {where} AND table = {quote(table)} AND NOT is_done"
            )

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # closing a client whose server went away
                pass


class ClickHouseServerBackend(ClickHouseBackend):
    """``query_database``'s backend for a ClickHouse server (see the module docstring)."""

    backend = "clickhousedb"

    def __init__(self, url: str | URL, **options: Any) -> None:
        super().__init__(url, **options)
        timeout = self.settings.statement_timeout_s
        self.memory_limit = int(os.environ.get(CLICKHOUSE_MEMORY_ENV, CLICKHOUSE_MEMORY_LIMIT))
        self.read_settings = {
            **read_limits(self.settings, self.memory_limit),
            "cancel_http_readonly_queries_on_client_close": "1",
        }
        """Sent with every read (and every derived read: counts, samples, estimates)."""
        self.write_settings: dict[str, str] = {
            "max_execution_time": f"{timeout:g}",
            "mutations_sync": "2",
        }
        """Sent with an approved write."""
        # A server that stops answering mid-response is given up after the timeout + 10 s.
        self._server = _Server(self.url, self.connect_timeout_s, timeout + 10)
        self.schema_source = ClickHouseCatalog(self._catalog_read, self.url)

    def dispose(self) -> None:
        """Close the client (the backend reconnects if used again)."""
        self._execution.close()
        self._server.close()

    # -- statements ----------------------------------------------------------------------
    def _read_frame(self, sql: str, canceller: Any) -> pd.DataFrame:
        """A small derived read (a count, a sample, an estimate) with the read settings."""
        client = self._server.client()
        query_id = _query_id()
        with Running(canceller, lambda: self._server.kill(query_id)):
            return self._frame(client, sql, query_id)

    def _catalog_read(self, sql: str) -> pd.DataFrame:
        return self._frame(self._server.client(), sql, _query_id())

    def _frame(self, client: Any, sql: str, query_id: str) -> pd.DataFrame:
        text = statement_body(sql, "clickhouse") + READ_CLAUSE
        return client.query_df(text, settings={**self.read_settings, "query_id": query_id})

    def _execute(
        self,
        kind: RunKind,
        sql: str,
        settings: RunSettings,
        canceller: Any,
        progress: Callable[[int], None] | None,
        counted: int | None = None,
    ) -> Fetched:
        client = self._server.client()
        query_id = _query_id()
        read = kind == "read"
        text = statement_body(sql, "clickhouse") + (READ_CLAUSE if read else "")
        sent = {**(self.read_settings if read else self.write_settings), "query_id": query_id}
        if read:  # the server stops the result (at a block's end) past what the read keeps
            sent["max_result_rows"] = str(read_limit(settings) or settings.count_limit)
        mutated = None if read else mutated_table(sql)
        with Running(canceller, lambda: self._server.kill(query_id, mutated)):
            if first_word(sql) in ROW_STARTS:
                stream = _Blocks(
                    client.query_df_stream(text, settings=sent), lambda: self._server.kill(query_id)
                )
                return take(stream, settings, progress)
            # Not a query (an approved write, or a forced "read" in the tests).
            summary = client.command(text, settings=sent)
        written = int(getattr(summary, "written_rows", 0) or 0)
        return Fetched(columns=[], row_count=written, has_rows=False)


class _Blocks:
    """The DataFrames of a ``query_df_stream``, for :func:`take`. Closed before its end (the
    read has what it keeps), the query is killed first: clickhouse-connect reads a closed
    stream to its end, so without the kill the rest of the result would still cross the
    network (``result_overflow_mode=break`` bounds it at the row limit)."""

    def __init__(self, context: Any, kill: Callable[[], None]) -> None:
        self._context, self._kill = context.__enter__(), kill
        self._ended = False

    def __iter__(self) -> Iterator[pd.DataFrame]:
        yield from self._context
        self._ended = True

    def close(self) -> None:
        if not self._ended:
            try:
                self._kill()
            except Exception:  # the server went away: closing the stream ends it anyway
                pass
        self._context.__exit__(None, None, None)


def _query_id() -> str:
    return f"pi-{uuid.uuid4().hex}"


def _cause(exc: BaseException) -> str:
    """A short cause of a failed connect (clickhouse-connect's text names the URL and the
    whole retry chain)."""
    text = " ".join(str(exc).split())
    lowered = text.lower()
    for needle, cause in _CAUSES:
        if needle in lowered:
            return cause
    return text if len(text) <= 200 else text[:199] + "…"
