"""The database backend: the last policy check (D5) and the controlled execution of SQL.

Whatever the ``tool_call`` handlers did, :meth:`DatabaseBackend.run` decides again on the SQL it
is about to run: it classifies it, requires the one-shot capability for anything that is not a
pure read (bound to this call id and the canonical hash of these final arguments, and to the
rows the approval allows), records the final arguments durably, and runs the statement in a
worker thread (a short read of a SQLite file on the caller's thread, see :mod:`.inline`; DuckDB
in a worker process under an OS memory cap, see :mod:`.engine_process`) inside
the engine's read-only mode (reads) or a transaction that commits only on success (approved
writes). :meth:`DatabaseBackend.preview` measures what a write would do, in
a transaction that is always rolled back, before a person is asked.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from functools import lru_cache
from typing import Any, TypeVar, cast

import sqlalchemy as sa
from sqlalchemy.engine import URL, make_url

from pi_notebook.ai.abort import AbortSignal
from pi_notebook.approvals.capabilities import CapabilityStore
from pi_notebook.approvals.protocol import WritePreview
from pi_notebook.audit.durable import AuditSink, commit_before, queue_before, record_after
from pi_notebook.audit.records import (
    AuditRecord,
    CapabilityMismatch,
    FinalArgs,
    PreviewDrift,
    QueryAbort,
    QueryFailure,
    QueryRefusal,
    QueryResult,
    WritePreviewRecord,
)
from pi_notebook.sql import POLICY_VERSION, Verdict, args_hash, classify
from pi_notebook.sql.backend.arrow import ARROW_MIN_CAP, AdbcPostgres, arrow_available
from pi_notebook.sql.backend.arrow_sqlite import SqliteArrow, sqlite_file
from pi_notebook.sql.backend.derive import plan_write
from pi_notebook.sql.backend.engine_process import (
    EngineProcess,
    default_memory_limit,
    release_process,
    shared_process,
)
from pi_notebook.sql.backend.engines import (
    CONNECT_TIMEOUT_S,
    SQLITE_MAX_VALUE_BYTES,
    create_backend_engine,
    sqlglot_dialect,
    supported_backend,
)
from pi_notebook.sql.backend.errors import (
    QueryAborted,
    QueryError,
    QueryRefused,
    QueryTimeout,
    describe_error,
)
from pi_notebook.sql.backend.execution import Execution
from pi_notebook.sql.backend.inline import InlineReads
from pi_notebook.sql.backend.measure import METHOD_TEXT
from pi_notebook.sql.backend.readonly import RunKind
from pi_notebook.sql.backend.results import QueryOutcome, shape
from pi_notebook.sql.backend.roles import RoleFor, RoleRefused, role_for_call
from pi_notebook.sql.backend.sizes import DEFAULT_MAX_RESULT_BYTES
from pi_notebook.sql.backend.worker import (
    AuditBlocked,
    Bounds,
    ConnectionSlot,
    DriftError,
    Fetched,
    RunSettings,
    estimate_statement,
    preview_statement,
    run_statement,
)
from pi_notebook.sql.backend.worker_engine import WorkerEngine

T = TypeVar("T")

__all__ = ["AUDIT_UNAVAILABLE", "DatabaseBackend", "ProgressCallback", "query_args_hash"]

ProgressCallback = Callable[[int], None]
TOOL_NAME = "query_database"
AUDIT_UNAVAILABLE = "Refused: not run: the audit store is unavailable."


@lru_cache(maxsize=4096)
def query_args_hash(sql: str, dialect: str) -> str:
    """Canonical hash of ``query_database``'s arguments (the gate and the backend share it;
    cached: an agent repeats statements, and the gate and the backend hash the same one)."""
    return args_hash({"sql": sql}, dialect)


class DatabaseBackend:
    """Runs SQL for ``query_database`` against one database.

    Args:
        url: SQLAlchemy URL (SQLite, PostgreSQL, MySQL/MariaDB or DuckDB).
        row_cap: most rows kept in the result DataFrame.
        statement_timeout_s: a statement running longer is cancelled at the driver.
        approvals: the capability store the approval gate grants into.
        audit: default audit sink (``run`` may be given another one per call).
        count_limit: rows counted past the cap, on request, before the count is reported as
            a lower bound.
        progress_every: rows between two progress reports.
        connect_timeout_s: most seconds opening a connection may take (PostgreSQL rounds up
            to whole seconds, at least 2); an abort stops waiting at once.
        arrow: read large results through Arrow (PostgreSQL over ADBC, DuckDB natively,
            SQLite files over ADBC in a child process; see :mod:`.arrow`). Default: when
            pyarrow is installed and ``row_cap`` is at least ``ARROW_MIN_CAP``.
        max_result_bytes: most bytes of values a read keeps, besides the row cap (see
            :mod:`.sizes`; default 64 MiB); ``None``: rows only.
        memory_capped: the engine runs under an operating-system memory cap, so the
            classifier's rules that only protect the kernel's memory stop asking (see
            :meth:`classify`). :func:`~pi_notebook.sql.engines.create_backend` sets it from
            the engine's ``EngineInfo.memory_capped``; say ``True`` only where that holds.
        role_per_user: PostgreSQL only: every transaction runs under ``SET LOCAL ROLE`` to
            the role of whom the call acts for (:func:`pi_notebook.identity.requester`), so
            the database's own privileges apply per person (see :mod:`.roles`).
        role_for: the role of each user (a mapping, or a function of the user's name);
            default: the user's name itself. Only with ``role_per_user``.
        memory_limit_bytes: the most memory a statement may use where the engine runs
            (default :func:`~.engine_process.default_memory_limit`: half the machine's
            memory, at most 4 GiB). DuckDB runs in a worker process capped at it (see
            :mod:`.engine_process`); SQLite gets it as its ``hard_heap_limit``.
    """

    memory_capped: bool = False
    role_per_user: bool = False
    role_for: RoleFor | None = None
    _process: EngineProcess | None = None  # DuckDB's worker process (see :mod:`.engine_process`)

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
        tool_name: str = TOOL_NAME,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        arrow: bool | None = None,
        max_result_bytes: int | None = DEFAULT_MAX_RESULT_BYTES,
        memory_capped: bool = False,
        role_per_user: bool = False,
        role_for: RoleFor | None = None,
        memory_limit_bytes: int | None = None,
    ) -> None:
        self.url = make_url(url)
        self.backend = supported_backend(self.url)
        if role_per_user and self.backend != "postgresql":
            raise ValueError(
                f"role_per_user needs PostgreSQL; {self.backend} statements would run with the "
                "login's own privileges."
            )
        if role_for is not None and not role_per_user:
            raise ValueError("role_for is used only with role_per_user=True.")
        self.role_per_user = role_per_user is True
        self.role_for = role_for
        self.dialect = sqlglot_dialect(self.url)
        self.memory_capped = memory_capped is True
        self.capabilities = approvals if approvals is not None else CapabilityStore()
        self.audit = audit
        self.tool_name = tool_name
        use_arrow = (arrow if arrow is not None else row_cap >= ARROW_MIN_CAP) and arrow_available(
            self.backend
        )
        self.settings = RunSettings(
            row_cap=row_cap,
            count_limit=max(count_limit, row_cap + 1),  # a capped read stops at the cap + 1
            statement_timeout_s=statement_timeout_s,
            progress_every=progress_every,
            arrow=use_arrow,
            max_result_bytes=max_result_bytes,
        )
        self.memory_limit_bytes = (
            memory_limit_bytes if memory_limit_bytes is not None else default_memory_limit()
        )
        # DuckDB runs in the worker process (see :mod:`.engine_process`): the kernel only
        # holds a stand-in for its engine.
        if self.backend == "duckdb":
            self._process = shared_process(
                self.url,
                memory_limit_bytes=self.memory_limit_bytes,
                connect_timeout_s=connect_timeout_s,
                statement_timeout_s=statement_timeout_s,
            )
            self.engine = cast(sa.Engine, WorkerEngine(self.url))
            if self._process.pid is None:
                self._process.prestart()
        else:
            self.engine = create_backend_engine(
                self.url,
                connect_timeout_s=connect_timeout_s,
                statement_timeout_s=statement_timeout_s,
                memory_limit_bytes=self.memory_limit_bytes,
            )
        self._adbc = _arrow_reader(self.url, self.backend, connect_timeout_s) if use_arrow else None
        self._execution = Execution(
            self.url,
            statement_timeout_s,
            memory_limit_bytes=self.memory_limit_bytes if self.backend == "sqlite" else 0,
        )
        self._slot = ConnectionSlot()
        # Short reads of a SQLite file run on the caller's thread (see :mod:`.inline`).
        self._inline = (
            InlineReads(self.engine)
            if self.backend == "sqlite" and sqlite_file(self.url) is not None
            else None
        )

    def dispose(self) -> None:
        """Close every pooled connection and let the worker thread go (the backend reconnects
        if used again)."""
        self._execution.close()
        self._slot.release()
        if self._inline is not None:
            self._inline.close()
        if self._adbc is not None:
            self._adbc.close()
        if self._process is not None:
            self._process.release()  # a later call reconnects, or starts a new worker
        self.engine.dispose()

    @property
    def worker_pid(self) -> int | None:
        """The process id of the worker process running this database's engine, while one
        runs (DuckDB; see :mod:`.engine_process`), else ``None``."""
        return self._process.pid if self._process is not None else None

    def __del__(self) -> None:
        process, self._process = getattr(self, "_process", None), None
        if process is not None:
            try:
                release_process(process)
            except Exception:  # at interpreter exit; the worker ends with the kernel anyway
                pass

    async def offload(
        self, fn: Callable[..., Any], *args: Any, signal: AbortSignal | None = None
    ) -> Any:
        """Run a blocking, side-effect-free ``fn(*args)`` (a schema read, say) on the backend's
        worker thread, bounded by the statement timeout and ``signal``.

        An abort or timeout returns at once even if ``fn`` is stuck (in a connect to a server
        that never answers): its thread is abandoned and its result dropped, so ``fn`` must
        not write anything.

        Raises:
            QueryAborted: ``signal`` aborted.
            QueryTimeout: the statement timeout passed.
            QueryError: ``fn`` raised (as short, credential-free text).
        """

        if self._process is not None:
            return await self._execution.call(self._process.offload, fn, *args, signal=signal)

        def job(*, canceller: Any = None, progress: Any = None) -> Any:
            return fn(*args)

        return await self._execution.call(job, signal=signal)

    def _ids(self, tool_call_id: str) -> dict[str, Any]:
        return {
            "tool_call_id": tool_call_id,
            "tool_name": self.tool_name,
            "policy_version": POLICY_VERSION,
        }

    def classify(self, sql: str) -> Verdict:
        """The classifier's verdict on ``sql`` for this engine: ``classify(sql, dialect)``,
        whose memory rules stop asking only where the engine runs under an OS memory cap
        (:attr:`memory_capped`). The gate, the read budget and :meth:`run` all ask this, so
        they agree on what is a read."""
        return classify(sql, self.dialect, memory_bounded=self.memory_capped)

    def _verdict(self, sql: str) -> tuple[Verdict | None, tuple[str, ...], str]:
        """The classifier's verdict, its reasons and the canonical hash (fails closed)."""
        try:
            verdict = self.classify(sql)
            final_hash = query_args_hash(sql, self.dialect) if verdict.kind != "reject" else ""
        except Exception as exc:  # a classifier failure is a refusal, never a pass
            return None, (f"the statement could not be checked ({type(exc).__name__})",), ""
        return verdict, tuple(verdict.reasons), final_hash

    def _previewable(self, sql: str, signal: AbortSignal | None) -> str:
        """The canonical hash of the write ``sql`` about to be previewed.

        Raises:
            QueryAborted: ``signal`` aborted.
            QueryRefused: ``sql`` is not a write (a read needs no preview; a rejected
                statement never runs).
        """
        if signal is not None and signal.aborted:
            raise QueryAborted("Preview not started: the run was aborted.")
        verdict, reasons, final_hash = self._verdict(sql)
        if verdict is None or verdict.kind != "write":
            why = (
                "a read needs no preview"
                if verdict is not None and verdict.is_read
                else ("; ".join(reasons) or "the statement is not allowed")
            )
            raise QueryRefused(f"Refused: not previewed: {why}.")
        return final_hash

    async def run(
        self,
        tool_call_id: str,
        sql: str,
        *,
        signal: AbortSignal | None = None,
        on_progress: ProgressCallback | None = None,
        audit: AuditSink | None = None,
        count_rows: bool = False,
        record_result: bool = True,
        on_slow: Callable[[], None] | None = None,
    ) -> QueryOutcome:
        """Decide on ``sql`` and run it.

        ``on_slow`` is called when the statement goes to the worker thread (every write, and
        a read that does not finish at once, see :mod:`.inline`): the moment to tell a person
        it is running. A read that ran at once never calls it.

        ``record_result=False`` leaves out the ``query_result`` record, for a caller whose
        audit records the outcome anyway (a session's recorder: the end record holds the
        result's details); errors, aborts and refusals are recorded here whatever it says.

        A read stops one row past the row cap (``row_count`` is then a lower bound, "more
        than the cap"); ``count_rows`` counts every row instead, up to ``count_limit``.

        Raises:
            QueryRefused: rejected SQL; a write without a live capability for this call id
                and these exact arguments (the audit gets ``capability_mismatch`` with both
                hashes); a write whose count of changed rows is outside the approval's bounds
                (``preview_drift`` with both counts; nothing changed); or an audit store that
                cannot commit the records that must precede the statement; with
                ``role_per_user``, a person whose role is unnamed, missing or not granted to
                the login (``RoleRefused``; nothing ran).
            QueryAborted: ``signal`` aborted; the statement was cancelled and rolled back.
            QueryError: connection, driver or timeout failure, as short credential-free text.
        """
        audit = audit if audit is not None else self.audit
        ids = self._ids(tool_call_id)
        if signal is not None and signal.aborted:
            raise QueryAborted("Query not started: the run was aborted.")
        verdict, reasons, final_hash = self._verdict(sql)
        if verdict is None or verdict.kind not in ("read", "write"):
            message = "Refused: " + ("; ".join(reasons) or "the statement is not allowed")
            record_after(audit, QueryRefusal(sql=sql, reasons=list(reasons), **ids))
            raise QueryRefused(message)
        kind: RunKind = "read" if verdict.kind == "read" else "write"
        try:
            role = self._role()
        except RoleRefused as refused:
            record_after(audit, QueryRefusal(sql=sql, reasons=[str(refused)], **ids))
            raise
        bounds: Bounds | None = None
        if kind == "write":
            check = self.capabilities.consume(tool_call_id, final_hash)
            if not check.ok:
                await self._durable(
                    audit,
                    CapabilityMismatch(
                        sql=sql,
                        approved_hash=check.approved_hash,
                        final_hash=check.final_hash,
                        reason=check.reason,
                        **ids,
                    ),
                )
                raise QueryRefused(f"Refused: {check.reason}. Nothing was run.")
            bounds = Bounds(expected_rows=check.expected_rows, max_rows=check.max_rows)
        audited = None
        if audit is not None:  # without an audit log there is nothing to record first
            final = FinalArgs(
                sql=sql,
                args_hash=final_hash,
                verdict=verdict.kind,
                reasons=list(reasons),
                dialect=self.dialect,
                db_role=role,
                **ids,
            )
            if kind == "write":
                # Committed before the statement is even handed to the worker.
                await self._durable(audit, final)
            elif self._may_inline(kind, sql):
                # A short read may run on this thread (see :mod:`.inline`): its record is
                # committed first (on a SQLite store by this very call, see
                # ``AuditLog.commit``), so nothing of the read can leave before it.
                await self._durable(audit, final, sync=False)
            else:
                # A read's record is queued now (its place in the chain) and the worker waits
                # for its commit before anything of the read (rows or error) leaves it: the
                # read runs meanwhile (it changes nothing), and the loop makes one hop, not
                # two. It need not wait for the server's WAL flush (see commit_before).
                try:
                    audited = queue_before(audit, final, sync=False)
                except Exception:  # AuditUnavailableError, or any failure to queue: fail closed
                    raise QueryRefused(AUDIT_UNAVAILABLE) from None
        try:
            return await self._run_as(
                kind,
                sql,
                tool_call_id=tool_call_id,
                final_hash=final_hash,
                signal=signal,
                on_progress=on_progress,
                audit=audit,
                bounds=bounds,
                count_rows=count_rows,
                audited=audited,
                on_slow=on_slow,
                record_result=record_result,
                **({"role": role} if role is not None else {}),
            )
        except DriftError as drift:
            raise self._drift(drift, bounds or Bounds(), sql, final_hash, audit, ids) from None
        except AuditBlocked:
            raise QueryRefused(AUDIT_UNAVAILABLE) from None

    async def _durable(
        self,
        audit: AuditSink | None,
        record: AuditRecord,
        *,
        sync: bool = True,
    ) -> None:
        """A record that must be committed before anything runs; refuses if it cannot be."""
        try:
            await commit_before(audit, record, sync=sync)
        except Exception:  # AuditUnavailableError, or any other failure to commit: fail closed
            raise QueryRefused(AUDIT_UNAVAILABLE) from None

    def _drift(
        self,
        drift: DriftError,
        bounds: Bounds,
        sql: str,
        final_hash: str,
        audit: AuditSink | None,
        ids: dict[str, Any],
    ) -> QueryRefused:
        record_after(
            audit,
            PreviewDrift(
                sql=sql,
                args_hash=final_hash,
                expected_rows=bounds.expected_rows,
                max_rows=bounds.max_rows,
                actual_rows=drift.actual,
                reason=drift.why,
                **ids,
            ),
        )
        if drift.actual is None:
            message = (
                f"Refused: the approval is bounded by a row count, but this statement's "
                f"rows cannot be counted ({drift.why or 'unknown'}); nothing was changed."
            )
        elif bounds.expected_rows is not None and drift.actual != bounds.expected_rows:
            message = (
                f"Refused: the statement would change {drift.actual:,} rows, the approval "
                f"was for {bounds.expected_rows:,}; nothing was changed."
            )
        else:
            message = (
                f"Refused: the statement would change {drift.actual:,} rows, the approval "
                f"allows at most {bounds.max_rows:,}; nothing was changed."
            )
        return QueryRefused(message)

    async def preview(
        self,
        tool_call_id: str,
        sql: str,
        *,
        signal: AbortSignal | None = None,
        audit: AuditSink | None = None,
    ) -> WritePreview:
        """Measure what the write ``sql`` would do, changing nothing.

        The rows it would change are counted by running it in a transaction that is always
        rolled back where a rollback is certain to undo it, else with the equivalent
        ``SELECT count(*)`` (see :mod:`.measure`), else not at all; with the engine's plan and
        up to five of the rows it would touch. Runs under the statement timeout and ``signal``;
        audited as ``write_preview`` (durably before anything runs, then the result).

        Returns:
            The preview. What could not be measured is ``None`` and ``note`` says why (a
            statement that fails, a preview that timed out, a count that is not safe to take).

        Raises:
            QueryRefused: ``sql`` is not a write (a read needs no preview; a rejected statement
                never runs), the audit store cannot commit the preview's record, or the
                person's role cannot be used (``RoleRefused``).
            QueryAborted: ``signal`` aborted; nothing was changed.
            QueryError: the database could not be reached.
        """
        audit = audit if audit is not None else self.audit
        ids = self._ids(tool_call_id)
        final_hash = self._previewable(sql, signal)
        plan = plan_write(sql, self.dialect)
        role = self._role()
        base = WritePreviewRecord(
            sql=sql,
            args_hash=final_hash,
            operation=plan.operation,
            phase="start",
            db_role=role,
            **ids,
        )
        await self._durable(audit, base)
        try:
            measured = await (
                self._execution.call(
                    self._process.preview_statement,
                    sql,
                    plan,
                    replace(self.settings, role=role),
                    signal=signal,
                    what="Preview",
                )
                if self._process is not None
                else self._execution.call(
                    preview_statement,
                    self.engine,
                    self.backend,
                    sql,
                    plan,
                    replace(self.settings, role=role),
                    describe=lambda exc: describe_error(exc, self.url),
                    signal=signal,
                    what="Preview",
                    slot=self._slot,
                )
            )
        except QueryError as error:
            record_after(audit, replace(base, phase="error", error=str(error)))
            if not isinstance(error, QueryTimeout):
                raise
            return WritePreview(affected_rows=None, note=str(error))
        method = METHOD_TEXT[measured.method] if measured.method is not None else None
        preview = WritePreview(
            affected_rows=measured.affected_rows,
            plan=measured.plan,
            sample=measured.sample,
            method=method,
            note="; ".join(measured.notes) or None,
        )
        record_after(
            audit,
            replace(
                base,
                phase="result",
                affected_rows=preview.affected_rows,
                method=measured.method,
                note=preview.note,
            ),
        )
        return preview

    async def estimate_with(
        self, hook: Callable[[Any, str], T], sql: str, *, signal: AbortSignal | None = None
    ) -> T:
        """Run the engine's estimate ``hook(raw, sql)`` for the read ``sql`` on the worker,
        inside the read-only transaction and statement timeout a read runs in (rolled back).

        Raises:
            QueryAborted: ``signal`` aborted.
            QueryTimeout: the statement timeout passed.
            QueryError: the database could not be reached, or the hook failed (safe text).
        """
        settings = replace(self.settings, role=self._role())
        if self._process is not None:
            return await self._execution.call(
                self._process.estimate_statement, hook, sql, settings, signal=signal
            )
        return await self._execution.call(
            estimate_statement,
            self.engine,
            self.backend,
            hook,
            sql,
            settings,
            signal=signal,
            slot=self._slot,
        )

    def _role(self) -> str | None:
        """The role this call runs under (``role_per_user``), named on the caller's side.

        Raises:
            RoleRefused: no usable role for whom the call acts for.
        """
        return role_for_call(self.role_for) if self.role_per_user else None

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
        role: str | None = None,
    ) -> QueryOutcome:
        """Run ``sql`` as ``kind`` WITHOUT the policy check. Internal and for tests only: it is
        how the tests prove the engine's read-only mode stops what slipped past the classifier.

        Raises:
            DriftError: ``bounds`` are active and the count is outside them (rolled back).
        """
        ids = {"tool_call_id": tool_call_id, "tool_name": self.tool_name}
        plan = plan_write(sql, self.dialect) if bounds is not None and bounds.active else None
        settings = replace(self.settings, count_rows=True) if count_rows else self.settings
        if self.role_per_user:  # never without the person's role, even when called directly
            settings = replace(settings, role=role if role is not None else self._role())
        started = time.perf_counter()
        try:
            aborted = signal is not None and signal.aborted  # the worker's path reports it
            fetched = (
                None if aborted else self._inline_read(kind, sql, settings, on_progress, audited)
            )
            if fetched is None:
                if on_slow is not None:
                    try:
                        on_slow()
                    except Exception:  # a broken listener must not break the statement
                        pass
                fetched = await (
                    self._execution.call(
                        self._process.run_statement,
                        kind,
                        sql,
                        settings,
                        bounds=bounds,
                        plan=plan,
                        signal=signal,
                        on_progress=on_progress,
                        audited=audited,
                    )
                    if self._process is not None
                    else self._execution.call(
                        run_statement,
                        self.engine,
                        self.backend,
                        kind,
                        sql,
                        settings,
                        bounds=bounds,
                        plan=plan,
                        adbc=self._adbc,
                        slot=self._slot,
                        signal=signal,
                        on_progress=on_progress,
                        audited=audited,
                    )
                )
        except QueryError as error:
            self._record_failure(audit, error, final_hash, ids)
            raise
        return self._finish(
            fetched, kind, started, final_hash, ids, audit if record_result else None
        )

    @staticmethod
    def _record_failure(
        audit: AuditSink | None, error: QueryError, final_hash: str, ids: dict[str, Any]
    ) -> None:
        """The audit record of a statement that failed or was stopped (best effort)."""
        failure = QueryAbort if isinstance(error, QueryAborted) else QueryFailure
        record_after(audit, failure(error=str(error), args_hash=final_hash, **ids))

    def _finish(
        self,
        fetched: Any,
        kind: RunKind,
        started: float,
        final_hash: str,
        ids: dict[str, Any],
        audit: AuditSink | None,
    ) -> QueryOutcome:
        """The outcome of a statement that ran, and its ``query_result`` record when
        ``audit`` is given (best effort)."""
        outcome = shape(
            fetched,
            kind=kind,
            dialect=self.dialect,
            args_hash=final_hash,
            seconds=time.perf_counter() - started,
        )
        if audit is not None:
            record_after(
                audit,
                QueryResult(
                    row_count=outcome.row_count,
                    truncated=outcome.truncated,
                    duration_ms=outcome.duration_ms,
                    statement_kind=kind,
                    args_hash=final_hash,
                    **ids,
                ),
            )
        return outcome

    def _may_inline(self, kind: RunKind, sql: str) -> bool:
        """Whether ``sql`` may run on the caller's thread (see :mod:`.inline`)."""
        if self._inline is None or kind != "read":
            return False
        return not (self.settings.arrow and self._adbc is not None and self._adbc.accepts(sql))

    def _inline_read(
        self,
        kind: RunKind,
        sql: str,
        settings: RunSettings,
        on_progress: ProgressCallback | None,
        audited: Callable[[], object] | None,
    ) -> Fetched | None:
        """A short SQLite read run here, without the worker hop (see :mod:`.inline`), or
        ``None``: the worker runs it."""
        if audited is not None or self._inline is None or not self._may_inline(kind, sql):
            return None  # the worker waits for ``audited``; see ``_may_inline`` for the rest
        return self._inline.read(sql, settings, on_progress)


def _arrow_reader(
    url: URL, backend: str, connect_timeout_s: float
) -> AdbcPostgres | SqliteArrow | None:
    """The Arrow reader of ``backend`` (DuckDB reads Arrow on its own connection)."""
    if backend == "postgresql":
        return AdbcPostgres(url, connect_timeout_s)
    path = sqlite_file(url) if backend == "sqlite" else None
    return SqliteArrow(path, SQLITE_MAX_VALUE_BYTES) if path is not None else None
