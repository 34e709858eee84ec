"""A scripted ClickHouse HTTP interface on loopback, for the clickhouse-connect client path.

It is not ClickHouse: it answers the few statements the tests send, as the real HTTP
interface would frame them (POST body = statement, settings and ``query_id`` as URL
parameters, Arrow / ArrowStream bodies, ``Code: N. DB::Exception`` errors with HTTP 500,
``X-ClickHouse-Summary`` after a write), and records every request so the tests can check
what the backend sent. Two server rules are scripted because the tests lean on them:
``readonly=1`` refuses a write (Code 164), and ``KILL QUERY WHERE query_id = '...'`` ends the
held statement with that id (Code 394).
"""

from __future__ import annotations

import json
import re
import threading
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from loopback_http import LoopbackServer

__all__ = ["FakeClickHouse", "Request"]

_BATCH = pa.record_batch([pa.array(range(1000), pa.uint64())], names=["number"])
_WRITE = re.compile(r"^\s*(INSERT|ALTER|DELETE|CREATE|DROP|TRUNCATE)\b", re.IGNORECASE)


@dataclass
class Request:
    """One request the server received: its URL parameters and statement."""

    params: dict[str, str]
    sql: str


@dataclass
class FakeClickHouse(LoopbackServer):
    """The server (``start()`` / ``stop()``, ``port``); ``requests`` in arrival order.

    Attributes:
        counts: the value ``SELECT count() ...`` answers.
        streamed_rows: rows of ``numbers_stream`` written before the client hung up.
    """

    requests: list[Request] = field(default_factory=list)
    counts: int = 3
    streamed_rows: int = 0
    stream_done: threading.Event = field(default_factory=threading.Event)
    held: threading.Event = field(default_factory=threading.Event)
    _killed: dict[str, threading.Event] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def stop(self) -> None:
        for event in self._killed.values():
            event.set()
        super().stop()

    def post(self, handler: Any, body: str) -> None:
        params = dict(urllib.parse.parse_qsl(urllib.parse.urlparse(handler.path).query))
        self._answer(handler, Request(params, params.pop("query", "") + body))

    def sent(self, needle: str) -> list[Request]:
        """The requests whose statement contains ``needle``."""
        with self._lock:
            return [r for r in self.requests if needle in r.sql]

    # -- answers -----------------------------------------------------------------------
    def _answer(self, handler: Any, request: Request) -> None:
        sql = request.sql
        with self._lock:
            self.requests.append(request)
            killed = self._killed.setdefault(request.params.get("query_id", ""), threading.Event())
        if "version()" in sql:
            return _send(handler, b"24.8.1.1\tUTC\n")
        if "FROM system.settings" in sql:
            return _send(handler, b"")  # no settings listed: the client forwards every one
        if "AS check" in sql:  # the protocol probe
            return _error(handler, 62, "Syntax error (scripted server)")
        kill = re.search(r"KILL QUERY WHERE query_id = '([^']*)'", sql)
        if kill:
            with self._lock:
                self._killed.setdefault(kill.group(1), threading.Event()).set()
            return _send(handler, b"")
        if sql.startswith("KILL MUTATION"):
            return _send(handler, b"")
        if _WRITE.match(sql):
            if request.params.get("readonly") == "1":
                return _error(handler, 164, "Cannot execute query in readonly mode. (READONLY)")
            summary = json.dumps({"read_rows": "0", "written_rows": str(self.counts)})
            return _send(handler, b"", {"X-ClickHouse-Summary": summary})
        if "slow_table" in sql:  # held until a KILL QUERY names it (or 20 s)
            self.held.set()
            killed.wait(20)
            return _error(handler, 394, "Query was cancelled. (QUERY_WAS_CANCELLED)")
        if "numbers_stream" in sql:
            return self._stream(handler)
        return _send(handler, _ipc(_table_for(sql, self.counts), file="FORMAT Arrow\n" in sql
                                   or sql.rstrip().endswith("FORMAT Arrow")))  # fmt: skip

    def _stream(self, handler: Any) -> None:
        """ArrowStream blocks of 1000 rows, up to 50 million, until the client hangs up."""
        handler.send_response(200)
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        try:
            _chunk(handler, _BATCH.schema.serialize().to_pybytes())
            block = _BATCH.serialize().to_pybytes()
            for _ in range(50_000):
                _chunk(handler, block)
                self.streamed_rows += _BATCH.num_rows
            _chunk(handler, b"\xff\xff\xff\xff\x00\x00\x00\x00")
            handler.wfile.write(b"0\r\n\r\n")
        except OSError:  # the client closed the stream: what the bound is about
            pass
        finally:
            self.stream_done.set()
            handler.close_connection = True


def _chunk(handler: Any, data: bytes) -> None:
    handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
    handler.wfile.flush()


def _table_for(sql: str, counts: int) -> pa.Table:
    if "EXPLAIN ESTIMATE" in sql:
        return pa.table({"database": ["shop"], "table": ["events"], "parts": pa.array([2], pa.uint64()),
                         "rows": pa.array([8192], pa.uint64()), "marks": pa.array([1], pa.uint64())})  # fmt: skip
    if "FROM system.parts" in sql:
        return pa.table({"database": [b"shop"], "table": [b"events"], "width": [16.0]})
    if "count()" in sql:
        return pa.table({"count()": pa.array([counts], pa.uint64())})
    if "FROM system.tables" in sql:
        return pa.table({"name": [b"events"], "engine": [b"MergeTree"], "comment": [b"clicks"]})
    if "FROM system.columns" in sql:
        return pa.table({"table": [b"events"] * 2, "name": [b"ts", b"kind"],
                         "type": [b"DateTime", b"Nullable(String)"], "comment": [b"", b""],
                         "is_in_primary_key": pa.array([1, 0], pa.uint8())})  # fmt: skip
    return pa.table({"n": pa.array([1, 2], pa.uint64()), "kind": [b"view", b"caf\xc3\xa9"]})


def _ipc(table: pa.Table, *, file: bool) -> bytes:
    sink = pa.BufferOutputStream()
    writer = pa.ipc.new_file(sink, table.schema) if file else pa.ipc.new_stream(sink, table.schema)
    writer.write_table(table)
    writer.close()
    return sink.getvalue().to_pybytes()


def _send(handler: Any, body: bytes, headers: dict[str, str] | None = None) -> None:
    handler.send_response(200)
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def _error(handler: Any, code: int, text: str) -> None:
    body = f"Code: {code}. DB::Exception: {text}\n".encode()
    handler.send_response(500)
    handler.send_header("X-ClickHouse-Exception-Code", str(code))
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)
