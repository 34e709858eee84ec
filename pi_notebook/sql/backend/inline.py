"""Short SQLite reads on the caller's thread, without the hop to the worker thread.

Handing a statement to the worker thread and its result back takes two cross-thread wake-ups.
On a 2-core VM that is about 100 µs: several times a whole ``SELECT 1``. SQLite runs inside
the process, so a short read can run where the call is made, on the event loop, as long as it
stays short. SQLite calls a progress handler every ``STEP`` virtual-machine instructions; the
handler stops the statement once it has run for ``BUDGET_S``. The read then goes to the worker
like any other (it changed nothing, so running it again is safe), and its text is remembered,
so later runs of it go to the worker at once.

What keeps this path as safe as the worker's:

- its own pooled connection, with the same authorizer and the same ``query_only`` read mode
  (``readonly.begin``), used under a lock that is never waited for: a second caller meanwhile
  takes the worker;
- ``busy_timeout`` 0 on that connection: a file a writer has locked fails at once, and the read
  takes the worker, whose connection waits for the lock; nothing sleeps on the loop;
- any failure at all (the statement's own error included) hands the read to the worker, which
  runs it again and reports it as every read is reported;
- the connection never goes back to the pool (``close`` invalidates it): its ``busy_timeout``
  is not the pool's.

Only reads of a SQLite file come here (an in-memory database has a single connection, which
is the worker's), and never one that takes the Arrow path.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from pi_notebook.sql.backend.fetch import Fetched, RunSettings, execute_and_fetch
from pi_notebook.sql.backend.readonly import begin, finish, sqlite_control
from pi_notebook.sql.backend.results import render_fetched

__all__ = ["BUDGET_S", "STEP", "InlineReads"]

BUDGET_S = 0.001
"""Longest a read runs on the event loop before it is stopped and handed to the worker."""

STEP = 1000
"""SQLite virtual-machine instructions between two checks of the budget (a few µs)."""

_SLOW_KEPT = 512


class InlineReads:
    """Runs short reads of one SQLite file on the calling thread (see the module docstring).

    Args:
        engine: the backend's engine (its connections carry the authorizer).
        budget_s: how long a read may run here before it goes to the worker.
    """

    def __init__(self, engine: sa.Engine, *, budget_s: float = BUDGET_S) -> None:
        self._engine = engine
        self.budget_s = budget_s
        self._lock = threading.Lock()
        self._raw: Any = None
        # Hashes of the texts that ran past the budget (a collision only sends a short read
        # to the worker); a bounded number, whatever the statements' length.
        self._slow: OrderedDict[int, None] = OrderedDict()
        self.stopped = 0
        """Reads stopped at the budget so far (they went to the worker)."""

    def read(
        self, sql: str, settings: RunSettings, progress: Callable[[int], None] | None
    ) -> Fetched | None:
        """Run the read ``sql`` here, with its DataFrame and preview built; ``None`` when it
        must go to the worker instead (this path is busy, the read is too long, the file is
        locked, or anything failed). Never raises."""
        if hash(sql) in self._slow or not self._lock.acquire(blocking=False):
            return None
        try:
            return self._read(sql, settings, progress)
        finally:
            self._lock.release()

    def close(self) -> None:
        """Close this path's connection (a later read opens a new one)."""
        with self._lock:
            raw, self._raw = self._raw, None
        if raw is not None:
            raw.invalidate()

    def _read(
        self, sql: str, settings: RunSettings, progress: Callable[[int], None] | None
    ) -> Fetched | None:
        raw = self._connection()
        if raw is None:
            return None
        driver = raw.driver_connection
        deadline = time.perf_counter() + self.budget_s
        over = False

        def check() -> int:
            nonlocal over
            over = over or time.perf_counter() > deadline
            return 1 if over else 0  # non-zero: SQLite stops the statement (SQLITE_INTERRUPT)

        driver.set_progress_handler(check, STEP)
        try:
            begin(raw, "sqlite", "read", timeout_s=settings.statement_timeout_s, mariadb=False)
            try:
                fetched = execute_and_fetch(raw, "sqlite", "read", sql, settings, progress)
            finally:
                finish(raw, "sqlite", "read", commit=False)
        except Exception:
            if over:
                self.stopped += 1
                self._remember_slow(sql)
            if driver.in_transaction:  # never keep a connection in an unknown state
                self._drop()
            return None
        finally:
            driver.set_progress_handler(None, 0)
        try:
            fetched.build()
            fetched.preview = render_fetched(fetched)
        except Exception:  # the worker builds it again and reports what fails there
            return None
        return fetched

    def _connection(self) -> Any:
        if self._raw is None:
            pool = self._engine.pool
            if isinstance(pool, sa.QueuePool) and pool.checkedout() >= pool.size():
                return None  # a checkout might wait for a connection: never on the loop
            try:
                raw = self._engine.raw_connection()
            except Exception:  # the worker connects, bounded by the timeouts, and reports
                return None
            try:
                sqlite_control(raw, "PRAGMA busy_timeout = 0")
            except Exception:
                raw.invalidate()
                return None
            self._raw = raw
        return self._raw

    def _drop(self) -> None:
        raw, self._raw = self._raw, None
        if raw is not None:
            raw.invalidate()

    def _remember_slow(self, sql: str) -> None:
        self._slow[hash(sql)] = None
        if len(self._slow) > _SLOW_KEPT:
            self._slow.popitem(last=False)
