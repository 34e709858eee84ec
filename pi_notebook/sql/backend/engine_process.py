"""DuckDB in a worker process the session owns, under an OS memory cap.

An engine that runs in the kernel can take the kernel with it: a read that builds a huge value
per row (``hex()`` nested eight deep, ``concat(s, s, ...)``) allocates outside DuckDB's own
``memory_limit``. So DuckDB runs in a child process (:mod:`.engine_child`) that caps its own
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
* Every DuckDB file is served by one worker per kernel (DuckDB lets one process at a time
  open a file for writing): backends on the same file share it, one call at a time. An
  in-memory database (``duckdb://``, ``duckdb:///:memory:``) lives in its backend's own
  worker, and is lost when that worker dies.
"""

from __future__ import annotations

import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from sqlalchemy.engine import URL

from pi_notebook.sql.backend.cancel import Canceller
from pi_notebook.sql.backend.derive import WritePlan
from pi_notebook.sql.backend.engine_child import MEMORY_EXIT
from pi_notebook.sql.backend.engines import DUCKDB_MEMORY_ENV
from pi_notebook.sql.backend.errors import (
    ConnectFailed,
    MemoryLimitExceeded,
    QueryError,
    describe_error,
)
from pi_notebook.sql.backend.worker import (
    Bounds,
    Cancelled,
    DriftError,
    Fetched,
    RunSettings,
    wait_audited,
)

__all__ = [
    "KILL_AFTER_S",
    "MEMORY_LIMIT_OPTION",
    "EngineProcess",
    "MemoryLimitExceeded",
    "default_memory_limit",
    "release_process",
    "shared_process",
]

KILL_AFTER_S = 2.0
"""Seconds a worker has to answer after a cancel before it is killed."""
MEMORY_LIMIT_OPTION = "memory_limit_bytes"
_GIB = 1 << 30
# How a worker ends when memory ran out: its own exit after an allocation failure, the OS's
# SIGKILL, or an engine that aborted or crashed on a failed allocation.
_MEMORY_DEATHS = frozenset(
    {MEMORY_EXIT, -signal.SIGKILL, -signal.SIGABRT, -signal.SIGSEGV, -signal.SIGBUS}
)
_START_S = 60.0  # most seconds a fresh worker may take to import its engine and say ready
_DUCKDB_SHARE = 0.6  # DuckDB's own memory_limit, as a share of the process cap


def default_memory_limit() -> int:
    """The default ``memory_limit_bytes``: half the machine's physical memory, at most 4 GiB."""
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not a POSIX system
        return 4 * _GIB
    return min(4 * _GIB, physical // 2)


class EngineProcess:
    """The worker process of one database (see the module docstring). Thread-safe: calls
    run one at a time.

    Args:
        url: the database URL (sent to the worker over its socket, never on a command line).
        memory_limit_bytes: the worker's data-segment cap (0: none).
        connect_timeout_s: the engine's connect timeout.
        statement_timeout_s: the engine's statement timeout.
    """

    def __init__(
        self,
        url: URL,
        *,
        memory_limit_bytes: int,
        connect_timeout_s: float,
        statement_timeout_s: float,
    ) -> None:
        self.url = url
        self.memory_limit_bytes = memory_limit_bytes
        self._setup = {
            "url": url.render_as_string(hide_password=False),
            "memory_limit_bytes": memory_limit_bytes,
            "connect_timeout_s": connect_timeout_s,
            "statement_timeout_s": statement_timeout_s,
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
        weakref.finalize(self, _stop, self._running)  # no worker outlives its owner

    # -- the calls a backend makes (each the shape Execution.call runs) ------------------
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
            conn = self._ensure()
            if canceller.reason is not None:
                raise Cancelled
            self._calls += 1
            call, control = self._calls, self._control
            data = pickle.dumps(("call", call, op, args), protocol=pickle.HIGHEST_PROTOCOL)
            try:
                conn.send_bytes(data)
            except OSError:
                return self._died(canceller, killed=False)
            sent: list[float] = []

            def cancel() -> None:
                if not sent and control is not None:
                    sent.append(time.monotonic())
                    try:
                        control.send_bytes(
                            pickle.dumps(("cancel", call, canceller.reason or "abort"))
                        )
                    except OSError:
                        pass

            canceller.started(cancel)
            try:
                return self._answer(conn, canceller, progress, sent)
            finally:
                canceller.stopped()

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
                message = pickle.loads(conn.recv_bytes()) if ready else None
            except (EOFError, OSError):
                return self._died(canceller, killed=False)
            if message is None:
                if sent and time.monotonic() - sent[0] > KILL_AFTER_S:
                    self._kill()
                    return self._died(canceller, killed=True)
                continue
            tag = message[0]
            if tag == "progress":
                if progress is not None:
                    progress(message[1])
                continue
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
        lost = " The in-memory database was lost with it." if _in_memory(self.url) else ""
        return MemoryLimitExceeded.of(
            self.memory_limit_bytes, f" Its worker process was restarted.{lost}"
        )

    # -- the process ------------------------------------------------------------------------
    def _ensure(self) -> Connection:
        if self._conn is not None and self._proc is not None and self._proc.poll() is None:
            return self._conn
        if self._proc is not None:
            self._reap()
        ours, theirs = socket.socketpair()
        ours_control, theirs_control = socket.socketpair()
        env = dict(os.environ)
        # The kernel's own import path: a function offloaded to the worker is imported there.
        paths = [str(Path(__file__).resolve().parents[3]), *(p for p in sys.path if p)]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        if DUCKDB_MEMORY_ENV not in env and self.memory_limit_bytes > 0:
            share = int(self.memory_limit_bytes * _DUCKDB_SHARE) >> 20
            env[DUCKDB_MEMORY_ENV] = f"{max(share, 64)}MB"
        try:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "pi_notebook.sql.backend.engine_child",
                    str(theirs.fileno()),
                    str(theirs_control.fileno()),
                ],
                pass_fds=(theirs.fileno(), theirs_control.fileno()),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
                cwd=self._cwd,
            )
        except BaseException:
            ours.close()
            ours_control.close()
            raise
        finally:
            theirs.close()
            theirs_control.close()
        conn, control = Connection(ours.detach()), Connection(ours_control.detach())
        try:
            conn.send_bytes(pickle.dumps(self._setup))
            hello = pickle.loads(conn.recv_bytes()) if conn.poll(_START_S) else ("fatal", "")
        except (EOFError, OSError):
            hello = ("fatal", "")
        if hello[0] != "ready":
            proc.kill()
            proc.wait()
            conn.close()
            control.close()
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
        _close(conn)
        _close(control)
        if proc is not None:
            _stop([proc])
            self.restarts += 1
            self.prestart()

    @property
    def pid(self) -> int | None:
        """The worker's process id, while one runs."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def release(self) -> None:
        """Close the worker's connections (a backend's ``dispose``): the worker stops when
        no other backend shares it, else it closes its pool and keeps running."""
        if self.users <= 1:
            self.close()
            return
        with self._lock:
            running = self._conn is not None and self.pid is not None
        if running:
            try:
                self.call("release", (), canceller=Canceller())
            except Exception:  # a worker that cannot release is stopped instead
                self.close()

    def close(self) -> None:
        """Stop the worker (the next call starts a new one)."""
        with self._lock:
            proc, conn, self._proc, self._conn = self._proc, self._conn, None, None
            control, self._control = self._control, None
        _close(conn)  # the worker sees its end close and exits
        _close(control)
        if proc is not None:
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                _stop([proc])


class _WorkerError(Exception):
    """An error the worker reported, as its text (turned into safe text by the backend)."""


def _close(conn: Connection | None) -> None:
    if conn is not None:
        try:
            conn.close()
        except OSError:  # already closed (at interpreter exit)
            pass


def _stop(procs: list[subprocess.Popen[bytes] | None]) -> None:
    for proc in procs:
        if proc is not None and proc.poll() is None:
            proc.kill()
        if proc is not None:
            proc.wait()


def _in_memory(url: URL) -> bool:
    return url.database in (None, "", ":memory:")


_SHARED: dict[str, EngineProcess] = {}
_SHARED_LOCK = threading.Lock()


def shared_process(url: URL, **options: Any) -> EngineProcess:
    """The worker of the database at ``url`` for this kernel: one per DuckDB file (a second
    backend on the same file shares the first one's worker and its memory limit); a new one
    for an in-memory database. Give it back with :func:`release_process`."""
    if _in_memory(url):
        process = EngineProcess(url, **options)
        process.users = 1
        return process
    key = url.render_as_string(hide_password=False)
    with _SHARED_LOCK:
        process = _SHARED.get(key)
        if process is None:
            process = _SHARED[key] = EngineProcess(url, **options)
        process.users += 1
    return process


def release_process(process: EngineProcess) -> None:
    """One backend is done with ``process``; the last one stops it."""
    with _SHARED_LOCK:
        process.users -= 1
        if process.users > 0:
            return
        for key, value in list(_SHARED.items()):
            if value is process:
                del _SHARED[key]
    process.close()
