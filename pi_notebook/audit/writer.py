"""The background writer: batches queued records into transactions, off the agent's thread.

Callers only append to an in-memory queue (``submit``) and, for durable records, wait until
the writer has committed up to theirs (``wait``). The writer chains each batch (seq, prev_hash,
hash) at write time from the head it last committed, inserts the rows and updates the
session's head in the same transaction, so a batch is on disk whole or not at all. A failed
batch stays at the front of the queue and is retried with back-off; nothing is chained twice.
"""

from __future__ import annotations

import collections
import datetime as dt
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from .chain import GENESIS, record_hash
from .schema import heads, records

__all__ = ["Pending", "Writer"]

_log = logging.getLogger("pi_notebook.audit")
_MAX_BATCH = 2000
_SQLITE_INSERT = (
    'INSERT INTO pi_audit_records (session_id, seq, ts, kind, tool_call_id, tool_name, "user", '
    "policy_version, payload, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_MAX_BACKOFF = 5.0


@dataclass(slots=True)
class Pending:
    """A record waiting to be written: everything but its place in the chain."""

    ticket: int
    ts: dt.datetime
    kind: str
    tool_call_id: str | None
    tool_name: str | None
    policy_version: str | None
    payload: str


class Writer:
    """Owns one session's chain in one store and the thread that writes it."""

    def __init__(self, engine: sa.Engine, session_id: str, user: str) -> None:
        self._engine = engine
        self._session_id = session_id
        self._user = user
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self._done = threading.Condition(self._lock)
        self._queue: collections.deque[Pending] = collections.deque()
        self._issued = 0  # last ticket handed out
        self._committed = 0  # last ticket on disk
        self._stopping = False
        self._head: tuple[int, str] | None = None  # (count, last_hash) as committed
        self._head_exists = False
        self._sqlite = engine.dialect.name == "sqlite"
        self.last_error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, name=f"pi-audit-{session_id[:8]}", daemon=True
        )
        self._thread.start()

    def submit(
        self,
        ts: dt.datetime,
        kind: str,
        tool_call_id: str | None,
        tool_name: str | None,
        policy_version: str | None,
        payload: str,
    ) -> int:
        """Queue a record; returns its ticket for ``wait``.

        Raises:
            RuntimeError: ``close`` has begun, so the record might never be written.
        """
        with self._lock:
            if self._stopping:
                raise RuntimeError(f"the audit writer of session {self._session_id} is closed")
            self._issued += 1
            self._queue.append(
                Pending(self._issued, ts, kind, tool_call_id, tool_name, policy_version, payload)
            )
            self._work.notify()
            return self._issued

    def wait(self, ticket: int | None = None, timeout: float | None = None) -> bool:
        """Block until everything up to ``ticket`` (default: all issued) is committed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            target = self._issued if ticket is None else ticket
            while self._committed < target:
                if not self._thread.is_alive():
                    return False
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                # Wake periodically so a writer that died is noticed.
                self._done.wait(0.5 if remaining is None else min(remaining, 0.5))
            return True

    def pending(self) -> int:
        """How many records are queued and not yet committed."""
        with self._lock:
            return len(self._queue)

    def close(self, timeout: float = 30.0) -> None:
        """Write what is queued (retrying for up to ``timeout`` seconds) and stop the thread."""
        with self._lock:
            self._stopping = True
            self._work.notify_all()
        if threading.current_thread() is self._thread:
            # Garbage collection can run the log's finalizer on this very thread; it then
            # drains the queue by itself once the current batch is done.
            return
        self._thread.join(timeout)
        with self._lock:
            lost = len(self._queue)
        if lost:
            _log.error(
                "audit: %d record(s) of session %s could not be written before close: %r",
                lost,
                self._session_id,
                self.last_error,
            )

    def _run(self) -> None:
        backoff = 0.05
        stop_deadline: float | None = None
        while True:
            with self._lock:
                while not self._queue and not self._stopping:
                    self._work.wait()
                if not self._queue:
                    return
                if self._stopping and stop_deadline is None:
                    stop_deadline = time.monotonic() + 10.0
                n = min(len(self._queue), _MAX_BATCH)
                batch = [self._queue[i] for i in range(n)]
            try:
                self._write(batch)
            except Exception as exc:  # keep the batch and retry; never die
                self.last_error = exc
                _log.warning("audit: writing %d record(s) failed, will retry: %s", n, exc)
                if isinstance(exc, sa_exc.IntegrityError):
                    self._head = None  # another writer shares this session: reload its head
                if stop_deadline is not None and time.monotonic() > stop_deadline:
                    return
                time.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF)
                continue
            backoff = 0.05
            with self._lock:
                for _ in range(n):
                    self._queue.popleft()
                self._committed = batch[-1].ticket
                self._done.notify_all()

    def _load_head(self, conn: sa.Connection) -> tuple[int, str]:
        row = conn.execute(
            sa.select(heads.c.count, heads.c.last_hash).where(
                heads.c.session_id == self._session_id
            )
        ).first()
        self._head_exists = row is not None
        return (int(row[0]), str(row[1])) if row is not None else (0, GENESIS)

    def _write(self, batch: list[Pending]) -> None:
        sid, user = self._session_id, self._user
        with self._engine.begin() as conn:
            # Resuming a session (same id, new process) continues its chain from the store.
            count, prev = self._head if self._head is not None else self._load_head(conn)
            rows: list[Any] = []
            sqlite = self._sqlite
            for item in batch:
                count += 1
                iso = (
                    item.ts.astimezone(dt.UTC)
                    .replace(tzinfo=None)
                    .isoformat(timespec="microseconds")
                )
                digest = record_hash(
                    session_id=sid,
                    seq=count,
                    ts=iso + "Z",
                    kind=item.kind,
                    tool_call_id=item.tool_call_id,
                    tool_name=item.tool_name,
                    user=user,
                    policy_version=item.policy_version,
                    payload=item.payload,
                    prev_hash=prev,
                )
                if sqlite:
                    # SQLAlchemy's own text form of a SQLite DATETIME, so reads parse it.
                    rows.append(
                        (
                            sid,
                            count,
                            f"{iso[:10]} {iso[11:]}",
                            item.kind,
                            item.tool_call_id,
                            item.tool_name,
                            user,
                            item.policy_version,
                            item.payload,
                            prev,
                            digest,
                        )
                    )
                else:
                    rows.append(
                        {
                            "session_id": sid,
                            "seq": count,
                            "ts": item.ts,
                            "kind": item.kind,
                            "tool_call_id": item.tool_call_id,
                            "tool_name": item.tool_name,
                            "user": user,
                            "policy_version": item.policy_version,
                            "payload": item.payload,
                            "prev_hash": prev,
                            "hash": digest,
                        }
                    )
                prev = digest
            if sqlite:
                # The driver's executemany with tuples: SQLAlchemy's per-row parameter
                # processing is most of the cost of a SQLite insert, and the rows are ready.
                conn.exec_driver_sql(_SQLITE_INSERT, rows)
            else:
                conn.execute(sa.insert(records), rows)
            if self._head_exists:
                conn.execute(
                    sa.update(heads)
                    .where(heads.c.session_id == sid)
                    .values(count=count, last_hash=prev)
                )
            else:
                conn.execute(sa.insert(heads).values(session_id=sid, count=count, last_hash=prev))
        self._head = (count, prev)
        self._head_exists = True
