"""ClickHouse through chDB (``chdb:///PATH``, embedded: the engine runs in the kernel).

The URL follows SQLite's: ``chdb:///data/ch`` is the directory ``data/ch`` (relative),
``chdb:////srv/ch`` an absolute one; the directory is created on first use; ``chdb://``
alone is an in-memory database. chDB holds one database per process: a second extension on
another path is refused until the first one is disposed (its session closed).

The policy path is the backend's own (:class:`~pi_notebook.sql.backend.DatabaseBackend`'s
``run``: classify, capability, audit first); what differs is how a statement runs:

* a read runs in a reused read-only session, opened with ``readonly=1``,
  ``max_execution_time`` (the statement timeout), ``max_memory_usage`` and
  ``max_result_rows`` (``break``) as its own settings: verified on chDB 26, no statement in
  it can write, change a setting (``SET``, ``SETTINGS``, nested or not), or call a table
  function that reaches a file, URL, server or program (they need a temporary table), and
  stacked statements are all read-only too. After the statement comes
  ``SETTINGS readonly = 1`` (the same value, so allowed): only statements that take a
  SETTINGS clause parse (``SYSTEM`` and ``USE``, which readonly alone lets run, do not);
* rows come as chDB's native DataFrame stream, block by block: kept to the row cap and the
  byte bound, the stream stops there. (ClickHouse's Arrow output gives ``DateTime`` as a
  bare ``UInt32``; the native DataFrame keeps timestamps as timestamps, and is faster here.)
* every statement carries a marker comment; Stop and the statement timeout cancel it with
  ``KILL QUERY`` from a second session on the same database (a chDB session's own query
  cannot be interrupted from another thread);
* an approved write runs without ``readonly`` (mutations synchronously:
  ``mutations_sync=2``). Stopped, it is not undone: ClickHouse has no transactions, so the
  blocks an INSERT had written and the parts a mutation had rewritten stay (the mutation's
  unfinished rest is killed), and the error says so. Nor can a write be tried and rolled
  back: the preview counts rows with the derived ``SELECT count()`` (and the bounds of an
  approval are checked with it before the write runs) or says plainly that they cannot be
  counted.
"""

from __future__ import annotations

import math
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
from sqlalchemy.engine import URL, make_url

from pi_notebook.ai.abort import AbortSignal
from pi_notebook.approvals.capabilities import CapabilityStore
from pi_notebook.approvals.protocol import WritePreview
from pi_notebook.audit.durable import record_after
from pi_notebook.audit.records import WritePreviewRecord
from pi_notebook.sql import classify, lexical
from pi_notebook.sql.backend import AuditSink, DatabaseBackend, ProgressCallback, QueryError
from pi_notebook.sql.backend.derive import WritePlan, plan_write
from pi_notebook.sql.backend.errors import ConnectFailed, QueryAborted, QueryRefused, QueryTimeout
from pi_notebook.sql.backend.execution import Execution
from pi_notebook.sql.backend.fetch import Fetched, ProgressSteps, RunSettings, read_limit
from pi_notebook.sql.backend.measure import METHOD_TEXT
from pi_notebook.sql.backend.readonly import RunKind
from pi_notebook.sql.backend.results import QueryOutcome, render_fetched
from pi_notebook.sql.backend.sizes import DEFAULT_MAX_RESULT_BYTES
from pi_notebook.sql.backend.worker import AuditBlocked, Bounds, DriftError
from pi_notebook.sql.engines.base import EngineInfo, ReadEstimate

__all__ = [
    "CHDB_MEMORY_ENV",
    "CHDB_MEMORY_LIMIT",
    "ENGINE",
    "ChdbBackend",
    "chdb_path",
    "clickhouse_plan",
]

ENGINE = EngineInfo(
    engine="clickhouse",
    dialect="clickhouse",
    url_scheme="chdb:///PATH (chdb:// in memory)",
    schemes=("chdb",),
    read_only_backstop="a read-only session (readonly=1 set when it opens: no SET or SETTINGS "
    "can lift it; file/URL/remote/executable table functions refused)",
    bounds="a stream stopped at the cap + 1 and the byte bound; the session's "
    "max_execution_time, max_memory_usage and max_result_rows",
    cancel="KILL QUERY from a second session on the same database (and KILL MUTATION for a "
    "stopped ALTER ... UPDATE/DELETE); no rollback: what a write had done stays",
    write_preview="no transaction to roll back: rows counted with the derived SELECT count(), "
    "else not measured (said so)",
    estimate="EXPLAIN ESTIMATE (rows of MergeTree tables) x the tables' bytes per row",
    arrow=False,
    read_path="chDB's native DataFrame stream (its Arrow output turns DateTime into UInt32)",
    extra="clickhouse",
    modules=("chdb",),
)

CHDB_MEMORY_LIMIT = 1 << 30
"""``max_memory_usage`` of a read, in bytes (``PI_NOTEBOOK_CHDB_MEMORY_LIMIT`` overrides)."""
CHDB_MEMORY_ENV = "PI_NOTEBOOK_CHDB_MEMORY_LIMIT"

_ROW_STARTS = frozenset({"SELECT", "WITH", "SHOW", "DESCRIBE", "DESC", "EXPLAIN", "EXISTS"})
"""First words of statements that return rows (an approved ``SELECT ... SETTINGS`` too)."""
_STREAMED = frozenset({"SELECT", "WITH"})
"""Of those, the ones chDB streams (block by block, so a read stops at its bounds)."""
_HEAD_ROWS = 50
_READ_CLAUSE = "\nSETTINGS readonly = 1"
"""After every read, in the read-only session: the same value, so allowed there, but only
statements that take a SETTINGS clause parse with it (``SYSTEM``, ``USE`` do not: readonly
alone lets them run)."""


def chdb_path(url: URL) -> str:
    """The connection path of a ``chdb://`` URL (``:memory:`` without a path).

    Raises:
        ValueError: a path chDB would misread (options after ``?``).
    """
    database = url.database
    if not database or database == ":memory:":
        return ":memory:"
    if "?" in database or url.query:
        raise ValueError("chdb URL: options are not accepted, only a path")
    return str(Path(database).expanduser())


class _Database:
    """The chDB sessions of one backend, lazily opened on the worker thread (the first open
    starts the engine, ~0.4 s): a read-only one for reads, whose limits are set when it opens
    (``read_settings``, ``readonly=1`` among them, so no statement in it can change one), one
    for approved writes, and one for cancels (a session runs one statement at a time)."""

    def __init__(self, path: str, read_settings: dict[str, str]) -> None:
        self.path = path
        self.read_settings = read_settings
        self._lock = threading.Lock()
        self._session: Any = None
        self._reader: Any = None
        self._control: Any = None

    def session(self) -> Any:
        """The session approved writes run in."""
        with self._lock:
            if self._session is None:
                self._session = self._open()
                self._session.query("SET mutations_sync = 2")
            return self._session

    def reader(self) -> Any:
        """The read-only session every read runs in."""
        with self._lock:
            if self._reader is None:
                options = "&".join(f"{k}={v}" for k, v in self.read_settings.items())
                self._reader = self._open(options)
            return self._reader

    def kill(self, marker: str) -> None:
        """Cancel the statement carrying ``marker`` (thread-safe; the canceller repeats it)."""
        with self._lock:
            if self._control is None:
                self._control = self._open()
            control = self._control
        control.query(f"KILL QUERY WHERE startsWith(query, '{marker}') ASYNC")

    def kill_mutations(self, table: tuple[str, str]) -> None:
        """Stop the unfinished mutations of ``(database, table)`` (``database`` "" for the
        current one): the statement that waited for one is already killed."""
        with self._lock:
            control = self._control
        if control is None:
            return
        database, name = table
        where = f"database = {_quote(database)}" if database else (
            "database = currentDatabase()")  # fmt: skip
        control.query(f"KILL MUTATION WHERE {where} AND table = {_quote(name)} AND NOT is_done")

    def _open(self, options: str = "") -> Any:
        from chdb import session

        if self.path != ":memory:":
            Path(self.path).mkdir(parents=True, exist_ok=True)
        try:
            return session.Session(f"{self.path}?{options}" if options else self.path)
        except Exception as exc:
            if "already initialized with path" in str(exc):
                raise ConnectFailed(RuntimeError(
                    "chDB holds one database per process, and another one is open here: "
                    "close its session (dispose its extension) first")) from None  # fmt: skip
            raise ConnectFailed(exc) from exc

    def close(self) -> None:
        with self._lock:
            sessions = (self._reader, self._session, self._control)
            self._reader = self._session = self._control = None
        for session in sessions:
            if session is not None:
                try:
                    session.close()
                except Exception:  # closing a session that failed to open
                    pass


TableRow = tuple[str, str, str | None]
"""A table of :meth:`ChdbSchema.catalog`: name, kind (``table`` or ``view``), comment."""
ColumnRow = tuple[str, str, str, bool, str | None, bool]
"""A column of :meth:`ChdbSchema.catalog`: table, name, type, nullable, comment, in the key."""


class ChdbSchema:
    """The catalog of a chDB database, as plain rows for the schema cache of the database
    extension (``pi_notebook.database.schema``), which builds its schema from them."""

    dialect = "clickhouse"

    def __init__(self, database: _Database, url: URL) -> None:
        self._database = database
        self.url = url

    def catalog(self) -> tuple[list[TableRow], list[ColumnRow]]:
        """Tables and columns of the current database, as plain rows (blocking).

        Tables: ``(name, kind, comment)``, kind ``view`` or ``table``. Columns: ``(table, name,
        type, nullable, comment, in_primary_key)``, in each table's column order.
        """
        session = self._database.reader()
        tables = session.query(
            "SELECT name, engine, comment FROM system.tables WHERE database = currentDatabase() "
            "ORDER BY name", "DataFrame")  # fmt: skip
        columns = session.query(
            "SELECT table, name, type, comment, is_in_primary_key FROM system.columns WHERE "
            "database = currentDatabase() ORDER BY table, position",
            "DataFrame")  # fmt: skip
        table_rows: list[TableRow] = [
            (str(name), "view" if "View" in str(engine) else "table", str(comment) or None)
            for name, engine, comment in tables.itertuples(index=False, name=None)
        ]
        column_rows: list[ColumnRow] = [
            (str(table), str(name), str(type_), str(type_).startswith("Nullable("),
             str(comment) or None, bool(in_key))
            for table, name, type_, comment, in_key in columns.itertuples(index=False, name=None)
        ]  # fmt: skip
        return table_rows, column_rows


class ChdbBackend(DatabaseBackend):
    """``query_database``'s backend for chDB (see the module docstring); the policy path
    (``run``: classify, capability, audit) is :class:`DatabaseBackend`'s."""

    def __init__(
        self,
        url: str | URL,
        *,
        row_cap: int = 10_000,
        statement_timeout_s: float = 30,
        approvals: CapabilityStore | None = None,
        audit: AuditSink | None = None,
        count_limit: int = 1_000_000,
        progress_every: int = 10_000,
        tool_name: str = "query_database",
        max_result_bytes: int | None = DEFAULT_MAX_RESULT_BYTES,
        **_ignored: Any,
    ) -> None:
        self.url = make_url(url)
        self.backend = "chdb"
        self.dialect = "clickhouse"
        self.capabilities = approvals if approvals is not None else CapabilityStore()
        self.audit = audit
        self.tool_name = tool_name
        self.settings = RunSettings(
            row_cap=row_cap, count_limit=max(count_limit, row_cap + 1),
            statement_timeout_s=statement_timeout_s, progress_every=progress_every,
            max_result_bytes=max_result_bytes)  # fmt: skip
        self.memory_limit = int(os.environ.get(CHDB_MEMORY_ENV, CHDB_MEMORY_LIMIT))
        self._database = _Database(chdb_path(self.url), {
            "readonly": "1", "max_execution_time": f"{statement_timeout_s:g}",
            "max_memory_usage": str(self.memory_limit),
            "max_result_rows": str(self.settings.count_limit),
            "result_overflow_mode": "break"})  # fmt: skip
        self.schema_source = ChdbSchema(self._database, self.url)
        self._execution = Execution(self.url, statement_timeout_s)
        self._inline = None
        self._adbc = None

    def dispose(self) -> None:
        """Close its sessions (another chDB database may then be opened in this process)."""
        self._execution.close()
        self._database.close()

    # -- statements ----------------------------------------------------------------------
    async def _run_as(
        self,
        kind: RunKind,
        sql: str,
        *,
        tool_call_id: str = "",
        final_hash: str = "",
        signal: AbortSignal | None = None,
        on_progress: ProgressCallback | None = None,
        audit: AuditSink | None = None,
        bounds: Bounds | None = None,
        count_rows: bool = False,
        audited: Callable[[], object] | None = None,
        on_slow: Callable[[], None] | None = None,
        record_result: bool = True,
    ) -> QueryOutcome:
        """Run ``sql`` as ``kind`` WITHOUT the policy check (internal, and for the tests that
        show the engine's ``readonly=1`` stops what slipped past the classifier)."""
        ids = {"tool_call_id": tool_call_id, "tool_name": self.tool_name}
        settings = replace(self.settings, count_rows=True) if count_rows else self.settings
        plan = clickhouse_plan(sql) if bounds is not None and bounds.active else None
        if on_slow is not None:
            try:
                on_slow()
            except Exception:  # a broken listener must not break the statement
                pass
        started = time.perf_counter()
        try:
            fetched = await self._execution.call(
                self._statement, kind, sql, settings, bounds, plan, audited, signal=signal,
                on_progress=on_progress)  # fmt: skip
        except QueryError as error:
            if isinstance(error, QueryAborted | QueryTimeout) and "nothing was written" in str(
                error
            ):
                error = type(error)(_no_rollback(str(error)))
            self._record_failure(audit, error, final_hash, ids)
            raise error from None
        return self._finish(fetched, kind, started, final_hash, ids,
                            audit if record_result else None)  # fmt: skip

    def _statement(
        self,
        kind: RunKind,
        sql: str,
        settings: RunSettings,
        bounds: Bounds | None,
        plan: WritePlan | None,
        audited: Callable[[], object] | None,
        *,
        canceller: Any,
        progress: Callable[[int], None] | None = None,
    ) -> Fetched:
        """The worker's part: wait for the audit record (a write before it runs), check the
        approval's bounds, run, fetch within the bounds."""
        if audited is not None and kind == "write":
            _audited(audited)
            audited = None
        try:
            if kind == "write" and bounds is not None and bounds.active:
                counted = self._count(plan, settings, canceller)
                if not bounds.allows(counted):
                    raise DriftError(counted)
            session = self._database.reader() if kind == "read" else self._database.session()
            fetched = self._execute(session, kind, sql, settings, canceller, progress)
        except BaseException:
            if audited is not None:
                _audited(audited)  # the record first, even for the read's error text
            raise
        if audited is not None:
            _audited(audited)
        fetched.preview = render_fetched(fetched)
        return fetched

    def _count(self, plan: WritePlan | None, settings: RunSettings, canceller: Any) -> int:
        if plan is not None and plan.static_rows is not None:
            return plan.static_rows
        if plan is None or plan.count_sql is None:
            why = plan.note if plan is not None and plan.note else "no count can be derived"
            raise DriftError(None, f"ClickHouse cannot try a write and roll it back, and {why}")
        return self._scalar(plan.count_sql, canceller)

    def _scalar(self, sql: str, canceller: Any) -> int:
        return int(self._read_frame(sql, canceller).iloc[0, 0])

    def _read_frame(self, sql: str, canceller: Any) -> pd.DataFrame:
        """A small derived read (a count, a sample, an estimate) in the read-only session,
        cancellable."""
        marker = _marker()
        session = self._database.reader()
        with _Running(canceller, lambda: self._database.kill(marker)):
            return session.query(f"{marker}{_body(sql)}{_READ_CLAUSE}", "DataFrame")

    def _execute(
        self,
        session: Any,
        kind: RunKind,
        sql: str,
        settings: RunSettings,
        canceller: Any,
        progress: Callable[[int], None] | None,
    ) -> Fetched:
        marker = _marker()
        text = f"{marker}{_body(sql)}" + (_READ_CLAUSE if kind == "read" else "")
        mutated = _mutated_table(sql) if kind == "write" else None

        def cancel() -> None:
            self._database.kill(marker)
            if mutated is not None:
                self._database.kill_mutations(mutated)

        with _Running(canceller, cancel):
            starts = _first_word(sql)
            if starts in _STREAMED and not _totals(sql):
                stream = session.send_query(text, "DataFrame")
                return _take(stream, settings, progress)
            if starts in _ROW_STARTS:  # SHOW, DESCRIBE, EXPLAIN, WITH TOTALS: not streamable
                return _take(_Whole(session.query(text, "DataFrame")), settings, progress)
            # Not a query (a write, or a forced "read" in the tests): chDB streams queries only.
            result = session.query(text, "CSV")
        written = int(result.rows_written())
        return Fetched(columns=[], row_count=written, has_rows=False)

    # -- read estimate -------------------------------------------------------------------
    async def estimate(self, sql: str, *, signal: AbortSignal | None = None) -> ReadEstimate:
        """What the read ``sql`` would scan, from ``EXPLAIN ESTIMATE`` (rows of the MergeTree
        tables it reads, after primary-key and partition pruning) times each table's
        uncompressed bytes per row (all its columns: an upper bound for a read of a few),
        both read-only in one call on the worker.

        Raises:
            QueryAborted: ``signal`` aborted.
            QueryError: the database could not be opened.
        """
        return await self._execution.call(self._estimate, sql, signal=signal)

    def _estimate(
        self, sql: str, *, canceller: Any, progress: Callable[[int], None] | None = None
    ) -> ReadEstimate:
        if _first_word(sql) not in _STREAMED:
            return ReadEstimate(rows=None, bytes=None,
                                source=f"no estimate for {_first_word(sql) or 'this'} statements")  # fmt: skip
        try:
            parts = self._read_frame(f"EXPLAIN ESTIMATE {_body(sql)}", canceller)
        except Exception as exc:
            if canceller.reason is not None:
                raise
            return ReadEstimate(rows=None, bytes=None,
                                source=f"EXPLAIN ESTIMATE failed: {_short(exc)}")  # fmt: skip
        if parts.empty:
            return ReadEstimate(rows=None, bytes=None, source="EXPLAIN ESTIMATE: no MergeTree "
                                "table to estimate (table functions, Memory tables)")  # fmt: skip
        rows = {(str(db), str(table)): int(n) for db, table, n in
                parts[["database", "table", "rows"]].itertuples(index=False, name=None)}  # fmt: skip
        wanted = ", ".join(f"({_quote(db)}, {_quote(table)})" for db, table in rows)
        widths = self._read_frame(
            "SELECT database, table, sum(data_uncompressed_bytes) / greatest(sum(rows), "
            f"1) AS width FROM system.parts WHERE active AND (database, table) IN ({wanted}) "
            "GROUP BY database, table", canceller)  # fmt: skip
        width = {(str(db), str(table)): float(w) for db, table, w in
                 widths.itertuples(index=False, name=None)}  # fmt: skip
        total = sum(rows.values())
        size = int(sum(n * width.get(key, 0.0) for key, n in rows.items()))
        return ReadEstimate(rows=total, bytes=size, source="ClickHouse EXPLAIN ESTIMATE (rows "
                            "after pruning) x the tables' uncompressed bytes per row")  # fmt: skip

    # -- write preview -------------------------------------------------------------------
    async def preview(
        self,
        tool_call_id: str,
        sql: str,
        *,
        signal: AbortSignal | None = None,
        audit: AuditSink | None = None,
    ) -> WritePreview:
        """Measure the write ``sql`` without running it: ClickHouse has no transaction to try
        it in, so the rows are counted with the derived ``SELECT count()`` (run read-only) or
        the preview says plainly they cannot be counted. Audited as ``write_preview``.

        Raises:
            QueryRefused: ``sql`` is not a write, or the audit store cannot commit first.
            QueryAborted: ``signal`` aborted.
            QueryError: the database could not be opened.
        """
        audit = audit if audit is not None else self.audit
        ids = self._ids(tool_call_id)
        if signal is not None and signal.aborted:
            raise QueryAborted("Preview not started: the run was aborted.")
        verdict, reasons, final_hash = self._verdict(sql)
        if verdict is None or verdict.kind != "write":
            why = "a read needs no preview" if verdict is not None and verdict.is_read else (
                "; ".join(reasons) or "the statement is not allowed")  # fmt: skip
            raise QueryRefused(f"Refused: not previewed: {why}.")
        plan = clickhouse_plan(sql)
        base = WritePreviewRecord(sql=sql, args_hash=final_hash, operation=plan.operation,
                                  phase="start", **ids)  # fmt: skip
        await self._durable(audit, base)
        try:
            preview = await self._execution.call(self._measure, plan, signal=signal,
                                                 what="Preview")  # fmt: skip
        except QueryError as error:
            record_after(audit, WritePreviewRecord(
                sql=sql, args_hash=final_hash, operation=plan.operation, phase="error",
                error=str(error), **ids))  # fmt: skip
            if isinstance(error, QueryAborted):
                raise
            return WritePreview(affected_rows=None, note=str(error))
        record_after(audit, WritePreviewRecord(
            sql=sql, args_hash=final_hash, operation=plan.operation, phase="result",
            affected_rows=preview.affected_rows,
            method="select" if plan.static_rows is None and preview.affected_rows is not None
            else ("static" if plan.static_rows is not None else None),
            note=preview.note, **ids))  # fmt: skip
        return preview

    def _measure(
        self,
        plan: WritePlan,
        *,
        canceller: Any,
        progress: Callable[[int], None] | None = None,
    ) -> WritePreview:
        notes: list[str] = []
        affected: int | None = None
        method: str | None = None
        sample: pd.DataFrame | None = None
        if plan.static_rows is not None:
            affected, method = plan.static_rows, METHOD_TEXT["static"]
        elif plan.count_sql is not None:
            try:
                affected = self._scalar(plan.count_sql, canceller)
                method = METHOD_TEXT["select"]
            except Exception as exc:
                if canceller.reason is not None:
                    raise
                notes.append(f"the rows could not be counted: {_short(exc)}")
        else:
            why = plan.note or "its rows cannot be derived as a SELECT count()"
            notes.append("rows not counted: ClickHouse has no transaction to try the statement "
                         f"and roll it back, and {why}")  # fmt: skip
        if plan.sample_sql is not None:
            try:
                sample = self._read_frame(plan.sample_sql, canceller)
            except Exception as exc:
                if canceller.reason is not None:
                    raise
                notes.append(f"no sample: {_short(exc)}")
        return WritePreview(affected_rows=affected, sample=sample, method=method,
                            note="; ".join(notes) or None)  # fmt: skip


class _Running:
    """The cancel window of one statement: Stop and the timeout reach it only while it runs."""

    def __init__(self, canceller: Any, cancel: Callable[[], None]) -> None:
        self.canceller, self.cancel = canceller, cancel

    def __enter__(self) -> None:
        self.canceller.started(self.cancel)
        if self.canceller.reason is not None:
            self.canceller.stopped()
            raise QueryAborted("cancelled before it started")

    def __exit__(self, *exc: object) -> None:
        self.canceller.stopped()


def _take(stream: Any, settings: RunSettings, progress: Callable[[int], None] | None) -> Fetched:
    """Keep the stream's first ``row_cap`` rows within ``max_result_bytes``; stop the stream at
    the read's limit or the size bound."""
    limit = read_limit(settings)
    cap, budget = settings.row_cap, settings.max_result_bytes
    kept_frames: list[pd.DataFrame] = []
    seen = kept = 0
    sized = False
    columns: list[str] | None = None
    steps = ProgressSteps(progress, settings.progress_every)
    try:
        for chunk in stream:
            if columns is None:
                columns = [str(c) for c in chunk.columns]
            if kept < cap and not sized:
                taken = chunk if len(chunk) <= cap - kept else chunk.iloc[: cap - kept]
                if budget is not None:
                    taken, sized, used = _within(taken, budget)
                    budget -= used
                if sized:
                    cap = kept + len(taken)
                kept_frames.append(taken)
                kept += len(taken)
            seen += len(chunk)
            steps.update(seen)
            if (limit is not None and (seen >= limit or sized)) or seen >= settings.count_limit:
                break
    finally:
        stream.close()
    exact = (seen < limit and not sized) if limit is not None else seen < settings.count_limit
    seen = min(seen, limit) if limit is not None else seen
    frame = (pd.concat(kept_frames, ignore_index=True) if len(kept_frames) > 1
             else kept_frames[0] if kept_frames else pd.DataFrame(columns=columns or []))  # fmt: skip
    index = frame.index
    if not (isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1):
        frame = frame.reset_index(drop=True)
    return Fetched(columns=columns or [str(c) for c in frame.columns], row_count=seen,
                   row_count_exact=exact, truncated=seen > len(frame), size_capped=sized,
                   head=_head(frame), kept=len(frame), frame=frame)  # fmt: skip


def _head(frame: pd.DataFrame) -> list[tuple[Any, ...]]:
    """The first rows as tuples of plain values, missing ones as ``None`` (for the preview)."""
    values = frame.head(_HEAD_ROWS).to_numpy(dtype=object, copy=True)
    if values.size:
        values[pd.isna(values)] = None
    return list(map(tuple, values))


def _within(frame: pd.DataFrame, budget: int) -> tuple[pd.DataFrame, bool, int]:
    """The leading rows of ``frame`` whose values fit in ``budget`` bytes, whether any were
    left out, and the bytes they hold."""
    total = int(frame.memory_usage(index=False, deep=True).sum())
    if total <= budget:
        return frame, False, total
    per_row = total / max(1, len(frame))
    rows = max(0, math.floor(budget / per_row) if per_row else len(frame))
    return frame.iloc[:rows], True, int(per_row * rows)


def clickhouse_plan(sql: str) -> WritePlan:
    """:func:`plan_write`, plus ClickHouse's mutations: ``ALTER TABLE t DELETE WHERE c`` and
    ``ALTER TABLE t UPDATE ... WHERE c`` change the rows of ``SELECT count() FROM t WHERE c``
    (kept only when that count is itself a read)."""
    plan = plan_write(sql, "clickhouse")
    if plan.count_sql is not None or plan.static_rows is not None:
        return plan
    tokens = [t for t in lexical.tokens_of(sql, "clickhouse") if t.text != ";"]
    words = [lexical.word(t) for t in tokens]
    if words[:2] != ["ALTER", "TABLE"] or len(tokens) < 6:
        return plan
    verb = next((i for i, w in enumerate(words) if w in ("DELETE", "UPDATE")), None)
    if verb is None or verb < 3 or "ON" in words[2:verb]:
        return plan  # ON CLUSTER, or no table name
    depth, where = 0, None
    for index in range(verb + 1, len(tokens)):
        text = tokens[index].text
        depth += (text == "(") - (text == ")")
        if depth == 0 and words[index] == "WHERE":
            where = index
            break
    if where is None or where + 1 >= len(tokens):
        return plan
    table = sql[tokens[2].start : tokens[verb - 1].end + 1]
    condition = sql[tokens[where + 1].start : tokens[-1].end + 1]
    count_sql = f"SELECT count() FROM {table} WHERE {condition}"
    sample_sql = f"SELECT * FROM {table} WHERE {condition} LIMIT 5"
    if classify(count_sql, "clickhouse").kind != "read":
        return plan
    operation = "DELETE" if words[verb] == "DELETE" else "UPDATE"
    return WritePlan(operation=operation, dml=True, count_sql=count_sql,
                     sample_sql=sample_sql if classify(sample_sql, "clickhouse").is_read
                     else None)  # fmt: skip


def _body(sql: str) -> str:
    """``sql`` up to the end of its statement's last token (without trailing semicolons and
    comments): the tool's ``SETTINGS`` clause goes right after it."""
    tokens = lexical.tokens_of(sql, "clickhouse")
    for token in reversed(tokens):
        if token.text != ";":
            return sql[: token.end + 1]
    return sql


def _first_word(sql: str) -> str:
    tokens = lexical.tokens_of(sql, "clickhouse")
    first = next((t for t in tokens if t.text != "("), None)
    return lexical.word(first) if first is not None else ""


def _totals(sql: str) -> bool:
    """``GROUP BY ... WITH TOTALS``: chDB's DataFrame stream fails after the totals block."""
    return "TOTALS" in {lexical.word(t) for t in lexical.tokens_of(sql, "clickhouse")}


class _Whole:
    """A result read at once, as a stream of one chunk."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame

    def __iter__(self) -> Any:
        return iter([self.frame] if len(self.frame.columns) else [])

    def close(self) -> None:
        pass


def _mutated_table(sql: str) -> tuple[str, str] | None:
    """``(database, table)`` a mutation changes (``ALTER TABLE t UPDATE/DELETE``, ``DELETE
    FROM t``), ``database`` "" when not named; ``None`` for any other statement."""
    tokens = [t for t in lexical.tokens_of(sql, "clickhouse") if t.text != ";"]
    words = [lexical.word(t) for t in tokens]
    if words[:2] == ["ALTER", "TABLE"]:
        verb = next((i for i, w in enumerate(words) if w in ("DELETE", "UPDATE")), None)
        names = tokens[2:verb] if verb is not None else []
    elif words[:2] == ["DELETE", "FROM"]:
        end = next((i for i, w in enumerate(words) if w in ("WHERE", "ON", "IN")), len(words))
        names = tokens[2:end]
    else:
        return None
    parts = [t.text.strip('`"') for t in names if t.text != "."]
    if not 1 <= len(parts) <= 2:
        return None
    return (parts[0], parts[1]) if len(parts) == 2 else ("", parts[0])


def _no_rollback(message: str) -> str:
    """A cancelled write's message, without the transactional engines' "nothing was written"."""
    head = message.split("; nothing was", 1)[0].rstrip(". ")
    return (
        f"{head}. ClickHouse has no transactions: what the write had done before it was "
        "stopped stays (blocks already inserted; parts a mutation had already rewritten, "
        "its unfinished rest killed)."
    )


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _marker() -> str:
    return f"/* pi-{uuid.uuid4().hex} */ "


def _audited(wait: Callable[[], object]) -> None:
    try:
        wait()
    except BaseException as exc:
        raise AuditBlocked(str(exc)) from exc


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:199] + "…"
