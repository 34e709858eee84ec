"""A scripted Trino coordinator on loopback, for the ``trino`` client path.

It is not Trino: it speaks the ``/v1/statement`` REST protocol for the few statements the
tests send (POST the statement, GET each ``nextUri`` page, ``DELETE`` a ``nextUri`` to cancel,
``updateType``/``updateCount`` after a write, a ``USER_CANCELED`` error once cancelled) and
records every request so the tests can check what the backend sent.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from loopback_http import LoopbackServer

__all__ = ["FakeTrino", "Statement"]

_BIGINT = {"name": "", "type": "bigint", "typeSignature": {"rawType": "bigint", "arguments": []}}
_VARCHAR = {
    "name": "",
    "type": "varchar",
    "typeSignature": {"rawType": "varchar", "arguments": [{"kind": "LONG", "value": 2147483647}]},
}
PAGES = 1000
"""Pages of 1000 rows ``numbers_stream`` has (a million rows)."""


def _column(kind: dict[str, Any], name: str) -> dict[str, Any]:
    return {**kind, "name": name}


@dataclass
class Statement:
    """One statement the server received: its text, headers, pages served, and whether a
    DELETE cancelled it."""

    sql: str
    headers: dict[str, str]
    pages: int = 0
    deleted: bool = False


@dataclass
class FakeTrino(LoopbackServer):
    """The server (``start()`` / ``stop()``, ``port``); ``statements`` in arrival order."""

    statements: dict[str, Statement] = field(default_factory=dict)
    counts: int = 3
    plan: dict[str, Any] = field(
        default_factory=lambda: {
            "inputTableColumnInfos": [
                {
                    "table": {
                        "catalog": "hive",
                        "schemaTable": {"schema": "sales", "table": "events"},
                    },
                    "estimate": {"outputRowCount": 8192.0, "outputSizeInBytes": 131072.0},
                }
            ],
            "estimate": {"outputRowCount": 1.0, "outputSizeInBytes": 9.0},
        }
    )
    held: threading.Event = field(default_factory=threading.Event)
    _ids: Any = field(default_factory=itertools.count)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def sent(self, needle: str) -> list[Statement]:
        """The statements whose text contains ``needle``."""
        with self._lock:
            return [s for s in self.statements.values() if needle in s.sql]

    # -- protocol ------------------------------------------------------------------------
    def _base(self, query_id: str) -> dict[str, Any]:
        return {"id": query_id, "infoUri": f"http://127.0.0.1:{self.port}/ui/{query_id}"}

    def _next(self, query_id: str, page: int) -> str:
        return f"http://127.0.0.1:{self.port}/v1/statement/executing/{query_id}/{page}"

    def post(self, handler: Any, body: str) -> None:
        query_id = f"q{next(self._ids)}"
        with self._lock:
            self.statements[query_id] = Statement(body, dict(handler.headers))
        _json(
            handler,
            {
                **self._base(query_id),
                "nextUri": self._next(query_id, 1),
                "stats": {"state": "QUEUED"},
            },
        )

    def get(self, handler: Any) -> None:
        query_id, page = handler.path.rstrip("/").split("/")[-2:]
        statement = self.statements[query_id]
        base = self._base(query_id)
        if statement.deleted:
            return _json(
                handler,
                {
                    **base,
                    "stats": {"state": "FAILED"},
                    "error": {
                        "message": "Query was canceled",
                        "errorCode": 3,
                        "errorName": "USER_CANCELED",
                        "errorType": "USER_ERROR",
                    },
                },
            )
        sql, number = statement.sql, int(page)
        if "slow_table" in sql:  # running, no rows, until a DELETE
            self.held.set()
            time.sleep(0.02)
            return _json(
                handler,
                {
                    **base,
                    "nextUri": self._next(query_id, number + 1),
                    "stats": {"state": "RUNNING"},
                },
            )
        if "numbers_stream" in sql:
            statement.pages += 1
            rows = [[i] for i in range((number - 1) * 1000, number * 1000)]
            more = {"nextUri": self._next(query_id, number + 1)} if number < PAGES else {}
            return _json(
                handler,
                {
                    **base,
                    **more,
                    "columns": [_column(_BIGINT, "number")],
                    "data": rows,
                    "stats": {"state": "RUNNING"},
                },
            )
        if sql.startswith(("INSERT", "DELETE", "UPDATE")):
            kind = sql.split()[0]
            return _json(
                handler,
                {
                    **base,
                    "columns": [_column(_BIGINT, "rows")],
                    "data": [[self.counts]],
                    "updateType": kind,
                    "updateCount": self.counts,
                    "stats": {"state": "FINISHED"},
                },
            )
        columns, data = _result(sql, self.counts, self.plan)
        _json(handler, {**base, "columns": columns, "data": data, "stats": {"state": "FINISHED"}})

    def delete(self, handler: Any) -> None:
        query_id = handler.path.rstrip("/").split("/")[-2]
        with self._lock:
            self.statements[query_id].deleted = True
        handler.send_response(204)
        handler.send_header("Content-Length", "0")
        handler.end_headers()


def _result(sql: str, counts: int, plan: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    if sql.startswith("EXPLAIN (TYPE IO, FORMAT JSON)"):
        return [_column(_VARCHAR, "Query Plan")], [[json.dumps(plan)]]
    if "count(*)" in sql.lower():
        return [_column(_BIGINT, "_col0")], [[counts]]
    if "information_schema.tables" in sql:
        return (
            [_column(_VARCHAR, "table_name"), _column(_VARCHAR, "table_type")],
            [["events", "BASE TABLE"], ["recent", "VIEW"]],
        )
    if "information_schema.columns" in sql:
        names = ("table_name", "column_name", "data_type", "is_nullable")
        return (
            [_column(_VARCHAR, n) for n in names],
            [["events", "ts", "timestamp(3)", "NO"], ["events", "kind", "varchar", "YES"]],
        )
    return ([_column(_BIGINT, "n"), _column(_VARCHAR, "kind")], [[1, "view"], [2, "café"]])


def _json(handler: Any, value: dict[str, Any]) -> None:
    body = json.dumps(value).encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)
