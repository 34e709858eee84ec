"""The calls a SQLAlchemy backend makes on its engine's worker process (DuckDB; see
:mod:`.engine_process`), each in the shape :class:`~.execution.Execution` runs: the
statement, the write preview, the estimate, and an offloaded function."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pi_notebook.sql.backend.cancel import Canceller
from pi_notebook.sql.backend.derive import WritePlan
from pi_notebook.sql.backend.worker import Bounds, Fetched, RunSettings, wait_audited

__all__ = ["EngineCalls"]


class EngineCalls:
    """The backend's calls, each sent with :meth:`call` (the worker's channel)."""

    def call(
        self,
        op: str,
        args: tuple[Any, ...],
        *,
        canceller: Canceller,
        progress: Callable[[int], None] | None = None,
    ) -> Any:
        raise NotImplementedError

    def run_statement(
        self,
        kind: str,
        sql: str,
        settings: RunSettings,
        *,
        canceller: Canceller,
        progress: Callable[[int], None] | None = None,
        bounds: Bounds | None = None,
        plan: WritePlan | None = None,
        audited: Callable[[], object] | None = None,
    ) -> Fetched:
        """:func:`.worker.run_statement` in the worker; ``audited`` is waited for here, as
        there: a write waits before it is sent, a read's result (or error) after."""
        if audited is not None and kind == "write":
            wait_audited(audited)
            audited = None
        try:
            fetched = self.call(
                "run", (kind, sql, settings, bounds, plan), canceller=canceller, progress=progress
            )
        except BaseException:
            if audited is not None:
                wait_audited(audited)
            raise
        if audited is not None:
            wait_audited(audited)
        fetched.build()  # a small result comes as its rows (see engine_child): built here
        return fetched

    def preview_statement(
        self,
        sql: str,
        plan: WritePlan,
        settings: RunSettings,
        *,
        canceller: Canceller,
        progress: Callable[[int], None] | None = None,
    ) -> Any:
        return self.call("preview", (sql, plan, settings), canceller=canceller, progress=progress)

    def estimate_statement(
        self,
        hook: Callable[[Any, str], Any],
        sql: str,
        settings: RunSettings,
        *,
        canceller: Canceller,
        progress: Any = None,
    ) -> Any:
        return self.call("estimate", (hook, sql, settings), canceller=canceller)

    def offload(
        self, fn: Callable[..., Any], *args: Any, canceller: Canceller, progress: Any = None
    ) -> Any:
        return self.call("offload", (fn, args), canceller=canceller)
