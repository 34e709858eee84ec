"""The child process that reads SQLite files through ADBC (see :mod:`.arrow_sqlite`).

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

    def connection(self, path: str) -> Any:
        conn = self.conns.get(path)
        if conn is None:
            import adbc_driver_sqlite.dbapi as adbc_sqlite

            conn = adbc_sqlite.connect(_uri(path))
            cur = conn.cursor()
            try:
                cur.execute("PRAGMA query_only = ON")
            finally:
                cur.close()
            self.conns[path] = conn
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
        try:
            cur = self.connection(request["path"]).cursor()
            cur.adbc_statement.set_options(**{_BATCH_ROWS: str(_BATCH)})
            cur.execute(request["sql"], request.get("params") or None)
            reader = cur.fetch_record_batch()
        except Exception as exc:
            _status(out, f"ERR {type(exc).__name__}: {exc}")
            return
        _status(out, "OK")
        failure: str | None = None
        writer = pa.ipc.new_stream(out, reader.schema)
        try:
            seen = 0
            for batch in reader:
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
            try:
                reader.close()
            finally:
                cur.close()
        _status(out, "OK" if failure is None else f"ERR {failure}")


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
