"""A call to an engine's worker process awaited on the event loop itself.

:meth:`.engine_process.EngineProcess.call` blocks a thread until the worker answers: the
kernel would hop to a worker thread and back for each statement, which costs more than the
process hop itself. :func:`call_on_loop` sends the call from the loop and waits for the
answer with ``loop.add_reader`` on the worker's socket: progress reports reach their
listener on the loop directly, and the loop is free while the statement runs.

The call lock of the process (one call at a time per worker) is held from the send to the
final answer, by the reader: a caller that stops waiting (its task cancelled) asks for a
cancel, and the answer is still read off the socket, so the next call never reads an old
answer. A cancel goes to the worker as a message; a worker that has not answered
:data:`~.engine_process.KILL_AFTER_S` later is killed (as in :meth:`EngineProcess.call`).
"""

from __future__ import annotations

import asyncio
import pickle
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, Protocol

from pi_notebook.sql.backend.cancel import Canceller
from pi_notebook.sql.backend.engine_wire import KILL_AFTER_S, receive_message
from pi_notebook.sql.backend.worker import Cancelled

__all__ = ["LoopHost", "call_on_loop"]


class LoopHost(Protocol):
    """What a call awaited on the loop needs of its worker process
    (:class:`~.engine_process.EngineProcess` is one): the call lock, the start, the send, the
    reply, the kill, and the slot of the call awaited on the loop now."""

    on_loop: Any

    def try_lock(self) -> bool: ...
    def unlock(self) -> None: ...
    def alive(self) -> bool: ...
    def start_locked(self) -> Connection: ...
    def send_locked(self, op: str, args: tuple[Any, ...]) -> tuple[int, Connection | None]: ...
    def died(self, canceller: Canceller, *, killed: bool) -> Any: ...
    def reply(self, message: tuple[Any, ...]) -> Any: ...
    def kill(self) -> None: ...


_FIRST_WAIT_S = 0.0005  # the first pause when another call holds the worker, doubling
_MOST_WAIT_S = 0.02
_START_CHECK_S = 0.05  # how often a call waiting for its worker's start looks for a cancel


async def call_on_loop(
    process: LoopHost,
    op: str,
    args: tuple[Any, ...],
    *,
    canceller: Canceller,
    progress: Callable[[int], None] | None = None,
    on_sent: Callable[[], None] | None = None,
) -> Any:
    """Run ``op`` in ``process``'s worker (starting it if needed, off the loop) and return
    its value. A cancel is asked for with ``canceller.request`` (Stop, the statement
    timeout), from any thread (one asked for while the worker starts ends the wait at once:
    the start goes on, and the lock is given back when it is over); ``on_sent`` is called once the call is sent (when the
    statement's own time starts: a worker's start is not counted).

    Raises:
        As :meth:`EngineProcess.call`.
    """
    loop = asyncio.get_running_loop()
    wait = _FIRST_WAIT_S
    while not process.try_lock():  # another call of this worker runs (another backend's)
        if canceller.reason is not None:
            raise Cancelled
        await asyncio.sleep(wait)
        wait = min(wait * 2, _MOST_WAIT_S)
    handed = False  # the lock handed to a start still running off the loop
    try:
        if not process.alive():  # starting a worker takes a second or more: off the loop
            starting = loop.run_in_executor(None, process.start_locked)
            try:
                while not starting.done():  # a cancel asked for meanwhile stops the wait
                    if canceller.reason is not None:
                        raise Cancelled
                    await asyncio.wait([starting], timeout=_START_CHECK_S)
                starting.result()  # the start's error (a worker that could not start)
            except (asyncio.CancelledError, Cancelled):  # the lock goes back after the start
                handed = True
                starting.add_done_callback(lambda done: _unlock_after(process, done))
                raise
        conn = process.start_locked()
        if canceller.reason is not None:
            raise Cancelled
        try:
            call, control = process.send_locked(op, args)
        except OSError:
            return process.died(canceller, killed=False)
    except BaseException:
        if not handed:
            process.unlock()
        raise
    pending = _Pending(process, loop, conn, control, call, canceller, progress)
    if on_sent is not None:
        on_sent()
    try:
        ok, value = await asyncio.shield(pending.future)
    except asyncio.CancelledError:
        canceller.request("abort")  # the answer is still read, and the lock given back
        raise
    if not ok:
        raise value
    return value


def _unlock_after(process: LoopHost, start: asyncio.Future[Any]) -> None:
    """A start nobody waits for any more is over: give the lock back (its error, if any,
    is the next call's to report: that call starts the worker again)."""
    process.unlock()
    if not start.cancelled():
        start.exception()  # retrieved: nobody is left to report it


class _Pending:
    """One sent call: reads its answers off the socket on the loop, sends its cancel, kills
    the worker that does not answer one, and gives the lock back with the final answer."""

    def __init__(
        self,
        process: LoopHost,
        loop: asyncio.AbstractEventLoop,
        conn: Connection,
        control: Connection | None,
        call: int,
        canceller: Canceller,
        progress: Callable[[int], None] | None,
    ) -> None:
        self.process, self.loop, self.conn, self.control = process, loop, conn, control
        self.call, self.canceller, self.progress = call, canceller, progress
        self.future: asyncio.Future[tuple[bool, Any]] = loop.create_future()
        self.fd = conn.fileno()
        self.sent = False
        self.killed = False
        self.done = False
        self.timer: asyncio.TimerHandle | None = None
        self.lock = threading.Lock()
        loop.add_reader(self.fd, self._readable)
        process.on_loop = self
        canceller.started(self.cancel)

    def _readable(self) -> None:
        try:  # the socket is readable: a whole message, or the worker's end (EOFError)
            message = receive_message(self.conn)
        except (EOFError, OSError):
            self._finish(None)
            return
        if message[0] == "progress":
            if self.progress is not None:
                try:
                    self.progress(message[1])
                except Exception:  # a broken progress listener must not break the query
                    pass
            return
        self._finish(message)

    def cancel(self) -> None:
        """Send the cancel (once; from the canceller's thread) and arm the kill."""
        with self.lock:
            if self.sent or self.control is None:
                return
            self.sent = True
        try:
            self.control.send_bytes(
                pickle.dumps(("cancel", self.call, self.canceller.reason or "abort"))
            )
        except OSError:
            pass
        try:
            self.loop.call_soon_threadsafe(self._arm)
        except RuntimeError:  # the loop is closed: nobody waits for this call
            pass

    def _arm(self) -> None:
        if not self.done:
            self.timer = self.loop.call_later(KILL_AFTER_S, self._kill)

    def _kill(self) -> None:
        if not self.done:
            self.killed = True
            self.process.kill()  # its socket closes: _readable finishes the call

    def _finish(self, message: tuple[Any, ...] | None) -> None:
        """The final answer (``None``: the channel closed), turned into a value or an
        error while the lock is still held, then the lock given back."""
        self.done = True
        self.process.on_loop = None
        self.loop.remove_reader(self.fd)
        if self.timer is not None:
            self.timer.cancel()
        self.canceller.stopped()
        try:
            if message is None:
                outcome: tuple[bool, Any] = (
                    True,
                    self.process.died(self.canceller, killed=self.killed),
                )
            else:
                outcome = (True, self.process.reply(message))
        except BaseException as exc:  # the call's error, raised by its caller
            outcome = (False, exc)
        finally:
            self.process.unlock()
        if not self.future.done():
            self.future.set_result(outcome)
