"""Where a decided statement runs: :class:`Placement`, the ground layer of
:class:`~pi_notebook.sql.backend.backend.DatabaseBackend` (under
:class:`~pi_notebook.sql.backend.runner.StatementRunner`) that holds the engine and the places a
statement may run once the policy has decided on it.

* a short read of a SQLite file on the caller's thread (see :mod:`.inline`);
* DuckDB in a worker process under an OS memory cap (see :mod:`.engine_process`), the kernel
  holding only a stand-in for its engine (:mod:`.worker_engine`);
* every other statement on the backend's worker thread (see :mod:`.execution`), under the
  statement timeout and the caller's abort signal, with large reads through Arrow where the
  engine has a reader (see :mod:`.arrow`, :mod:`.arrow_sqlite`).

Nothing here classifies, asks for a capability or writes an audit record: that is the
backend's policy path and its runner.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import sqlalchemy as sa
from sqlalchemy.engine import URL

from pi_notebook.ai.abort import AbortSignal
from pi_notebook.sql.backend.arrow import AdbcPostgres
from pi_notebook.sql.backend.arrow_sqlite import SqliteArrow, sqlite_file
from pi_notebook.sql.backend.derive import WritePlan
from pi_notebook.sql.backend.engine_process import EngineProcess
from pi_notebook.sql.backend.engine_reads import LoopReads
from pi_notebook.sql.backend.engine_shares import dispose_share, release_process, shared_process
from pi_notebook.sql.backend.engines import SQLITE_MAX_VALUE_BYTES, create_backend_engine
from pi_notebook.sql.backend.errors import describe_error
from pi_notebook.sql.backend.execution import Execution
from pi_notebook.sql.backend.inline import InlineReads
from pi_notebook.sql.backend.measure import Measured
from pi_notebook.sql.backend.readonly import RunKind
from pi_notebook.sql.backend.worker import (
    Bounds,
    ConnectionSlot,
    Fetched,
    RunSettings,
    estimate_statement,
    preview_statement,
    run_statement,
)
from pi_notebook.sql.backend.worker_engine import WorkerEngine

T = TypeVar("T")

__all__ = ["Placement", "ProgressCallback"]

ProgressCallback = Callable[[int], None]


class Placement:
    """The engine of one database and where its statements run (see the module docstring).

    :meth:`_place` opens it; the backend's options (``url``, ``backend``, ``settings``,
    ``memory_limit_bytes``) are set before."""

    url: URL
    backend: str
    settings: RunSettings
    memory_limit_bytes: int
    engine: sa.Engine
    _process: EngineProcess | None = None  # DuckDB's worker process (see :mod:`.engine_process`)
    _share_given = False  # dispose gave this backend's share of the worker back
    _reads: LoopReads | None = None  # its reads, awaited on the loop (see :mod:`.engine_reads`)
    _adbc: AdbcPostgres | SqliteArrow | None
    _execution: Execution
    _slot: ConnectionSlot
    _inline: InlineReads | None

    def _place(
        self, *, connect_timeout_s: float, statement_timeout_s: float, use_arrow: bool
    ) -> None:
        """Open the engine, its worker (thread, or process for DuckDB) and its fast paths."""
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
            self._reads = LoopReads(self._process, self.url, statement_timeout_s)
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
            from_sent=self._process is not None,  # a worker's start is not the statement's
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
        self._give_back_share()
        self.engine.dispose()

    @property
    def worker_pid(self) -> int | None:
        """The process id of the worker process running this database's engine, while one
        runs (DuckDB; see :mod:`.engine_process`), else ``None``."""
        return self._process.pid if self._process is not None else None

    def _give_back_share(self) -> None:
        """Give this backend's share of its worker back (see
        :func:`~.engine_process.dispose_share`; a later call reconnects, or starts a new
        worker)."""
        if self._process is not None:
            dispose_share(self._process, held=not self._share_given)
            self._share_given = True

    def __del__(self) -> None:
        process, self._process = getattr(self, "_process", None), None
        if process is not None and not self._share_given:
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

    async def _run_on_worker(
        self,
        kind: RunKind,
        sql: str,
        settings: RunSettings,
        *,
        bounds: Bounds | None,
        plan: WritePlan | None,
        signal: AbortSignal | None,
        on_progress: ProgressCallback | None,
        audited: Callable[[], object] | None,
    ) -> Fetched:
        """Run the decided statement on the worker thread, or in the engine's worker process
        (a read awaited on the loop, see :mod:`.engine_reads`; a write through the thread).

        Raises:
            DriftError: ``bounds`` are active and the count is outside them (rolled back).
            AuditBlocked: ``audited`` failed: nothing of the statement left the worker.
            QueryError: the statement failed, timed out or was aborted.
        """
        if self._reads is not None and kind == "read" and self._process is not None:
            return await self._reads.read(
                sql,
                settings,
                bounds=bounds,
                plan=plan,
                signal=signal,
                on_progress=on_progress,
                audited=audited,
            )
        if self._process is not None:
            return await self._execution.call(
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
        return await self._execution.call(
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

    async def _preview_on_worker(
        self, sql: str, plan: WritePlan, settings: RunSettings, signal: AbortSignal | None
    ) -> Measured:
        """Measure the write ``sql`` on the worker, in a transaction always rolled back."""
        if self._process is not None:
            return await self._execution.call(
                self._process.preview_statement,
                sql,
                plan,
                settings,
                signal=signal,
                what="Preview",
            )
        return await self._execution.call(
            preview_statement,
            self.engine,
            self.backend,
            sql,
            plan,
            settings,
            describe=lambda exc: describe_error(exc, self.url),
            signal=signal,
            what="Preview",
            slot=self._slot,
        )

    async def _estimate_on_worker(
        self,
        hook: Callable[[Any, str], T],
        sql: str,
        settings: RunSettings,
        signal: AbortSignal | None,
    ) -> T:
        """Run the estimate ``hook(raw, sql)`` on the worker, read-only and rolled back."""
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
