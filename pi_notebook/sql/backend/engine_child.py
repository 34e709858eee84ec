"""The worker process that owns a DuckDB or chDB database for the kernel (see
:mod:`.engine_process`).

Run as ``python -m pi_notebook.sql.backend.engine_child FD CONTROL_FD``, never imported by the
kernel for its work (the kernel imports it only to name :func:`current_engine` in a pickle).
``FD`` is one end of the calls' socket pair; the first message on it is the setup (URL,
timeouts, memory cap, and for an engine with its own client, ``host``: the ``module:Class``
that runs the calls ``("direct", args)``, e.g. :class:`~pi_notebook.sql.engines.chdb_worker.ChdbHost`,
imported here before the cap); ``CONTROL_FD`` is one end of the cancels' socket pair. Once
its libraries are imported, and *before* it opens the database, the process caps its own data
segment (``RLIMIT_DATA``: heap and private mappings, what an engine allocates) at what it uses
then plus ``memory_limit_bytes``: the statements get that much, the interpreter's own baseline
(about 250 MiB) aside. A statement that allocates without bound fails here, with DuckDB's
``OutOfMemoryException``, a ``MemoryError``, ClickHouse's ``CANNOT_ALLOCATE_MEMORY`` or
``MEMORY_LIMIT_EXCEEDED``, or at worst this process's death, never in the
kernel. ``RLIMIT_AS`` would count the address space DuckDB reserves without using it and fail
at connect.

Messages (pickled, one at a time each way):

* kernel to worker, on the calls' socket: ``("call", n, op, args)`` (``n`` counts the calls);
  on the cancels' socket: ``("cancel", n, reason)`` (call ``n``'s statement is interrupted
  through the same :class:`~.cancel.Canceller` the kernel uses, also when the cancel is read
  before the call; a cancel of an earlier call is dropped);
* worker to kernel, on the calls' socket: ``("ready",)`` once, then per call any ``("progress", n)`` and one of
  ``("ok", value)``, ``("drift", actual, why)``, ``("connect", text)``, ``("memory", text)``,
  ``("error", text)``. A result is :class:`~.fetch.Fetched`, already within the row cap and
  the size bound the worker applied: with its DataFrame built, or, for a small result (see
  :func:`.worker.run_statement`'s ``build_small``), as its rows, which the kernel builds.

The main thread reads each call and runs it, one at a time, with no hand-off to another
thread (a wake-up of a second thread per call cost more than the hop itself); a second thread
only reads the cancels' socket, so a cancel is seen while a statement runs, and the kernel's
end closing ends this process at once.
"""

from __future__ import annotations

import importlib
import os
import pickle
import resource
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any

__all__ = [
    "MEMORY_ERRORS",
    "MEMORY_EXIT",
    "MEMORY_TEXTS",
    "current_engine",
    "is_memory_error",
    "main",
]

MEMORY_ERRORS = ("OutOfMemoryException", "MemoryError")
"""Exception type names that mean the statement ran out of the memory it may use."""
MEMORY_TEXTS = (
    "bad_alloc",
    "bad allocation",
    "(CANNOT_ALLOCATE_MEMORY)",
    "(MEMORY_LIMIT_EXCEEDED)",
)
"""Error texts that mean the same (C++'s, ClickHouse's allocator and memory tracker)."""

MEMORY_EXIT = 3
"""The exit status of a worker that ran out of memory (it is not trusted further)."""

_ENGINE: Any = None


def current_engine() -> Any:
    """This worker's SQLAlchemy engine (what the kernel's placeholder engine unpickles to)."""
    if _ENGINE is None:
        raise RuntimeError("no engine in this process")
    return _ENGINE


def is_memory_error(exc: BaseException) -> bool:
    """Whether ``exc`` (or the driver error it wraps) is an allocation failure."""
    seen: BaseException | None = exc
    for _ in range(4):
        if seen is None:
            return False
        text = str(seen)
        if type(seen).__name__ in MEMORY_ERRORS or any(t in text for t in MEMORY_TEXTS):
            return True
        seen = getattr(seen, "orig", None) or seen.__cause__
    return False


class _Host:
    def __init__(self, conn: Connection, setup: dict[str, Any]) -> None:
        global _ENGINE
        from sqlalchemy.engine import make_url

        from pi_notebook.sql.backend.worker import ConnectionSlot

        self.conn = conn
        self.url = make_url(setup["url"])
        self.slot = ConnectionSlot()
        self.direct: Any = None
        self.engine: Any = None
        if setup.get("host"):  # an engine with its own client: its host runs the calls
            module, name = str(setup["host"]).split(":")
            self.direct = getattr(importlib.import_module(module), name)(self.url, setup)
            self.backend = self.url.get_backend_name()
        else:
            from pi_notebook.sql.backend import engine_child
            from pi_notebook.sql.backend.engines import create_backend_engine, supported_backend

            self.backend = supported_backend(self.url)
            _ENGINE = self.engine = create_backend_engine(
                self.url,
                connect_timeout_s=setup["connect_timeout_s"],
                statement_timeout_s=setup["statement_timeout_s"],
            )
            # Run as ``-m``, this module is ``__main__``; a pickle names it by its own name.
            engine_child._ENGINE = self.engine
        self.canceller: Any = None
        self.call = 0  # the number of the call that runs or ran last
        self.early: tuple[int, Any] | None = None  # a cancel read before its call
        self.lock = threading.Lock()

    def send(self, message: tuple[Any, ...]) -> None:
        from pi_notebook.sql.backend.engine_wire import send_message

        send_message(self.conn, message)

    def watch(self, control: Connection) -> None:
        """The second thread: cancels go to the call they name."""
        while True:
            try:
                message = pickle.loads(control.recv_bytes())
            except (EOFError, OSError):
                os._exit(0)  # the kernel is gone: so is everything this process held
            except Exception:  # not a cancel this worker can read
                continue
            if message[0] != "cancel":
                continue
            _, call, reason = message
            with self.lock:
                canceller = self.canceller if call == self.call else None
                if call > self.call:
                    self.early = (call, reason)
            if canceller is not None:
                canceller.request(reason)

    def serve(self) -> None:
        """The main thread: reads the calls and runs them, one at a time."""
        from pi_notebook.sql.backend.cancel import Canceller

        while True:
            try:
                data = self.conn.recv_bytes()
            except (EOFError, OSError):
                os._exit(0)  # the kernel is gone: so is everything this process held
            call = self.call + 1
            try:
                _, call, op, args = pickle.loads(data)
            except Exception as exc:  # a call that cannot be read is answered as failed
                op, args = "fail", (exc,)
            canceller = Canceller()
            with self.lock:
                self.canceller, self.call = canceller, call
                early, self.early = self.early, None
            if early is not None and early[0] == call:
                canceller.request(early[1])
            try:
                reply = self.run(op, args, canceller)
            except BaseException as exc:  # every failure is a reply; the kernel decides
                reply = self.failure(exc)
            finally:
                with self.lock:
                    self.canceller = None
            try:
                self.send(reply)
            except (OSError, EOFError):
                os._exit(0)
            except Exception as exc:  # a value that cannot be sent (MemoryError included)
                reply = self.failure(exc)
                self.send(
                    reply
                    if reply[0] == "memory"
                    else ("error", f"the result could not be sent back: {exc}")
                )
            if reply[0] == "memory":
                os._exit(MEMORY_EXIT)  # a process that ran out of memory is not trusted further

    def run(self, op: str, args: tuple[Any, ...], canceller: Any) -> tuple[Any, ...]:
        def progress(n: int) -> None:
            self.send(("progress", n))

        if op == "direct":
            return ("ok", self.direct.call(args, canceller, progress))
        if op == "release" and self.direct is not None:
            self.direct.release()
            return ("ok", None)
        return ("ok", self.run_engine(op, args, canceller, progress))

    def run_engine(self, op: str, args: tuple[Any, ...], canceller: Any, progress: Any) -> Any:
        """A call on the SQLAlchemy engine (DuckDB), or ``offload``."""
        from pi_notebook.sql.backend.errors import describe_error
        from pi_notebook.sql.backend.worker import (
            estimate_statement,
            preview_statement,
            run_statement,
        )

        engine, backend, slot = self.engine, self.backend, self.slot
        if op == "run":
            kind, sql, settings, bounds, plan = args
            # A small result crosses as its rows, which the kernel builds into its DataFrame:
            # a pickled DataFrame costs several times more to send and to load.
            value: Any = run_statement(
                engine,
                backend,
                kind,
                sql,
                settings,
                canceller=canceller,
                progress=progress,
                bounds=bounds,
                plan=plan,
                slot=slot,
                build_small=False,
            )
        elif op == "preview":
            sql, plan, settings = args
            value = preview_statement(
                engine,
                backend,
                sql,
                plan,
                settings,
                canceller=canceller,
                describe=lambda exc: describe_error(exc, self.url),
                progress=progress,
                slot=slot,
            )
        elif op == "estimate":
            hook, sql, settings = args
            value = estimate_statement(
                engine, backend, hook, sql, settings, canceller=canceller, slot=slot
            )
        elif op == "offload":
            fn, fn_args = args
            value = fn(*fn_args)
        elif op == "fail":
            raise args[0]
        elif op == "release":
            slot.release()
            engine.dispose()
            value = None
        else:
            raise ValueError(f"unknown call {op!r}")
        return value

    def failure(self, exc: BaseException) -> tuple[Any, ...]:
        from sqlalchemy.exc import DBAPIError

        from pi_notebook.sql.backend.errors import ConnectFailed
        from pi_notebook.sql.backend.worker import DriftError

        if is_memory_error(exc):
            return ("memory", type(exc).__name__)
        if isinstance(exc, DriftError):
            return ("drift", exc.actual, exc.why)
        if isinstance(exc, ConnectFailed):
            return ("connect", str(exc.cause) or type(exc.cause).__name__)
        orig: BaseException = exc
        if isinstance(exc, DBAPIError) and exc.orig is not None:
            orig = exc.orig
        return ("error", str(orig) or type(orig).__name__)


def _data_segment() -> int:
    """Bytes of this process's data segment now (``VmData``, what ``RLIMIT_DATA`` counts)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    return 0


def main() -> None:
    conn, control = Connection(int(sys.argv[1])), Connection(int(sys.argv[2]))
    setup = pickle.loads(conn.recv_bytes())
    try:
        host = _Host(conn, setup)  # imports the engine's libraries; opens no connection
        try:
            import pyarrow  # noqa: F401 - the Arrow path's library, before the cap too
        except ImportError:
            pass
        memory = int(setup["memory_limit_bytes"])
        if memory > 0:
            cap = _data_segment() + memory
            resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))
    except BaseException as exc:
        conn.send_bytes(pickle.dumps(("fatal", f"{type(exc).__name__}: {exc}")))
        raise SystemExit(2) from None
    threading.Thread(
        target=host.watch, args=(control,), name="pi-engine-cancels", daemon=True
    ).start()
    host.send(("ready",))
    host.serve()


if __name__ == "__main__":
    main()
