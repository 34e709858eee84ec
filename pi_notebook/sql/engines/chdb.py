"""ClickHouse through chDB (``chdb:///PATH``, embedded, in a worker process the session owns).

The URL follows SQLite's: ``chdb:///data/ch`` is the directory ``data/ch`` (relative),
``chdb:////srv/ch`` an absolute one; the directory is created on first use; ``chdb://``
alone is an in-memory database.

chDB runs in a worker process (:mod:`pi_notebook.sql.backend.engine_process`, the one DuckDB
runs in; its chDB side is :mod:`.chdb_worker`), never in the kernel, which does not even
import it: the worker caps its own memory at ``memory_limit_bytes`` (``RLIMIT_DATA``; default
half the machine's memory, at most 4 GiB) and reads run with ``max_memory_usage`` at 60 % of
it. A statement past either limit ends with :class:`~pi_notebook.sql.backend.errors.
MemoryLimitExceeded` naming the limit and how to raise it; the worker is replaced (an
in-memory database is lost with it); the kernel's memory and variables are untouched. Each
directory has one worker per kernel (backends on it share it), so two chDB databases on
different paths run side by side (chDB itself holds one database per process).

The policy path is the backend's own (:class:`~pi_notebook.sql.backend.DatabaseBackend`'s
``run``: classify, capability, audit first); what differs is how a statement runs:

* a read runs in a reused read-only session, opened with ``readonly=1``,
  ``max_execution_time`` (the statement timeout), ``max_memory_usage`` and
  ``max_result_rows`` (``break``) as its own settings: verified on chDB 26, no statement in
  it can write, change a setting (``SET``, ``SETTINGS``, nested or not), or call a table
  function that reaches a file, URL, server or program (they need a temporary table), and
  stacked statements are all read-only too. After the statement comes
  ``SETTINGS readonly = 1`` (the same value, so allowed): only statements that take a
  SETTINGS clause parse (``SYSTEM`` and ``USE``, which readonly alone lets run, do not);
* rows come as chDB's native DataFrame stream, block by block: kept to the row cap and the
  byte bound, the stream stops there. (ClickHouse's Arrow output gives ``DateTime`` as a
  bare ``UInt32``; the native DataFrame keeps timestamps as timestamps, and is faster here.)
  A ``SELECT`` of no table (at most one row) runs as one query: a stream would read the same
  row, at more cost;
* every statement carries a marker comment; Stop and the statement timeout cancel it with
  ``KILL QUERY`` from a second session in the worker (a chDB session's own query cannot be
  interrupted from another thread); a worker that has not answered a cancel two seconds
  later is killed, as a last resort (an in-memory database is lost with it);
* an approved write runs without ``readonly`` (mutations synchronously:
  ``mutations_sync=2``). Stopped, or ended by the memory limit, it is not undone: ClickHouse
  has no transactions, so the blocks an INSERT had written and the parts a mutation had
  rewritten stay (the mutation's unfinished rest is killed), and the error says so. Nor can
  a write be tried and rolled back: the preview counts rows with the derived
  ``SELECT count()`` (and the bounds of an approval are checked with it before the write
  runs) or says plainly that they cannot be counted.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from sqlalchemy.engine import URL

from pi_notebook.ai.abort import AbortSignal
from pi_notebook.readers.pandas_internals import column_arrays, frame_of_arrays
from pi_notebook.sql.backend.cancel import Canceller
from pi_notebook.sql.backend.engine_process import EngineProcess
from pi_notebook.sql.backend.engine_shares import shared_process
from pi_notebook.sql.backend.engine_spawn import default_memory_limit
from pi_notebook.sql.backend.errors import MemoryLimitExceeded
from pi_notebook.sql.backend.execution import Execution, What
from pi_notebook.sql.backend.fetch import Fetched, RunSettings
from pi_notebook.sql.backend.frames import column_labels
from pi_notebook.sql.backend.worker import AuditBlocked, DriftError, wait_audited
from pi_notebook.sql.engines.base import EngineInfo
from pi_notebook.sql.engines.clickhouse_common import (
    NO_ROLLBACK,
    ClickHouseBackend,
    ClickHouseCatalog,
    clickhouse_plan,
)

__all__ = [
    "CHDB_MEMORY_ENV",
    "CHDB_MEMORY_LIMIT",
    "CHDB_MEMORY_SHARE",
    "ENGINE",
    "WORKER_HOST",
    "ChdbBackend",
    "PackedResult",
    "WorkerCalls",
    "chdb_path",
    "clickhouse_plan",
    "read_memory_limit",
]

ENGINE = EngineInfo(
    engine="clickhouse",
    dialect="clickhouse",
    url_scheme="chdb:///PATH (chdb:// in memory)",
    schemes=("chdb",),
    read_only_backstop="a read-only session (readonly=1 set when it opens: no SET or SETTINGS "
    "can lift it; file/URL/remote/executable table functions refused)",
    bounds="a stream stopped at the cap + 1 and the byte bound; the session's "
    "max_execution_time, max_memory_usage (60 % of memory_limit_bytes) and max_result_rows; "
    "a worker process capped at memory_limit_bytes (RLIMIT_DATA)",
    cancel="KILL QUERY from a second session in the worker (and KILL MUTATION for a stopped "
    "ALTER ... UPDATE/DELETE); the worker killed if it does not stop; no rollback: what a "
    "write had done stays",
    write_preview="no transaction to roll back: rows counted with the derived SELECT count(), "
    "else not measured (said so)",
    estimate="EXPLAIN ESTIMATE (rows of MergeTree tables) x the tables' bytes per row",
    arrow=False,
    read_path="chDB's native DataFrame stream in the worker (its Arrow output turns DateTime "
    "into UInt32), sent to the kernel as column arrays",
    extra="clickhouse",
    modules=("chdb",),
    # Runs under the OS cap, but the classifier's memory rules still ask: ClickHouse's
    # aggregate-state and size rules stay, as for a ClickHouse server.
    memory_capped=False,
)

CHDB_MEMORY_SHARE = 0.6
"""``max_memory_usage`` of a read, as a share of the worker's ``memory_limit_bytes``."""
CHDB_MEMORY_LIMIT = 1 << 30
"""``max_memory_usage`` of a read without a worker cap (``memory_limit_bytes=0``)."""
CHDB_MEMORY_ENV = "PI_NOTEBOOK_CHDB_MEMORY_LIMIT"
"""Overrides ``max_memory_usage`` of a read, in bytes."""
WORKER_HOST = "pi_notebook.sql.engines.chdb_worker:ChdbHost"
"""What runs chDB's calls in the worker process."""


def read_memory_limit(memory_limit_bytes: int) -> int:
    """``max_memory_usage`` of a read in a worker capped at ``memory_limit_bytes``."""
    own = os.environ.get(CHDB_MEMORY_ENV)
    if own:
        return int(own)
    return int(memory_limit_bytes * CHDB_MEMORY_SHARE) if memory_limit_bytes else CHDB_MEMORY_LIMIT


def chdb_path(url: URL) -> str:
    """The connection path of a ``chdb://`` URL (``:memory:`` without a path).

    Raises:
        ValueError: a path chDB would misread (options after ``?``).
    """
    database = url.database
    if not database or database == ":memory:":
        return ":memory:"
    if "?" in database or url.query:
        raise ValueError("chdb URL: options are not accepted, only a path")
    return str(Path(database).expanduser())


class ChdbBackend(ClickHouseBackend):
    """``query_database``'s backend for chDB (see the module docstring); the policy path
    (``run``: classify, capability, audit) is :class:`DatabaseBackend`'s, the statement path
    :class:`DirectBackend`'s, run in the worker process (:class:`~.chdb_worker.ChdbLocal`).

    Options as :class:`DirectBackend`'s, and ``memory_limit_bytes``: the worker's memory cap
    (default :func:`~pi_notebook.sql.backend.engine_spawn.default_memory_limit`)."""

    backend = "chdb"

    def __init__(
        self, url: str | URL, *, memory_limit_bytes: int | None = None, **options: Any
    ) -> None:
        super().__init__(url, **options)
        chdb_path(self.url)  # a URL chDB would misread is refused before a worker starts
        self.memory_limit_bytes = (
            memory_limit_bytes if memory_limit_bytes is not None else default_memory_limit()
        )
        self.memory_limit = read_memory_limit(self.memory_limit_bytes)
        """``max_memory_usage`` of its reads (see :func:`read_memory_limit`)."""
        self._process = shared_process(
            self.url,
            memory_limit_bytes=self.memory_limit_bytes,
            connect_timeout_s=self.connect_timeout_s,
            statement_timeout_s=self.settings.statement_timeout_s,
            host=WORKER_HOST,
        )
        self._threads = self._execution  # offload's thread (the schema read)
        self._execution = WorkerCalls(self._process, self.url, self.settings)
        self.schema_source = ClickHouseCatalog(self._catalog_read, self.url)
        if self._process.pid is None:
            self._process.prestart()

    def dispose(self) -> None:
        """Close its sessions in the worker; the worker stops when no other backend on the
        same database uses it (a later call starts a new one)."""
        self._threads.close()
        self._give_back_share()

    async def offload(
        self, fn: Callable[..., Any], *args: Any, signal: AbortSignal | None = None
    ) -> Any:
        """Run a blocking, side-effect-free ``fn(*args)`` (a schema read, whose queries go to
        the worker) on the backend's thread, bounded by the statement timeout and ``signal``."""

        def job(*, canceller: Any = None, progress: Any = None) -> Any:
            return fn(*args)

        return await self._threads.call(job, signal=signal)

    def _catalog_read(self, sql: str) -> pd.DataFrame:
        """A catalog query, read-only in the worker (blocking)."""
        assert self._process is not None
        return self._process.call(
            "direct", ("_read_frame", self.settings, (sql,)), canceller=Canceller()
        )

    def _read_frame(self, sql: str, canceller: Any) -> pd.DataFrame:
        raise NotImplementedError("chDB's statements run in its worker process")


@dataclass
class PackedResult:
    """A statement's :class:`Fetched` as it crosses from the worker: its DataFrame as its
    column names and arrays (NumPy, or pandas' own for a string or nullable column), which
    cost a fraction of a pickled DataFrame to send and to load; :meth:`unpack` builds the
    DataFrame in the kernel, with the same dtypes."""

    fetched: Fetched
    names: tuple[str, ...]
    arrays: list[Any]

    @classmethod
    def pack(cls, fetched: Fetched) -> Fetched | PackedResult:
        frame = fetched.frame
        if frame is None:
            return fetched
        fetched.frame = None
        # NumPy arrays, or pandas' own (ExtensionArray) for a string or nullable column:
        # the arrays of its columns, without a Series each.
        arrays = column_arrays(frame)
        return cls(fetched, tuple(str(c) for c in frame.columns), arrays)

    def unpack(self) -> Fetched:
        rows = len(self.arrays[0]) if self.arrays else 0
        self.fetched.frame = frame_of_arrays(self.arrays, column_labels(self.names), rows)
        return self.fetched


class WorkerCalls(Execution):
    """:class:`DirectBackend`'s calls (``_statement``, ``_measure``, ``_estimate``) sent
    to the chDB worker and awaited on the event loop (see
    :mod:`pi_notebook.sql.backend.engine_loop`), under the statement timeout and Stop; the
    errors are the worker thread's (:class:`Execution`), a write's memory error says what
    stays. A read's audit record is waited for on a thread while the statement runs, and
    before its answer is handed back."""

    def __init__(self, process: EngineProcess, url: URL, settings: RunSettings) -> None:
        super().__init__(url, settings.statement_timeout_s)
        self.process, self.settings = process, settings

    async def call(
        self,
        fn: Callable[..., Any],
        *args: Any,
        signal: AbortSignal | None = None,
        on_progress: Callable[[int], None] | None = None,
        what: What = "Query",
        **kwargs: Any,
    ) -> Any:
        name, kind, audited, sent = fn.__name__, None, None, list(args)
        if name == "_statement":  # (kind, sql, settings, bounds, plan, audited)
            audited, kind = sent.pop(), sent[0]
        loop = asyncio.get_running_loop()
        waiting = loop.run_in_executor(None, wait_audited, audited) if audited is not None else None
        canceller = Canceller()
        timers: list[asyncio.TimerHandle] = []

        def arm_timeout() -> None:  # the statement's time starts here, not the worker's start
            timers.append(loop.call_later(self.timeout_s, canceller.request, "timeout"))

        def abort() -> None:
            canceller.request("abort")

        remove = signal.add_listener(abort) if signal else None
        try:
            value = await self.process.call_async(
                "direct",
                (name, self.settings_of(sent, name), tuple(sent)),
                canceller=canceller,
                progress=on_progress,
                on_sent=arm_timeout,
            )
        except (DriftError, AuditBlocked) as exc:
            raise exc from None
        except MemoryLimitExceeded as exc:
            if waiting is not None:
                await waiting
            if kind == "write":
                text = str(exc).replace("nothing was written", NO_ROLLBACK)
                raise MemoryLimitExceeded(text) from None
            raise
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if waiting is not None:
                await waiting
            raise self._error(exc, canceller, what) from None
        finally:
            for timer in timers:
                timer.cancel()
            if remove is not None:
                remove()
        if waiting is not None:
            await waiting  # nothing of the read leaves before its record is committed
        return value.unpack() if isinstance(value, PackedResult) else value

    def settings_of(self, args: list[Any] | tuple[Any, ...], name: str) -> RunSettings:
        """The run's settings: a statement's own (its third argument), else the backend's
        (the worker opens its read-only session with their limits)."""
        return args[2] if name == "_statement" else self.settings
