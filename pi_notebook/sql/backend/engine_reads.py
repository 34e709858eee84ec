"""DuckDB's reads awaited on the event loop: the statement is sent to the engine's worker
process and its answer read with ``loop.add_reader`` (:mod:`.engine_loop`), with no hop to
the backend's worker thread and back (which costs more than the process hop itself).

Under the same rules as the thread's calls (:class:`~.execution.Execution`): the statement
timeout counts from when the worker receives the statement (a worker's start is bounded by
the connect timeout), Stop and the timeout cancel it in the worker (killed if it does not
answer), progress reaches its listener on the loop, and the errors are the thread's. The
read's audit record is waited for on a thread while the statement runs, and before its
result (or error) is handed back: nothing of the read leaves before its record is committed.
Writes, previews and estimates keep the thread's path (a write waits for its record before
it is sent).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from sqlalchemy.engine import URL

from pi_notebook.ai.abort import AbortSignal
from pi_notebook.sql.backend.cancel import Canceller
from pi_notebook.sql.backend.derive import WritePlan
from pi_notebook.sql.backend.engine_process import EngineProcess
from pi_notebook.sql.backend.errors import MemoryLimitExceeded
from pi_notebook.sql.backend.execution import Execution
from pi_notebook.sql.backend.roles import RoleRefused
from pi_notebook.sql.backend.worker import (
    AuditBlocked,
    Bounds,
    DriftError,
    Fetched,
    RunSettings,
    wait_audited,
)

__all__ = ["LoopReads"]


class LoopReads(Execution):
    """The reads of one backend on its engine's worker process (see the module docstring).

    Args:
        process: the worker process of the backend's database.
        url: the database URL (errors name it without credentials).
        timeout_s: the statement timeout, counted from when the worker receives the read.
    """

    def __init__(self, process: EngineProcess, url: URL, timeout_s: float) -> None:
        super().__init__(url, timeout_s)
        self.process = process

    async def read(
        self,
        sql: str,
        settings: RunSettings,
        *,
        bounds: Bounds | None = None,
        plan: WritePlan | None = None,
        signal: AbortSignal | None = None,
        on_progress: Callable[[int], None] | None = None,
        audited: Callable[[], object] | None = None,
    ) -> Fetched:
        """Run the read ``sql`` in the worker (see :func:`.worker.run_statement`).

        Raises:
            QueryAborted: ``signal`` aborted (the task cancelled: ``CancelledError``).
            QueryTimeout: the statement timeout passed; the read was cancelled.
            QueryError: the worker could not start, or the engine's error, as safe text.
            DriftError, AuditBlocked, MemoryLimitExceeded: passed through.
        """
        loop = asyncio.get_running_loop()
        canceller = Canceller()
        if signal is not None and signal.aborted:
            canceller.request("abort")
        waiting = loop.run_in_executor(None, wait_audited, audited) if audited is not None else None
        timers: list[asyncio.TimerHandle] = []

        def arm_timeout() -> None:  # the statement's time starts here, not the worker's start
            timers.append(loop.call_later(self.timeout_s, canceller.request, "timeout"))

        def abort() -> None:
            canceller.request("abort")

        remove = signal.add_listener(abort) if signal is not None else None
        try:
            fetched: Fetched = await self.process.call_async(
                "run",
                ("read", sql, settings, bounds, plan),
                canceller=canceller,
                progress=on_progress,
                on_sent=arm_timeout,
            )
        except asyncio.CancelledError:
            raise
        except (DriftError, AuditBlocked, RoleRefused, MemoryLimitExceeded):
            if waiting is not None:
                await waiting
            raise
        except Exception as exc:
            if waiting is not None:
                await waiting
            raise self._error(exc, canceller, "Query") from None
        finally:
            for timer in timers:
                timer.cancel()
            if remove is not None:
                remove()
        if waiting is not None:
            await waiting
        fetched.build()  # a small result comes as its rows (see engine_child): built here
        return fetched
