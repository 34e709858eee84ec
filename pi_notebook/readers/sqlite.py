"""SQLite files read as Arrow through ADBC, in a child process.

The ADBC SQLite driver reads a result straight into Arrow columns, about three times faster
than ``sqlite3`` and pandas. It cannot run in the kernel's process: it links its own copy of
SQLite, and two copies in one process break SQLite's POSIX file locks (closing one copy's
file releases the other's locks, so a writer can lose its lock mid-transaction; seen as "disk
I/O error" on the audit writer's connection). So it runs in one long-lived child process per
reader (:mod:`.sqlite_child`), which streams Arrow IPC back over a pipe.

What the child guarantees, whoever asks:

* **Read-only by URI.** The child opens the file with ``mode=ro`` (the pager refuses writes)
  and ``PRAGMA query_only`` on. It is started isolated (``python -I``) and imports nothing of
  this package.
* **Bounded.** The child streams at most ``row_cap + 1`` rows; its address space is capped,
  and it never sends a value larger than ``max_value_bytes``, so a statement that allocates
  without bound fails in the child, never in the kernel.
* **Stoppable.** A cancel kills the child (a fresh one starts on the next read).
* **Same values as ``sqlite3``.** The driver fixes each column's type from the first batch
  and converts what follows: a number in a text column would become text, a blob would be
  decoded. So the rows of a result with text or blob columns are checked for a value of
  another storage class by a second connection in the child, in a thread beside the read;
  ``PRAGMA data_version`` proves no write committed in between. A flagged result, and any
  other failure in the child, reads as ``None`` (the ``sqlite3`` path reads it). All-NULL
  columns and empty results come out as ``sqlite3`` gives them. The child's SQLite is the
  driver's own (newer than the kernel's), so ``sqlite_version()`` and the order of unordered
  results may differ.

Which statements may come here is the caller's business: the database backend vets each one
under its guarded ``sqlite3`` connection first (:mod:`pi_notebook.sql.backend.arrow_sqlite`);
the audit reads its own tables (:func:`shared_reader`).
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import threading
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from .batches import arrow_rows_within
from .protocol import QUERY_TEXT, ArrowRead, CancelHooks, ProgressSteps, Query, ReadLimits

try:
    import fcntl
except ImportError:  # Windows: no fcntl (the default pipe)
    fcntl = None

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

__all__ = ["ChildFailed", "SqliteReader", "shared_reader", "sqlite_file"]
_CHILD = Path(__file__).with_name("sqlite_child.py")
_MEMORY_BYTES = 6 << 30  # the child's address space (about 1.4 GiB of it is its libraries)
_MAX_DEATHS = 3
_SHARED_MAX = 4
_SHARED_VALUE_BYTES = 1 << 30  # the audit's own records: SQLite's default value limit
_shared: dict[str, SqliteReader] = {}
_shared_lock = threading.Lock()


def sqlite_file(url: URL) -> str | None:
    """The absolute path of the SQLite file the SQLAlchemy ``url`` names, or ``None`` for an
    in-memory or URI-named database (those keep the ``sqlite3`` path)."""
    database = url.database or ""
    if not database or database == ":memory:" or database.startswith("file:") or url.query:
        return None
    return os.path.abspath(database)


def shared_reader(path: str) -> SqliteReader:
    """A reader of ``path`` kept for the process (the audit's frames use it; a few files at
    most, the oldest is stopped first; all stop when the kernel exits)."""
    with _shared_lock:
        reader = _shared.pop(path, None)
        if reader is None:
            reader = SqliteReader(path, _SHARED_VALUE_BYTES)
            if len(_shared) >= _SHARED_MAX:
                oldest = next(iter(_shared))
                _shared.pop(oldest).close()
        _shared[path] = reader  # the most recently used last
        return reader


@atexit.register
def _close_shared() -> None:
    with _shared_lock:
        readers = list(_shared.values())
        _shared.clear()
    for reader in readers:
        reader.close()


class ChildFailed(Exception):
    """The child could not give this read (its text says why); take the ``sqlite3`` path."""


class SqliteReader:
    """Reads of one SQLite file through the ADBC child (see the module docstring); an
    :class:`~.protocol.ArrowReader`. Thread-safe: one read at a time.

    Args:
        path: the database file.
        max_value_bytes: the largest value the child may send.
    """

    def __init__(self, path: str, max_value_bytes: int) -> None:
        self.path = path
        self._max_value = max_value_bytes
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._deaths = 0  # the process ended unasked, in a row: at _MAX_DEATHS, stop trying

    @staticmethod
    def accepts(sql: str) -> bool:
        """Whether ``sql`` is a query text (``SELECT``, ``WITH``, ``VALUES``)."""
        return QUERY_TEXT.match(sql) is not None

    def read_arrow(
        self, query: Query, limits: ReadLimits, cancel: CancelHooks | None = None
    ) -> ArrowRead | None:
        """The rows of ``query`` through the child, or ``None`` when the ``sqlite3`` path must
        read them (an exact count, no file, no working process, a failure in the child, an
        empty result).

        Raises:
            ChildFailed: the read was cancelled (the child was killed); ``cancel.reason``
                says why.
        """
        if limits.count_rows or not os.path.isfile(self.path) or self._deaths >= _MAX_DEATHS:
            return None  # an exact count (sqlite3 counts), no file, or no working process
        limit = limits.read_limit
        try:
            table, sized_at = self._table(query, limits, cancel)
        except ChildFailed:
            if cancel is not None and cancel.reason is not None:
                raise
            return None
        if table.num_rows == 0:  # sqlite3 gives an empty result untyped (object) columns
            return None
        cap = limits.row_cap
        kept = _untyped_nulls(table if cap is None else table.slice(0, cap))
        if sized_at is not None:  # stopped at the size bound: more rows came than are kept
            return ArrowRead(kept, sized_at, False, True)
        return ArrowRead(kept, table.num_rows, limit is None or table.num_rows < limit)

    def table(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Every row of ``sql`` through the child as a ``pyarrow.Table``, as it sent them
        (no NULL column retyped, an empty result as it is).

        Raises:
            ChildFailed: the child refused or failed; its text says why.
        """
        return self._table(Query(sql, params), ReadLimits(), None)[0]

    def _table(
        self, query: Query, limits: ReadLimits, cancel: CancelHooks | None
    ) -> tuple[Any, int | None]:
        """The table of at most ``read_limit`` rows, keeping at most ``max_bytes`` of values
        (Arrow's ``nbytes``), and, when it stopped there, the rows received by then (the
        child is then stopped: a new one serves the next read)."""
        import pyarrow as pa

        max_bytes = limits.max_bytes
        with self._lock:
            proc = self._process()
            stdin, stdout = _pipes(proc)
            request = {
                "path": self.path,
                "sql": query.sql,
                "params": list(query.params),
                "limit": limits.read_limit,
            }
            if cancel is not None:
                cancel.started(lambda: _kill(proc))
            try:
                stdin.write(json.dumps(request).encode() + b"\n")
                stdin.flush()
                _expect_ok(stdout)
                reader = pa.ipc.open_stream(stdout)
                batches: list[Any] = []
                seen, sized = 0, False
                steps = ProgressSteps(limits.progress, limits.progress_every)
                for batch in reader:
                    if max_bytes is not None:
                        rows = arrow_rows_within(batch, max_bytes)
                        if rows < batch.num_rows:
                            batches.append(batch.slice(0, rows))
                            seen, sized = seen + batch.num_rows, True
                            break
                        max_bytes -= batch.nbytes
                    batches.append(batch)
                    seen += batch.num_rows
                    steps.update(seen)
                if sized:  # the rest of the stream is not wanted: stop the child now
                    self._stop()
                else:
                    _expect_ok(stdout)
                self._deaths = 0
                return pa.Table.from_batches(batches, schema=reader.schema), (
                    seen if sized else None
                )
            except ChildFailed:
                self._deaths = 0
                raise
            except Exception as exc:  # a broken pipe, a truncated stream: the child is gone
                self._stop()
                if cancel is None or cancel.reason is None:
                    self._deaths += 1
                raise ChildFailed(f"the reader process ended ({type(exc).__name__})") from exc
            finally:
                if cancel is not None:
                    cancel.stopped()

    def close(self) -> None:
        """Stop the child (a later read starts a new one); a read in progress ends at once."""
        proc = self._proc
        if proc is not None:
            _kill(proc)
        with self._lock:
            self._stop()

    def _process(self) -> subprocess.Popen[bytes]:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            return proc
        args = [sys.executable, "-I", str(_CHILD), str(self._max_value), str(_MEMORY_BYTES)]
        try:
            proc = subprocess.Popen(
                args,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                close_fds=True,
            )
        except OSError as exc:
            raise ChildFailed(f"the reader process could not start ({exc})") from exc
        _widen(proc)
        self._proc = proc
        weakref.finalize(self, _reap, proc)  # a reader dropped without close() stops it too
        return proc

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            _reap(proc)


def _untyped_nulls(table: Any) -> Any:
    """``table`` with every all-NULL column as Arrow's null type (pandas: ``None`` objects,
    as ``sqlite3`` gives them; the driver types such a column as integers)."""
    import pyarrow as pa

    for i, column in enumerate(table.columns):
        if column.null_count == len(column) and not pa.types.is_null(column.type):
            table = table.set_column(i, table.field(i).name, pa.nulls(len(column)))
    return table


_PIPE_BYTES = 1 << 20  # Linux's default limit for a pipe an unprivileged process resizes


def _widen(proc: subprocess.Popen[bytes]) -> None:
    """Give the child's stdout pipe 1 MiB where the system allows it (Linux), not 64 KiB.

    The child writes Arrow batches of megabytes; through a 64 KiB pipe the two processes take
    turns every 64 KiB, hundreds of wake-ups a large read: on two cores that put the kernel's
    1M-row read at up to 1.4x ADBC in-process, with 1 MiB at 1.0-1.15x (``bench/bench_db.py``).
    A system that refuses keeps the default pipe, which works the same, only slower."""
    resize = getattr(fcntl, "F_SETPIPE_SZ", None) if fcntl is not None else None
    if resize is None or proc.stdout is None:
        return
    try:
        fcntl.fcntl(proc.stdout.fileno(), resize, _PIPE_BYTES)  # pyright: ignore[reportOptionalMemberAccess]
    except OSError:
        pass


def _pipes(proc: subprocess.Popen[bytes]) -> tuple[IO[bytes], IO[bytes]]:
    if proc.stdin is None or proc.stdout is None:  # pragma: no cover - always piped
        raise ChildFailed("the reader process has no pipes")
    return proc.stdin, proc.stdout


def _reap(proc: subprocess.Popen[bytes]) -> None:
    _kill(proc)
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            pipe.close()
    proc.wait()


def _kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        proc.kill()
    except OSError:  # already gone
        pass


def _expect_ok(stdout: IO[bytes]) -> None:
    line = stdout.readline()
    if not line:
        raise EOFError("the reader process closed its output")
    if line.rstrip(b"\n") != b"OK":
        raise ChildFailed(line.decode("utf-8", "replace").strip())
