"""The Arrow path for large SQLite reads: the ADBC child process of
:mod:`pi_notebook.readers.sqlite`, for the backend's vetted reads.

The ADBC SQLite driver reads a result straight into Arrow columns, about three times faster
than ``sqlite3`` and pandas; it runs in a child process (two copies of SQLite in one process
break its POSIX locks), which :class:`~pi_notebook.readers.sqlite.SqliteReader` starts, bounds,
stops and checks. This module adds what the backend asks of a person's read.

Security review (what changes against the ``sqlite3`` path, and why it holds):

* **Only vetted reads.** A statement comes here only when the classifier called it a pure
  read, its text is a query (``SELECT``/``WITH``/``VALUES``), the read is capped, and the
  kernel's own guarded connection compiled it first (:func:`compiles_as_read`, ``EXPLAIN``)
  inside the usual read-only transaction, with the authorizer in read mode: ATTACH, pragmas
  that write, secret tables and the functions that must never run are refused at compile time
  there, exactly as on the ``sqlite3`` path. Whatever fails that check takes the ``sqlite3``
  path, which reports the failure in its own words.
* **Read-only by URI, bounded, stoppable, same values**: the child's own guarantees (see
  :mod:`pi_notebook.readers.sqlite`). The value limit is the kernel's SQLite limit, so a
  statement that allocates without bound fails in the child (and then on the ``sqlite3``
  path, with its limit), never in the kernel; abort and the statement timeout kill the
  child. The DataFrame is converted by the same rules as PostgreSQL's Arrow reads
  (:func:`pi_notebook.readers.frames.to_frame`). ``tests/db/test_db_sqlite_arrow.py`` runs the
  whole SQLite read corpus both ways.

Without pyarrow or ``adbc-driver-sqlite``, and for in-memory or URI-named databases, every
read takes the ``sqlite3`` path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pi_notebook.readers.sqlite import ChildFailed, SqliteReader, sqlite_file
from pi_notebook.sql.backend.arrow import read_fetched
from pi_notebook.sql.backend.cancel import Canceller
from pi_notebook.sql.backend.fetched import Fetched, RunSettings

__all__ = ["ChildFailed", "SqliteArrow", "compiles_as_read", "sqlite_file"]


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


class SqliteArrow(SqliteReader):
    """Large reads of one SQLite file through the ADBC child, for the backend.

    Args:
        path: the database file.
        max_value_bytes: the largest value the child may send (the kernel's SQLite limit).
    """

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
            ChildFailed: the read was cancelled (the child was killed); ``canceller.reason``
                says why.
        """
        return read_fetched(self, sql, settings, canceller, progress)
