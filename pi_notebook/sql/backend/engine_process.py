"""DuckDB and chDB in a worker process the session owns, under an OS memory cap.

An engine that runs in the kernel can take the kernel with it: a read that builds a huge value
per row (``hex()`` nested eight deep, ``concat(s, s, ...)``) allocates outside DuckDB's own
``memory_limit``. So DuckDB (and chDB: its worker runs :class:`~pi_notebook.sql.engines.chdb_worker.ChdbHost`,
``host``) runs in a child process (:mod:`.engine_child`) that caps its own
memory (``memory_limit_bytes``, default :func:`default_memory_limit`) before it opens the
database. The kernel sends it each statement and receives the result already within the row
cap and the size bound, as a built DataFrame (a small one as its rows, built here: they cost
a fraction of a pickled DataFrame to send and load); it never opens the database itself.

* A statement past the cap fails in the worker (DuckDB's ``OutOfMemoryException``, a
  ``MemoryError``) or kills it (the OS); either way the call ends with
  :class:`MemoryLimitExceeded`, naming the limit, and the worker is replaced on the next call.
  A write's transaction is rolled back (by the worker, or with the worker: DuckDB keeps only
  committed transactions). The kernel's variables never shared the worker's memory.
* Cancel (Stop, the statement timeout) goes to the worker as a message and reaches DuckDB's
  ``interrupt()`` there; a worker that has not answered :data:`KILL_AFTER_S` after a cancel
  is killed, so the statement timeout holds even for an engine call that ignores interrupts.
* A call either blocks a thread until the answer (:meth:`EngineProcess.call`: DuckDB's
  writes, previews and estimates, through the backend's worker thread) or is awaited on the
  event loop itself (:meth:`EngineProcess.call_async`, :mod:`.engine_loop`: chDB's calls and
  DuckDB's reads, see :mod:`.engine_reads`; no thread hop).
* The statement timeout counts from when the worker receives the statement; the worker's
  start is bounded by the engine's connect timeout (a worker that has not said it is ready
  by then is stopped, and the call says it did not start in time).
  Messages cross as :mod:`.engine_wire` sends them: large result buffers out of band.
* Every DuckDB file (chDB directory) is served by one worker per kernel (DuckDB lets one process at a time
  open a file for writing): backends on the same file share it, one call at a time. An
  in-memory database (``duckdb://``, ``duckdb:///:memory:``) lives in its backend's own
  worker, and is lost when that worker dies.
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import threading
import time
import weakref
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from sqlalchemy.engine import URL

from pi_notebook.sql.backend.cancel import Canceller
from pi_notebook.sql.backend.engine_calls import EngineCalls
from pi_notebook.sql.backend.engine_child import MEMORY_EXIT
from pi_notebook.sql.backend.engine_spawn import (
    close_quietly,
    default_memory_limit,
    spawn,
    stop_all,
)
from pi_notebook.sql.backend.engine_wire import KILL_AFTER_S, receive_message
from pi_notebook.sql.backend.errors import (
    ConnectFailed,
    MemoryLimitExceeded,
    QueryError,
    describe_error,
)
from pi_notebook.sql.backend.worker import (
    Cancelled,
    DriftError,
)

__all__ = [
    "KILL_AFTER_S",
    "MEMORY_LIMIT_OPTION",
    "EngineProcess",
    "MemoryLimitExceeded",
    "default_memory_limit",
    "in_memory",
]

"""Seconds a worker has to answer after a cancel before it is killed."""
MEMORY_LIMIT_OPTION = "memory_limit_bytes"
# How a worker ends when memory ran out: its own exit after an allocation failure, the OS's
# SIGKILL, or an engine that aborted or crashed on a failed allocation.
_MEMORY_DEATHS = frozenset(
    {MEMORY_EXIT, -signal.SIGKILL, -signal.SIGABRT, -signal.SIGSEGV, -signal.SIGBUS}
)


class EngineProcess(EngineCalls):
    """The worker process of one database (see the module docstring). Thread-safe: calls
    run one at a time.

    Args:
        url: the database URL (sent to the worker over its socket, never on a command line).
        memory_limit_bytes: the worker's data-segment cap (0: none).
        connect_timeout_s: the engine's connect timeout.
        statement_timeout_s: the engine's statement timeout.
        host: for an engine with its own client (chDB), the ``module:Class`` that runs its
            calls in the worker (see :mod:`.engine_child`); ``None``: a SQLAlchemy engine.
    """

    def __init__(
        self,
        url: URL,
        *,
        memory_limit_bytes: int,
        connect_timeout_s: float,
        statement_timeout_s: float,
        host: str | None = None,
    ) -> None:
        self.url = url
        self.memory_limit_bytes = memory_limit_bytes
        self._setup = {
            "url": url.render_as_string(hide_password=False),
            "memory_limit_bytes": memory_limit_bytes,
            "connect_timeout_s": connect_timeout_s,
            "statement_timeout_s": statement_timeout_s,
            "host": host,
        }
        self._cwd = os.getcwd()  # a relative path names the same file after a restart
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self._control: Connection | None = None  # cancels (see engine_child)
        self._calls = 0
        self.restarts = 0
        self.users = 0
        self._running: list[subprocess.Popen[bytes] | None] = [None]
        self.on_loop: Any = None
        """The call awaited on the event loop now, if any (see :mod:`.engine_loop`)."""
        weakref.finalize(self, stop_all, self._running)  # no worker outlives its owner

    def prestart(self) -> None:
        """Start the worker in the background, so the first statement does not wait for it
        (its imports take about a second); a failure is left to the first call to report.
        The worker opens the database only with the first statement."""

        def start() -> None:
            with self._lock:
                try:
                    self._ensure()
                except Exception:  # reported by the first call, which tries again
                    pass

        threading.Thread(target=start, name="pi-engine-start", daemon=True).start()

    # -- the channel ----------------------------------------------------------------------
    def call(
        self,
        op: str,
        args: tuple[Any, ...],
        *,
        canceller: Canceller,
        progress: Callable[[int], None] | None = None,
    ) -> Any:
        """Run ``op`` in the worker (starting it if needed) and return its value.

        Raises:
            Cancelled: the call was cancelled before it was sent, or the worker was killed
                after a cancel it did not answer (the caller reports the cancel's reason).
            MemoryLimitExceeded: the statement passed the memory cap (the worker is gone).
            DriftError, ConnectFailed: as :func:`.worker.run_statement`.
            QueryError: the worker could not start.
            Exception: the engine's error (its text).
        """
        with self._lock:
            return self._call_locked(op, args, canceller, progress)

    def _call_locked(
        self,
        op: str,
        args: tuple[Any, ...],
        canceller: Canceller,
        progress: Callable[[int], None] | None,
    ) -> Any:
        conn = self._ensure()
        if canceller.reason is not None:
            raise Cancelled
        try:
            call, control = self.send_locked(op, args)
        except OSError:
            return self._died(canceller, killed=False)
        sent: list[float] = []

        def cancel() -> None:
            if not sent and control is not None:
                sent.append(time.monotonic())
                try:
                    control.send_bytes(pickle.dumps(("cancel", call, canceller.reason or "abort")))
                except OSError:
                    pass

        canceller.started(cancel)
        try:
            return self._answer(conn, canceller, progress, sent)
        finally:
            canceller.stopped()

    # -- the pieces of a call awaited elsewhere (see :mod:`.engine_loop`) -------------------
    def try_lock(self) -> bool:
        """Take the call lock if it is free (the caller gives it back with :meth:`unlock`)."""
        return self._lock.acquire(blocking=False)

    def unlock(self) -> None:
        self._lock.release()

    def start_locked(self) -> Connection:
        """The worker's calls connection, starting the worker if needed (lock held)."""
        return self._ensure()

    def send_locked(self, op: str, args: tuple[Any, ...]) -> tuple[int, Connection | None]:
        """Send call ``op`` (lock held); its number and the cancels' connection.

        Raises:
            OSError: the worker's end is gone (then :meth:`died` tells why).
        """
        conn = self._conn
        if conn is None:
            raise OSError("no worker")
        self._calls += 1
        call = self._calls
        conn.send_bytes(pickle.dumps(("call", call, op, args), protocol=pickle.HIGHEST_PROTOCOL))
        return call, self._control

    def died(self, canceller: Canceller, *, killed: bool) -> Any:
        """The worker's channel closed during a call (lock held): raise why (see
        :meth:`call`), the worker forgotten and a new one started."""
        return self._died(canceller, killed=killed)

    def kill(self) -> None:
        """Kill the worker now (a cancel it did not answer in time)."""
        self._kill()

    def _answer(
        self,
        conn: Connection,
        canceller: Canceller,
        progress: Callable[[int], None] | None,
        sent: list[float],
    ) -> Any:
        while True:
            try:
                ready = conn.poll(0.25)
                message = receive_message(conn) if ready else None
            except (EOFError, OSError):
                return self._died(canceller, killed=False)
            if message is None:
                if sent and time.monotonic() - sent[0] > KILL_AFTER_S:
                    self._kill()
                    return self._died(canceller, killed=True)
                continue
            if message[0] == "progress":
                if progress is not None:
                    progress(message[1])
                continue
            return self.reply(message)

    def reply(self, message: tuple[Any, ...]) -> Any:
        """The value of the worker's final answer to a call, or its error raised."""
        tag = message[0]
        if tag == "ok":
            return message[1]
        if tag == "memory":
            self._reap()
            raise self._limit_error()
        if tag == "drift":
            raise DriftError(message[1], message[2])
        if tag == "connect":
            raise ConnectFailed(_WorkerError(message[1]))
        raise _WorkerError(message[1])

    async def call_async(
        self,
        op: str,
        args: tuple[Any, ...],
        *,
        canceller: Canceller,
        progress: Callable[[int], None] | None = None,
        on_sent: Callable[[], None] | None = None,
    ) -> Any:
        """:meth:`call`, its answer awaited on the running event loop (no thread between
        the kernel and the worker); see :func:`.engine_loop.call_on_loop`. Raises as
        :meth:`call`."""
        from pi_notebook.sql.backend.engine_loop import call_on_loop

        return await call_on_loop(
            self, op, args, canceller=canceller, progress=progress, on_sent=on_sent
        )

    def _died(self, canceller: Canceller, *, killed: bool) -> Any:
        proc = self._proc
        status = None
        if proc is not None and not killed:
            try:
                status = proc.wait(timeout=5)
            except subprocess.TimeoutExpired:  # its channel broke, yet it runs: end it
                proc.kill()
        self._reap()
        if killed or canceller.reason is not None:
            raise Cancelled
        if status is not None and status not in _MEMORY_DEATHS:
            raise QueryError(
                f"The {self.url.get_backend_name()} worker process ended "
                f"unexpectedly (exit status {status}); nothing was written. It "
                f"is restarted on the next call."
            )
        raise self._limit_error()

    def _limit_error(self) -> MemoryLimitExceeded:
        lost = " The in-memory database was lost with it." if in_memory(self.url) else ""
        return MemoryLimitExceeded.of(
            self.memory_limit_bytes, f" Its worker process was restarted.{lost}"
        )

    # -- the process ------------------------------------------------------------------------
    def alive(self) -> bool:
        """Whether a worker runs and answers calls now (no start to wait for)."""
        return self._conn is not None and self._proc is not None and self._proc.poll() is None

    def _ensure(self) -> Connection:
        if self.alive():
            assert self._conn is not None
            return self._conn
        if self._proc is not None:
            self._reap()
        proc, conn, control, hello = spawn(self._setup, self._cwd)
        if hello[0] == "late":
            raise QueryError(
                f"The {self.url.get_backend_name()} worker process did not start within "
                f"{self._setup['connect_timeout_s']:g} s (the connect timeout); the machine "
                f"may be busy. It is started again on the next call; to wait longer, raise "
                f"the connect timeout (connect_timeout_s)."
            )
        if hello[0] != "ready":
            detail = describe_error(_WorkerError(hello[1] or "no answer"), self.url)
            raise QueryError(
                f"The {self.url.get_backend_name()} worker process could not start. {detail}"
            )
        self._proc, self._conn, self._control, self._running[0] = proc, conn, control, proc
        return conn

    def _kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGKILL)

    def _reap(self) -> None:
        """Forget the worker (killing it if it still runs) and start a new one in the
        background, so the next statement does not wait for it."""
        proc, conn, self._proc, self._conn = self._proc, self._conn, None, None
        control, self._control = self._control, None
        close_quietly(conn)
        close_quietly(control)
        if proc is not None:
            stop_all([proc])
            self.restarts += 1
            self.prestart()

    @property
    def pid(self) -> int | None:
        """The worker's process id, while one runs."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def release_pool(self) -> None:
        """Close the engine's pooled connections in the worker, which keeps running (another
        backend still uses it; its next call reconnects)."""
        if not self._lock.acquire(timeout=KILL_AFTER_S):
            return  # another backend's call runs: the pool stays open, as for that backend
        try:
            if self._conn is not None and self.pid is not None:
                self._call_locked("release", (), Canceller(), None)
        except Exception:  # a worker that cannot release is stopped instead
            self._lock.release()
            self.close()
            return
        self._lock.release()

    def close(self) -> None:
        """Stop the worker (the next call starts a new one). A call in flight gets
        :data:`KILL_AFTER_S` to end; then the worker is stopped under it (a call awaited on
        the event loop sees its worker die and ends with an error)."""
        locked = self._lock.acquire(timeout=KILL_AFTER_S)
        if not locked and self.on_loop is not None:
            self.on_loop.killed = True
            self._kill()  # its reader, on the loop, sees the channel close and cleans up
            return
        try:
            proc, conn, self._proc, self._conn = self._proc, self._conn, None, None
            control, self._control = self._control, None
        finally:
            if locked:
                self._lock.release()
        close_quietly(conn)  # the worker sees its end close and exits
        close_quietly(control)
        if proc is not None:
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                stop_all([proc])


class _WorkerError(Exception):
    """An error the worker reported, as its text (turned into safe text by the backend)."""


def in_memory(url: URL) -> bool:
    """Whether ``url`` names an in-memory database (lost with its worker)."""
    return url.database in (None, "", ":memory:")
