"""The Arrow path for large SQLite reads: ADBC, in a child process.

The ADBC SQLite driver reads a result straight into Arrow columns, about three times faster
than ``sqlite3`` and pandas. It cannot run in the kernel's process: it links its own copy of
SQLite, and two copies in one process break SQLite's POSIX file locks (closing one copy's
file releases the other's locks, so a writer can lose its lock mid-transaction). So it runs in
one long-lived child process per backend (:mod:`.sqlite_child`), which streams Arrow IPC back
over a pipe; the kernel turns it into the DataFrame.

Security review (what changes against the ``sqlite3`` path, and why it holds):

* **Only vetted reads.** A statement comes here only when the classifier called it a pure
  read, its text is a query (``SELECT``/``WITH``/``VALUES``), the read is capped, and the
  kernel's own guarded connection compiled it first (``EXPLAIN``) inside the usual read-only
  transaction, with the authorizer in read mode: ATTACH, pragmas that write, secret tables
  and the functions that must never run are refused at compile time there, exactly as on the
  ``sqlite3`` path. Whatever fails that check takes the ``sqlite3`` path, which reports the
  failure in its own words.
* **Read-only by URI.** The child opens the file with ``mode=ro`` (the pager refuses writes)
  and ``PRAGMA query_only`` on. It is started isolated (``python -I``) and imports nothing of
  this package.
* **Bounded.** The child streams at most ``row_cap + 1`` rows; its address space is capped,
  and it never sends a value larger than the kernel's SQLite value limit, so a statement that
  allocates without bound fails in the child (and then on the ``sqlite3`` path, with its
  limit), never in the kernel.
* **Stoppable.** Abort and the statement timeout kill the child (a fresh one starts on the
  next read); the kernel waits for nothing.
* **Same values.** The driver fixes each column's type from the first batch and converts
  what follows: a number in a text column would become text, a blob would be decoded. So the
  rows of a result with text or blob columns are checked for a value of another storage
  class (:mod:`.sqlite_child`), by a second connection in the child, in a thread beside the
  read; ``PRAGMA data_version`` proves no write committed in between, so both saw the same
  rows. A flagged result takes the ``sqlite3`` path, as does any other failure in the child
  (an integer column that meets text, a write during the read, the file gone). All-NULL columns and empty results come out as ``sqlite3`` gives them, and the
  DataFrame is converted by the same rules as PostgreSQL's Arrow reads
  (:func:`.arrow.to_frame`). ``tests/db/test_db_sqlite_arrow.py`` runs the whole SQLite read
  corpus both ways. The child's SQLite is the driver's own (newer than the kernel's), so
  ``sqlite_version()`` and the order of unordered results may differ.

Without pyarrow or ``adbc-driver-sqlite``, and for in-memory or URI-named databases, every
read takes the ``sqlite3`` path.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from sqlalchemy.engine import URL

from pi_notebook.sql.backend.cancel import Canceller
from pi_notebook.sql.backend.fetch import (
    CURSOR_TEXT,
    Fetched,
    ProgressSteps,
    RunSettings,
    read_limit,
)
from pi_notebook.sql.backend.sizes import arrow_rows_within

try:
    import fcntl
except ImportError:  # Windows: no fcntl (the default pipe)
    fcntl = None

__all__ = ["ChildFailed", "SqliteArrow", "compiles_as_read", "shared_reader", "sqlite_file"]
_CHILD = Path(__file__).with_name("sqlite_child.py")
_MEMORY_BYTES = 6 << 30  # the child's address space (about 1.4 GiB of it is its libraries)
_MAX_DEATHS = 3
_SHARED_MAX = 4
_SHARED_VALUE_BYTES = 1 << 30  # the audit's own records: SQLite's default value limit
_shared: dict[str, SqliteArrow] = {}
_shared_lock = threading.Lock()


def compiles_as_read(raw: Any, sql: str) -> bool:
    """Whether ``sql`` compiles on ``raw``, a pooled ``sqlite3`` connection inside a read
    transaction (its authorizer in read mode, see :mod:`.readonly`): ``EXPLAIN`` compiles the
    statement, and with it asks the authorizer about every table, function and pragma, without
    running it. Any failure means no."""
    cur = raw.cursor()
    try:
        cur.execute("EXPLAIN " + sql)
        cur.fetchall()
    except Exception:
        return False
    finally:
        cur.close()
    return True


def sqlite_file(url: URL) -> str | None:
    """The absolute path of the SQLite file ``url`` names, or ``None`` for an in-memory or
    URI-named database (those keep the ``sqlite3`` path)."""
    database = url.database or ""
    if not database or database == ":memory:" or database.startswith("file:") or url.query:
        return None
    return os.path.abspath(database)


def shared_reader(path: str) -> SqliteArrow:
    """A reader of ``path`` kept for the process (the audit's frames use it; a few files at
    most, the oldest is stopped first; all stop when the kernel exits)."""
    with _shared_lock:
        reader = _shared.pop(path, None)
        if reader is None:
            reader = SqliteArrow(path, _SHARED_VALUE_BYTES)
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


class SqliteArrow:
    """Large reads of one SQLite file through the ADBC child (see the module docstring).

    Args:
        path: the database file.
        max_value_bytes: the largest value the child may send (the kernel's SQLite limit).
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
        return CURSOR_TEXT.match(sql) is not None

    def read(
        self,
        sql: str,
        settings: RunSettings,
        canceller: Canceller,
        progress: Callable[[int], None] | None,
    ) -> Fetched | None:
        """The capped read ``sql`` (already vetted, see the module docstring) as Arrow, or
        ``None`` when it must take the ``sqlite3`` path.

        Raises:
            Exception: the read was cancelled (the child was killed); ``canceller.reason``
                says why.
        """
        from pi_notebook.sql.backend.arrow import fetched_from_table, to_frame

        limit = read_limit(settings)
        if limit is None or not os.path.isfile(self.path) or self._deaths >= _MAX_DEATHS:
            return None  # an exact count (sqlite3 counts), no file, or no working process
        try:
            table, sized_at = self._table(
                sql,
                limit=limit,
                canceller=canceller,
                progress=progress,
                progress_every=settings.progress_every,
                max_bytes=settings.max_result_bytes,
            )
        except ChildFailed:
            if canceller.reason is not None:
                raise
            return None
        if table.num_rows == 0:  # sqlite3 gives an empty result untyped (object) columns
            return None
        kept = _untyped_nulls(table.slice(0, settings.row_cap))
        frame = to_frame(kept)
        if frame is None:
            return None
        if sized_at is not None:  # stopped at the size bound: more rows came than are kept
            return fetched_from_table(kept, frame, sized_at, False, size_capped=True)
        return fetched_from_table(kept, frame, table.num_rows, table.num_rows < limit)

    def table(self, sql: str, params: list[Any] | None = None, **options: Any) -> Any:
        """Run ``sql`` in the child and return its rows as a ``pyarrow.Table`` (``options``:
        ``limit``, ``canceller``, ``progress``, ``progress_every``, as :meth:`_table`).

        Raises:
            ChildFailed: the child refused or failed (or was killed by ``canceller``).
        """
        return self._table(sql, params, **options)[0]

    def _table(
        self,
        sql: str,
        params: list[Any] | None = None,
        *,
        limit: int | None = None,
        canceller: Canceller | None = None,
        progress: Callable[[int], None] | None = None,
        progress_every: int = 10_000,
        max_bytes: int | None = None,
    ) -> tuple[Any, int | None]:
        """``table``, keeping at most ``max_bytes`` of values (Arrow's ``nbytes``): the table,
        and, when it stopped there, the rows received by then (the child is then stopped: a
        new one serves the next read)."""
        import pyarrow as pa

        with self._lock:
            proc = self._process()
            stdin, stdout = _pipes(proc)
            request = {"path": self.path, "sql": sql, "params": params or [], "limit": limit}
            if canceller is not None:
                canceller.started(lambda: _kill(proc))
            try:
                stdin.write(json.dumps(request).encode() + b"\n")
                stdin.flush()
                _expect_ok(stdout)
                reader = pa.ipc.open_stream(stdout)
                batches: list[Any] = []
                seen, steps, sized = 0, ProgressSteps(progress, progress_every), False
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
                if canceller is None or canceller.reason is None:
                    self._deaths += 1
                raise ChildFailed(f"the reader process ended ({type(exc).__name__})") from exc
            finally:
                if canceller is not None:
                    canceller.stopped()

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
