"""One long-lived worker thread per backend, and the await side of a blocking database call.

:meth:`Execution.call` hands a blocking function (see :mod:`.worker`) to the backend's worker
thread and awaits its result on the event loop, which stays free meanwhile (the DataFrame is
built in the worker too). Per call it costs one loop future and, with a signal, one listener;
the statement timeouts of a loop's calls share one loop timer, armed for the earliest
deadline and left armed when a call ends early (arming and cancelling a timer per call cost
a fifth of the whole hand-off). The thread lives across calls (it exits after a minute idle
and comes back on the next call).

Stopping:

* the statement timeout and the signal's abort cancel at the driver (:mod:`.cancel`);
* a call still queued or still connecting has nothing to cancel at the driver (a server that
  accepts TCP and never answers holds ``connect()`` until the connect timeout): the call
  returns at once with the error, the stuck thread is left to give up on its own, and a fresh
  thread takes the next calls. The stuck job runs nothing once it connects;
* a cancelled task cancels the statement and waits until it ended, so a statement never
  keeps running behind the caller's back.
"""

from __future__ import annotations

import asyncio
import math
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Literal

from sqlalchemy.engine import URL

from pi_notebook.ai.abort import AbortSignal
from pi_notebook.secrets import safe_url
from pi_notebook.sql.backend.cancel import Canceller, CancelReason
from pi_notebook.sql.backend.errors import (
    ConnectFailed,
    MemoryLimitExceeded,
    QueryAborted,
    QueryError,
    QueryTimeout,
    describe_error,
)
from pi_notebook.sql.backend.roles import RoleRefused
from pi_notebook.sql.backend.worker import AuditBlocked, DriftError

__all__ = ["RAISE_TIMEOUT", "Execution"]

RAISE_TIMEOUT = (
    "To allow longer statements, raise the statement timeout: "
    "`%config PiNotebook.statement_timeout = 120` in a notebook, "
    "`database_extension(statement_timeout_s=120)` in code."
)
"""What a timed-out call's error says to do about it."""

_IDLE_EXIT_S = 60.0
What = Literal["Query", "Preview"]


class _Job:
    __slots__ = (
        "args",
        "canceller",
        "deadline",
        "finished",
        "fn",
        "future",
        "kwargs",
        "loop",
        "started_at",
        "waiter",
    )

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        loop: asyncio.AbstractEventLoop,
        canceller: Canceller,
        deadline: float,
    ) -> None:
        self.fn, self.args, self.kwargs, self.loop = fn, args, kwargs, loop
        self.canceller = canceller
        self.deadline = deadline  # loop time; math.inf once the timeout was handled
        self.future: asyncio.Future[Any] = loop.create_future()
        self.started_at: float | None = None
        self.finished = False
        self.waiter: asyncio.Future[None] | None = None


class _Watchdog:
    """The pending calls of one loop and the one timer that checks their deadlines."""

    __slots__ = ("handle", "jobs", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.jobs: set[_Job] = set()
        self.handle: asyncio.TimerHandle | None = None


class _Abandoned(Exception):
    """The call stopped waiting before its statement started (queued or connecting)."""

    def __init__(self, reason: CancelReason, connecting: bool) -> None:
        super().__init__(reason)
        self.reason, self.connecting = reason, connecting


class Execution:
    """The worker thread of one backend (see the module docstring).

    Args:
        url: the database URL (errors name it without credentials).
        timeout_s: the statement timeout, counted from when the worker starts the job.
        memory_limit_bytes: the engine's memory limit in this process (SQLite's heap), which
            an engine's ``MemoryError`` is reported against.
        from_sent: count the statement timeout from when the job marks its statement as
            running (``canceller.started``: an engine's worker process received it) rather
            than from when the thread starts the job; the time before (a worker process
            starting, under its own bound) is not the statement's.
    """

    def __init__(
        self,
        url: URL,
        timeout_s: float,
        *,
        name: str = "pi-db-worker",
        memory_limit_bytes: int = 0,
        from_sent: bool = False,
    ) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self.from_sent = from_sent
        self.memory_limit_bytes = memory_limit_bytes
        self._name = name
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._watchdogs: dict[asyncio.AbstractEventLoop, _Watchdog] = {}

    async def call(
        self,
        fn: Callable[..., Any],
        *args: Any,
        signal: AbortSignal | None = None,
        on_progress: Callable[[int], None] | None = None,
        what: What = "Query",
        **kwargs: Any,
    ) -> Any:
        """Run ``fn(*args, canceller=..., progress=..., **kwargs)`` in the worker thread.

        Raises:
            QueryAborted: the signal aborted (or the task was cancelled: then CancelledError).
            QueryTimeout: the statement timeout passed; the statement was cancelled.
            QueryError: connecting failed, or the driver's error, as short safe text.
            DriftError: passed through from the worker (rolled back).
            AuditBlocked: passed through from the worker (nothing ran, or nothing returned).
            RoleRefused: passed through from the worker (the person's role cannot be used).
        """
        loop = asyncio.get_running_loop()
        canceller = _SentCanceller() if self.from_sent else Canceller()
        progress = _threadsafe(loop, on_progress) if on_progress is not None else None
        kwargs["canceller"], kwargs["progress"] = canceller, progress
        job = _Job(fn, args, kwargs, loop, canceller, loop.time() + self.timeout_s)
        watch = self._watch(job)
        remove = signal.add_listener(lambda: self._abort(job)) if signal else None
        self._put(job)  # last: the loop is free (awaiting) by the time the worker wants the GIL
        try:
            return await job.future
        except asyncio.CancelledError:
            if not self._stop(job, "abort") and not job.finished:
                job.waiter = loop.create_future()
                await asyncio.wait([job.waiter])  # never leave the statement running behind us
            raise
        except _Abandoned as exc:
            raise self._abandoned(exc, what) from None
        except (DriftError, AuditBlocked, RoleRefused, MemoryLimitExceeded):
            raise
        except Exception as exc:
            raise self._error(exc, canceller, what) from None
        finally:
            watch.jobs.discard(job)  # the timer stays armed (see the module docstring)
            if remove is not None:
                remove()

    def close(self) -> None:
        """Let the worker thread exit after the calls already queued (a later call starts a
        fresh thread)."""
        with self._lock:
            old, self._queue = self._queue, queue.SimpleQueue()
            self._thread = None
            old.put(None)  # the stop marker

    # -- loop side ---------------------------------------------------------------------
    def _watch(self, job: _Job) -> _Watchdog:
        """Put ``job`` under its loop's watchdog, arming its timer when none is armed as
        early as the job's deadline."""
        watch = self._watchdogs.get(job.loop)
        if watch is None:
            for old in [loop for loop in self._watchdogs if loop.is_closed()]:
                del self._watchdogs[old]
            watch = self._watchdogs[job.loop] = _Watchdog(job.loop)
        watch.jobs.add(job)
        handle = watch.handle
        if handle is None or handle.when() > job.deadline:  # later only if timeout_s shrank
            if handle is not None:
                handle.cancel()
            watch.handle = job.loop.call_at(job.deadline, self._on_watchdog, watch)
        return watch

    def _on_watchdog(self, watch: _Watchdog) -> None:
        """Time out the jobs past their deadline; re-arm for the earliest one left."""
        watch.handle = None
        now = watch.loop.time()
        earliest = math.inf
        for job in list(watch.jobs):
            if job.deadline <= now + 0.001:
                self._on_deadline(job)
            earliest = min(earliest, job.deadline)
        if earliest < math.inf:
            watch.handle = watch.loop.call_at(earliest, self._on_watchdog, watch)

    def _on_deadline(self, job: _Job) -> None:
        job.deadline = math.inf
        if job.finished:
            return
        started = job.started_at
        if isinstance(job.canceller, _SentCanceller) and started is not None:
            started = job.canceller.sent_at
            if started is None:  # the statement is not sent yet: its time has not begun
                job.deadline = job.loop.time() + self.timeout_s
                return
        if started is not None:
            left = started + self.timeout_s - time.monotonic()
            if left > 0.001:  # it waited in the queue first: its own time starts later
                job.deadline = job.loop.time() + left
                return
        self._stop(job, "timeout")

    def _abort(self, job: _Job) -> None:
        self._stop(job, "abort")

    def _stop(self, job: _Job, reason: CancelReason) -> bool:
        """Cancel ``job``; True when the caller was released at once (nothing had started)."""
        if job.finished:
            return False
        if not job.canceller.request(reason):
            return False
        connecting = job.started_at is not None
        if not job.future.done():
            job.future.set_exception(_Abandoned(reason, connecting))
        if connecting:
            self._replace_thread()
        return True

    def _abandoned(self, exc: _Abandoned, what: What) -> QueryError:
        if exc.reason == "abort":
            where = "while connecting" if exc.connecting else "before it started"
            return QueryAborted(f"{what} cancelled {where}: the run was aborted; nothing was run.")
        return QueryTimeout(
            f"Could not connect to {safe_url(self.url)}: no answer within the statement "
            f"timeout ({self.timeout_s:g} s)."
            if exc.connecting
            else f"{what} cancelled: it waited longer than the statement timeout "
            f"({self.timeout_s:g} s); nothing was run. {RAISE_TIMEOUT}"
        )

    def _error(self, exc: Exception, canceller: Canceller, what: What) -> QueryError:
        if canceller.reason == "abort":
            return QueryAborted(f"{what} cancelled: the run was aborted; nothing was written.")
        if canceller.reason == "timeout":
            return QueryTimeout(
                f"{what} cancelled: it ran longer than the statement timeout "
                f"({self.timeout_s:g} s); nothing was written. {RAISE_TIMEOUT}"
            )
        if isinstance(exc, ConnectFailed):
            return QueryError(describe_error(exc.cause, self.url, connecting=True))
        if isinstance(exc, MemoryError) and self.memory_limit_bytes:  # the engine's own limit
            return MemoryLimitExceeded.of(self.memory_limit_bytes)
        return QueryError(describe_error(exc, self.url))

    # -- thread side ---------------------------------------------------------------------
    def _put(self, job: _Job) -> None:
        with self._lock:
            self._queue.put(job)
            if self._thread is None:
                self._start_locked()

    def _start_locked(self) -> None:
        thread = threading.Thread(
            target=self._serve, args=(self._queue,), name=self._name, daemon=True
        )
        self._thread = thread
        thread.start()

    def _replace_thread(self) -> None:
        """The current thread is stuck in a connect: give its queue to a fresh thread."""
        with self._lock:
            stuck, self._queue = self._queue, queue.SimpleQueue()
            while True:
                try:
                    self._queue.put(stuck.get_nowait())
                except queue.Empty:
                    break
            self._start_locked()

    def _serve(self, own: queue.SimpleQueue[_Job | None]) -> None:
        while True:
            try:
                job = own.get(timeout=_IDLE_EXIT_S)
            except queue.Empty:
                with self._lock:
                    if self._queue is not own:
                        return
                    if own.empty():
                        self._thread = None
                        return
                continue
            if job is None:  # the stop marker
                return
            ok, value = self._run(job)
            with self._lock:
                replaced = self._queue is not own  # replaced while this thread was stuck
            # The hand-back comes last: the loop wakes to take the GIL, which this thread
            # then gives up at once, in ``get`` (or on exit).
            try:
                job.loop.call_soon_threadsafe(_settle, job, ok, value)
            except RuntimeError:  # the loop is closed: nobody waits for this result
                pass
            del job, value
            if replaced:
                return

    @staticmethod
    def _run(job: _Job) -> tuple[bool, Any]:
        job.started_at = time.monotonic()
        if job.canceller.reason is not None:
            return False, _Abandoned(job.canceller.reason, False)
        try:
            return True, job.fn(*job.args, **job.kwargs)
        except BaseException as exc:
            return False, exc


class _SentCanceller(Canceller):
    """A canceller that remembers when its statement was first marked running."""

    def __init__(self) -> None:
        super().__init__()
        self.sent_at: float | None = None

    def started(self, cancel: Callable[[], None]) -> None:
        if self.sent_at is None:
            self.sent_at = time.monotonic()
        super().started(cancel)


def _settle(job: _Job, ok: bool, value: Any) -> None:
    job.finished = True
    if not job.future.done():
        if ok:
            job.future.set_result(value)
        else:
            job.future.set_exception(value)
    if job.waiter is not None and not job.waiter.done():
        job.waiter.set_result(None)


def _threadsafe(
    loop: asyncio.AbstractEventLoop, on_progress: Callable[[int], None]
) -> Callable[[int], None]:
    def progress(n: int) -> None:  # runs in the worker thread
        loop.call_soon_threadsafe(_report, on_progress, n)

    return progress


def _report(on_progress: Callable[[int], None], n: int) -> None:
    try:
        on_progress(n)
    except Exception:  # a broken progress listener must not break the query
        pass
