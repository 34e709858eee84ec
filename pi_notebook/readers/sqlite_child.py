"""The child process that reads SQLite files through ADBC (see :mod:`.sqlite`).

Run as a script (``python -I sqlite_child.py MAX_VALUE_BYTES MEMORY_BYTES``), never imported
by the kernel: it imports only the standard library, pyarrow and the ADBC SQLite driver, so it
starts fast and its copy of SQLite never shares a process with the kernel's ``sqlite3``.

Protocol, one request at a time over stdin/stdout:

* request: one line of JSON, ``{"path": ..., "sql": ..., "params": [...], "limit": N}``;
* reply: one status line, ``OK`` or ``ERR <text>``; after ``OK``, an Arrow IPC stream of at
  most ``limit`` rows (``limit`` null: all of them), then a second status line, ``OK`` or
  ``ERR <text>`` for a failure after the stream began (the stream was ended early, so the
  parent reads it whole and then throws it away).

Every database is opened read-only by URI (``mode=ro``, so SQLite refuses any write at the
pager), with ``PRAGMA query_only`` on as well. The process's address space is capped
(``RLIMIT_AS``) and no value larger than the kernel's own SQLite limit is ever sent, so a
statement that would allocate without bound fails here, not in the kernel.
"""

from __future__ import annotations

import json
import resource
import sys
import threading
import urllib.parse
from typing import Any

_BATCH_ROWS = "adbc.sqlite.query.batch_rows"
_BATCH = 16_384  # rows per Arrow batch (the driver's default, 1,024, costs more per row)


def _uri(path: str) -> str:
    return "file:" + urllib.parse.quote(path) + "?mode=ro"


class _Child:
    def __init__(self, max_value: int) -> None:
        self.max_value = max_value
        self.conns: dict[str, Any] = {}

    def connection(self, path: str, *, spare: bool = False) -> Any:
        """The connection to ``path`` (``spare``: the second one, for the check thread)."""
        key = ("spare:" if spare else "") + path
        conn = self.conns.get(key)
        if conn is None:
            import adbc_driver_sqlite.dbapi as adbc_sqlite

            # Autocommit: each read is its own transaction, so it sees what was committed
            # since the last one and holds no lock between reads.
            conn = adbc_sqlite.connect(_uri(path), autocommit=True)
            cur = conn.cursor()
            try:
                cur.execute("PRAGMA query_only = ON")
            finally:
                cur.close()
            self.conns[key] = conn
        return conn

    def too_big(self, batch: Any) -> str | None:
        import pyarrow.compute

        pc: Any = pyarrow.compute
        for name, column in zip(batch.schema.names, batch.columns, strict=True):
            if column.nbytes <= self.max_value:  # no single value can be larger
                continue
            longest = pc.max(pc.binary_length(column)).as_py()
            if longest is not None and longest > self.max_value:
                return f"a value of column {name} is larger than {self.max_value:,} bytes"
        return None

    def serve(self, request: dict[str, Any], out: Any) -> None:
        import pyarrow as pa

        limit: int | None = request.get("limit")
        sql, params, path = request["sql"], request.get("params") or None, request["path"]
        checker: _Checker | None = None
        try:
            spare = self.connection(path, spare=True)
            before = _data_version(spare)
            run = _Run(self.connection(path), sql, params)
            schema, checked = run.schema, _text_columns(run.schema)
            if checked and run.first is not None:
                checker = _Checker(spare, _check(sql, schema, checked, limit), params, before)
        except Exception as exc:
            _status(out, f"ERR {type(exc).__name__}: {exc}")
            return
        _status(out, "OK")
        failure: str | None = None
        writer = pa.ipc.new_stream(out, schema)
        try:
            seen = 0
            for batch in run.batches():
                if limit is not None and seen + batch.num_rows > limit:
                    batch = batch.slice(0, limit - seen)
                failure = self.too_big(batch)
                if failure is not None:
                    break
                writer.write_batch(batch)
                seen += batch.num_rows
                if limit is not None and seen >= limit:
                    break
        except Exception as exc:  # a type change past the first batch, a step error
            failure = f"{type(exc).__name__}: {exc}"
        finally:
            writer.close()
            if checker is not None:
                failure = failure or checker.result()
            run.close()
        _status(out, "OK" if failure is None else f"ERR {failure}")


class _Run:
    """One statement on the ADBC connection, its first batch read (it fixes the types)."""

    def __init__(self, conn: Any, sql: str, params: list[Any] | None) -> None:
        self.cur = conn.cursor()
        try:
            self.cur.adbc_statement.set_options(**{_BATCH_ROWS: str(_BATCH)})
            self.cur.execute(sql, params)
            self.reader = self.cur.fetch_record_batch()
            self.schema = self.reader.schema
            self.first: Any = next(iter(self.reader), None)
        except BaseException:
            self.cur.close()
            raise

    def batches(self) -> Any:
        if self.first is not None:
            first, self.first = self.first, None
            yield first
            yield from self.reader

    def close(self) -> None:
        try:
            self.reader.close()
        finally:
            self.cur.close()


def _text_columns(schema: Any) -> list[tuple[int, str]]:
    """Positions of the text and blob columns, with the storage class each must hold."""
    import pyarrow as pa

    found: list[tuple[int, str]] = []
    for i, t in enumerate(schema.types):
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            found.append((i, "text"))
        elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
            found.append((i, "blob"))
    return found


def _check(sql: str, schema: Any, checked: list[tuple[int, str]], limit: int | None) -> str:
    """A query that returns a row when one of the first ``limit`` rows of ``sql`` holds a value
    of another storage class in a text or blob column.

    The driver fixes a column's type from the first batch and then converts: a number in a
    text column becomes its text, a blob in a text column is decoded, text in a blob column is
    encoded; ``sqlite3`` would give each value as it is. Integer and real columns need no
    check: the driver refuses text there, and a real column's integers become floats exactly
    as ``DataFrame.from_records(coerce_float=True)`` makes them. The statement keeps its own
    text inside the ``WITH`` (the guard compiled it as one whole statement, so the wrapper
    either holds it as it is or fails to parse); the column list renames its columns by
    position, so repeated or unnamed columns are fine.
    """
    names = ", ".join(f"c{i}" for i in range(len(schema.names)))
    return (
        f"WITH _pi_rows({names}) AS (\n{sql}\n) SELECT 1 FROM (SELECT * FROM _pi_rows "
        f"LIMIT {-1 if limit is None else int(limit)}) WHERE NOT ({_tests(checked)}) "
        f"LIMIT 1"
    )


def _tests(checked: list[tuple[int, str]]) -> str:
    return " AND ".join(f"typeof(c{i}) IN ('{kind}', 'null')" for i, kind in checked)


class _Checker:
    """Runs :func:`_check` on the spare connection in a thread, beside the read.

    Both see the same rows: ``PRAGMA data_version`` on the spare connection, read before the
    read started and again after the check, changes if any connection committed in between;
    then the check fails (and the kernel takes the ``sqlite3`` path).
    """

    def __init__(self, conn: Any, sql: str, params: list[Any] | None, before: int) -> None:
        self.failure: str | None = None
        self._thread = threading.Thread(
            target=self._run, args=(conn, sql, params, before), daemon=True
        )
        self._thread.start()

    def _run(self, conn: Any, sql: str, params: list[Any] | None, before: int) -> None:
        try:
            cur = conn.cursor()
            try:
                cur.execute(sql, params)
                mixed = bool(cur.fetchall())
            finally:
                cur.close()
            if mixed:
                self.failure = "a text or blob column holds values of another storage class"
            elif _data_version(conn) != before:
                self.failure = "the database changed during the read"
        except Exception as exc:  # busy, or anything else: not checked means not sent
            self.failure = f"the storage-class check failed ({type(exc).__name__}: {exc})"

    def result(self) -> str | None:
        self._thread.join()
        return self.failure


def _data_version(conn: Any) -> int:
    cur = conn.cursor()
    try:
        cur.execute("PRAGMA data_version")
        return int(cur.fetchall()[0][0])
    finally:
        cur.close()


def _status(out: Any, line: str) -> None:
    out.write(line.replace("\n", " ").encode("utf-8", "replace") + b"\n")
    out.flush()


def main() -> None:
    max_value, memory = int(sys.argv[1]), int(sys.argv[2])
    if memory > 0:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    child = _Child(max_value)
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        child.serve(json.loads(line), out)


if __name__ == "__main__":
    main()
