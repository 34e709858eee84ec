"""A scripted ClickHouse HTTP interface on loopback, for the clickhouse-connect client path.

It is not ClickHouse: it answers the few statements the tests send, as the real HTTP
interface would frame them (POST body = statement, settings and ``query_id`` as URL
parameters, bodies in the Native format, ``Code: N. DB::Exception`` errors with HTTP 500,
``X-ClickHouse-Summary`` after a write), and records every request so the tests can check
what the backend sent. Two server rules are scripted because the tests lean on them:
``readonly=1`` refuses a write (Code 164), and ``KILL QUERY WHERE query_id = '...'`` ends the
held statement with that id (Code 394).
"""

from __future__ import annotations

import json
import re
import struct
import threading
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from loopback_http import LoopbackServer

__all__ = ["FakeClickHouse", "Request"]

Columns = list[tuple[str, str, list[Any]]]
"""A result as (name, ClickHouse type, values) per column."""
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
        write = _WRITE.match(sql)
        if write and request.params.get("readonly") == "1":
            return _error(handler, 164, "Cannot execute query in readonly mode. (READONLY)")
        if "slow_table" in sql:  # held until a KILL QUERY names it (or 20 s)
            self.held.set()
            killed.wait(20)
            return _error(handler, 394, "Query was cancelled. (QUERY_WAS_CANCELLED)")
        if write:
            summary = json.dumps({"read_rows": "0", "written_rows": str(self.counts)})
            return _send(handler, b"", {"X-ClickHouse-Summary": summary})
        if "numbers_stream" in sql:
            limit = int(request.params.get("max_result_rows") or 0)
            return self._stream(handler, killed, -(-limit // 1000) if limit else 50_000)
        return _send(handler, native(_result(sql, self.counts)))

    def _stream(self, handler: Any, killed: threading.Event, blocks: int) -> None:
        """Native blocks of 1000 rows: ``blocks`` of them (``max_result_rows`` in ``break``
        mode ends the result at the end of the block that passes it; else 50 million rows),
        or fewer if the client hangs up or a KILL QUERY names the statement (then an
        exception ends the body, as ClickHouse's does)."""
        handler.send_response(200)
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        block = native([("number", "UInt64", list(range(1000)))])
        try:
            for _ in range(blocks):
                if killed.is_set():
                    block = b"Code: 394. DB::Exception: Query was cancelled. (QUERY_WAS_CANCELLED)"
                    handler.wfile.write(b"%x\r\n%s\r\n" % (len(block), block))
                    break
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(block), block))
                handler.wfile.flush()
                self.streamed_rows += 1000
            handler.wfile.write(b"0\r\n\r\n")
        except OSError:  # the client closed the stream: what the bound is about
            pass
        finally:
            self.stream_done.set()
            handler.close_connection = True


def _result(sql: str, counts: int) -> Columns:
    if "EXPLAIN ESTIMATE" in sql:
        return [
            ("database", "String", ["shop"]),
            ("table", "String", ["events"]),
            ("parts", "UInt64", [2]),
            ("rows", "UInt64", [8192]),
            ("marks", "UInt64", [1]),
        ]
    if "FROM system.parts" in sql:
        return [
            ("database", "String", ["shop"]),
            ("table", "String", ["events"]),
            ("width", "Float64", [16.0]),
        ]
    if "count()" in sql:
        return [("count()", "UInt64", [counts])]
    if "FROM system.tables" in sql:
        return [
            ("name", "String", ["events"]),
            ("engine", "String", ["MergeTree"]),
            ("comment", "String", ["clicks"]),
        ]
    if "FROM system.columns" in sql:
        return [
            ("table", "String", ["events", "events"]),
            ("name", "String", ["ts", "kind"]),
            ("type", "String", ["DateTime", "Nullable(String)"]),
            ("comment", "String", ["", ""]),
            ("is_in_primary_key", "UInt8", [1, 0]),
        ]
    return [
        ("ts", "DateTime", [1704067200, 1704067260]),
        ("n", "UInt64", [1, 2]),
        ("kind", "Nullable(String)", ["view", "café"]),
    ]


def native(columns: Columns) -> bytes:
    """``columns`` as one block of ClickHouse's Native format (client protocol 0)."""
    rows = len(columns[0][2]) if columns else 0
    out = bytearray(_varuint(len(columns)) + _varuint(rows))
    for name, kind, values in columns:
        out += _string(name) + _string(kind) + _values(kind, values)
    return bytes(out)


def _values(kind: str, values: list[Any]) -> bytes:
    if kind.startswith("Nullable("):
        inner = kind[len("Nullable(") : -1]
        empty = "" if inner == "String" else 0
        return bytes(v is None for v in values) + _values(
            inner, [empty if v is None else v for v in values]
        )
    if kind == "String":
        return b"".join(_string(v) for v in values)
    code = {"UInt8": "B", "UInt64": "Q", "Float64": "d", "DateTime": "I"}[kind]
    return struct.pack(f"<{len(values)}{code}", *values)


def _string(text: str) -> bytes:
    data = text.encode()
    return _varuint(len(data)) + data


def _varuint(number: int) -> bytes:
    out = bytearray()
    while True:
        low, number = number & 0x7F, number >> 7
        out.append(low | (0x80 if number else 0))
        if not number:
            return bytes(out)


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
