"""The database backend: the last policy check (D5) and the controlled execution of SQL.

Whatever the ``tool_call`` handlers did, :meth:`DatabaseBackend.run` decides again on the SQL it
is about to run: it classifies it, requires the one-shot capability for anything that is not a
pure read (bound to this call id and the canonical hash of these final arguments, and to the
rows the approval allows), records the final arguments durably (see :mod:`.run_records`), and
runs the statement through :class:`~.runner.StatementRunner` (which records how it ended) where
the engine runs it (see :mod:`.placement`: a worker thread, a short read of a SQLite file on
the caller's thread, DuckDB in a worker process under an OS memory cap) inside the engine's
read-only mode (reads) or a transaction that commits only on success (approved writes).
:meth:`DatabaseBackend.preview` refuses what is not a write, then measures what the write would
do, in a transaction that is always rolled back, before a person is asked.

The layers of one backend, each the base of the next: :class:`~.placement.Placement` (the
engine, and where a statement runs), :class:`~.runner.StatementRunner` (runs, measures and
estimates decided statements, and records their outcome), :class:`DatabaseBackend` (the
options and the policy).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy.engine import URL, make_url

from pi_notebook.ai.abort import AbortSignal
from pi_notebook.approvals.capabilities import CapabilityStore
from pi_notebook.approvals.protocol import WritePreview
from pi_notebook.audit.durable import AuditSink, record_after
from pi_notebook.audit.records import CapabilityMismatch, FinalArgs, QueryRefusal
from pi_notebook.sql import Verdict, args_hash, classify
from pi_notebook.sql.backend.arrow import ARROW_MIN_CAP, arrow_available
from pi_notebook.sql.backend.engine_process import default_memory_limit
from pi_notebook.sql.backend.engines import CONNECT_TIMEOUT_S, sqlglot_dialect, supported_backend
from pi_notebook.sql.backend.errors import QueryAborted, QueryRefused
from pi_notebook.sql.backend.placement import ProgressCallback
from pi_notebook.sql.backend.readonly import RunKind
from pi_notebook.sql.backend.results import QueryOutcome
from pi_notebook.sql.backend.roles import RoleFor, RoleRefused, role_options
from pi_notebook.sql.backend.run_records import (
    AUDIT_UNAVAILABLE,
    commit_or_refuse,
    drift_refusal,
    record_final_args,
)
from pi_notebook.sql.backend.runner import StatementRunner
from pi_notebook.sql.backend.sizes import DEFAULT_MAX_RESULT_BYTES
from pi_notebook.sql.backend.worker import AuditBlocked, Bounds, DriftError, RunSettings

__all__ = ["AUDIT_UNAVAILABLE", "DatabaseBackend", "ProgressCallback", "query_args_hash"]

TOOL_NAME = "query_database"


@lru_cache(maxsize=4096)
def query_args_hash(sql: str, dialect: str) -> str:
    """Canonical hash of ``query_database``'s arguments (the gate and the backend share it;
    cached: an agent repeats statements, and the gate and the backend hash the same one)."""
    return args_hash({"sql": sql}, dialect)


@dataclass(frozen=True)
class _Decision:
    """What :meth:`DatabaseBackend.run` decided on a statement it will run."""

    kind: RunKind
    verdict: Verdict
    reasons: tuple[str, ...]
    final_hash: str
    role: str | None
    bounds: Bounds | None


class DatabaseBackend(StatementRunner):
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
        self.role_per_user, self.role_for = role_options(self.backend, role_per_user, role_for)
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
        self._place(
            connect_timeout_s=connect_timeout_s,
            statement_timeout_s=statement_timeout_s,
            use_arrow=use_arrow,
        )

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
        decided = await self._decide(tool_call_id, sql, audit, ids)
        audited = await self._record_first(decided, sql, audit, ids)
        try:
            return await self._run_as(
                decided.kind,
                sql,
                tool_call_id=tool_call_id,
                final_hash=decided.final_hash,
                signal=signal,
                on_progress=on_progress,
                audit=audit,
                bounds=decided.bounds,
                count_rows=count_rows,
                audited=audited,
                on_slow=on_slow,
                record_result=record_result,
                role=decided.role,
            )
        except DriftError as drift:
            bounds = decided.bounds or Bounds()
            raise drift_refusal(drift, bounds, sql, decided.final_hash, audit, ids) from None
        except AuditBlocked:
            raise QueryRefused(AUDIT_UNAVAILABLE) from None

    async def _decide(
        self, tool_call_id: str, sql: str, audit: AuditSink | None, ids: dict[str, Any]
    ) -> _Decision:
        """Classify ``sql``, name the role it runs under and, for a write, consume this
        call's capability for these exact arguments.

        Raises:
            QueryRefused: rejected SQL, or a write without a live capability (recorded);
                ``RoleRefused`` for a person without a usable role.
        """
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
                await commit_or_refuse(
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
        return _Decision(kind, verdict, reasons, final_hash, role, bounds)

    async def _record_first(
        self, decided: _Decision, sql: str, audit: AuditSink | None, ids: dict[str, Any]
    ) -> Callable[[], object] | None:
        """The final arguments recorded before ``sql`` runs (see :func:`record_final_args`);
        without an audit log there is nothing to record first."""
        if audit is None:
            return None
        final = FinalArgs(
            sql=sql,
            args_hash=decided.final_hash,
            verdict=decided.verdict.kind,
            reasons=list(decided.reasons),
            dialect=self.dialect,
            db_role=decided.role,
            **ids,
        )
        inline = self._may_inline(decided.kind, sql)
        return await record_final_args(audit, final, kind=decided.kind, inline=inline)

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
        final_hash = self._previewable(sql, signal)
        return await self._measure_write(
            sql, final_hash, self._ids(tool_call_id), signal=signal, audit=audit
        )
