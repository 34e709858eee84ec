"""Cancel a running statement through its driver, from outside the worker thread.

An abort (or the statement timeout) must reach the database, not only the Python task: the
worker thread is blocked inside the driver, so only the driver's own cancel frees it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Literal

import sqlalchemy as sa

__all__ = ["CancelReason", "Canceller", "driver_cancel"]

CancelReason = Literal["abort", "timeout"]

# How often a cancel is repeated while the statement still runs: it covers the short window
# between "statement marked running" and "statement reached the server", where a cancel is
# a no-op for every driver.
_RETRY_S = 0.1
_MAX_TRIES = 50


def driver_cancel(engine: sa.Engine, backend: str, raw: Any) -> Callable[[], None]:
    """A thread-safe callable that cancels whatever ``raw`` (a pooled connection) runs now."""
    drv = raw.driver_connection
    if backend in ("sqlite", "duckdb"):
        return drv.interrupt
    if backend == "postgresql":
        cancel_safe = getattr(drv, "cancel_safe", None)  # psycopg >= 3.2; no blocking libpq call
        return cancel_safe if cancel_safe is not None else drv.cancel
    if backend == "mysql":
        thread_id = int(drv.thread_id())

        def kill_query() -> None:
            # KILL must come from another connection; the pool gives a fresh or idle one.
            with engine.connect() as conn:
                conn.exec_driver_sql(f"KILL QUERY {thread_id}")

        return kill_query
    raise ValueError(f"no driver cancel for {backend}")  # pragma: no cover


class Canceller:
    """Ties one statement's run to its driver cancel.

    The worker calls :meth:`started` / :meth:`stopped` around the driver calls; anyone may call
    :meth:`request` at any time, from any thread. A cancel is only ever sent while the
    statement runs, so it can never hit the backend's own rollback afterwards. Before
    :meth:`started` (queued, or still connecting) there is nothing to cancel at the driver:
    :meth:`request` then reports that the caller may stop waiting, and the worker, seeing the
    reason, runs nothing.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancel: Callable[[], None] | None = None
        self._running = False
        self._ever_started = False
        self._thread: threading.Thread | None = None
        self.reason: CancelReason | None = None

    def started(self, cancel: Callable[[], None]) -> None:
        """Mark the statement as running; a cancel requested earlier is sent now."""
        with self._lock:
            self._cancel = cancel
            self._running = True
            self._ever_started = True
            pending = self.reason is not None
        if pending:
            self._start_thread()

    def interrupt(self) -> None:
        """Cancel the running statement now, from the worker itself, without marking the
        run as cancelled (used to end a result early). May raise the driver's error."""
        with self._lock:
            cancel = self._cancel if self._running else None
        if cancel is not None:
            cancel()

    def stopped(self) -> None:
        """Mark the statement as finished (success or failure); no cancel is sent after this."""
        with self._lock:
            self._running = False

    def request(self, reason: CancelReason) -> bool:
        """Ask for a cancel (idempotent; the first reason wins). Never blocks.

        Returns:
            True when the statement has not started yet (still queued or connecting): no
            statement will run, so the caller need not wait for the worker.
        """
        with self._lock:
            if self.reason is None:
                self.reason = reason
            before_start = not self._ever_started
        self._start_thread()
        return before_start

    def _start_thread(self) -> None:
        with self._lock:
            if self._thread is not None or self._cancel is None:
                return
            self._thread = threading.Thread(target=self._loop, name="pi-db-cancel", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        for _ in range(_MAX_TRIES):
            with self._lock:
                if not self._running or self._cancel is None:
                    return
                cancel = self._cancel
                try:
                    cancel()
                except Exception:  # a failed cancel is retried; the timeout still bounds the run
                    pass
            threading.Event().wait(_RETRY_S)
