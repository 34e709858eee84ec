"""The background writer: group commits of queued records, off the agent's thread and loop.

Callers append to an in-memory queue (``submit``). Ordinary records wait up to ``linger``
seconds so that several share one transaction; a durable record (or a flush) makes the writer
commit at once, everything queued before it included. The writer chains each batch (seq,
prev_hash, hash) from the head it last committed and writes rows and head in one transaction.

Failures: a batch that fails for a reason of the store (locked, read-only, full, unreachable)
stays queued and is retried with back-off; a durable waiter is not kept waiting for it (its
deadline is its own, see ``AuditLog``). A batch that fails for a reason of its content is
bisected until the failing record is alone; that record is replaced in the chain by an
``audit_record_rejected`` stub, the rest commits, and the rejected record's durable waiter gets
``AuditUnavailableError`` (fail closed). If even the stub cannot be written, the store is the
problem after all and the batch is retried.
"""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import itertools
import logging
import threading
import time
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from ..errors import AuditUnavailableError
from .chain import GENESIS, format_ts, record_hasher
from .failures import ascii_cut, rejected_payload, short_error, store_problem
from .store import Row, RowStore

__all__ = ["Pending", "Writer"]

_log = logging.getLogger("pi_notebook.audit")
_MAX_BATCH = 2000
_MAX_BACKOFF = 2.0
_BISECT_AFTER = 3  # failures of one batch before even a "store" error is bisected


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
    durable: bool = False
    sync: bool = True  # a durable record that must also survive a crash of the server


Outcome = str | AuditUnavailableError  # the committed hash, or why the record is not stored


class Writer:
    """Owns one session's chain in one store and the thread that writes it."""

    def __init__(
        self,
        engine: sa.Engine,
        session_id: str,
        user: str,
        *,
        linger: float = 0.05,
        stop_grace: float = 10.0,
    ) -> None:
        self._session_id = session_id
        self._stop_grace = stop_grace  # seconds close() keeps retrying a failing store
        self._user = user
        self._linger = linger
        self._store = RowStore(engine)
        self._hasher = record_hasher(session_id, user)
        self._ts_form = _ts_form(self._store)
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self._done = threading.Condition(self._lock)
        self._queue: collections.deque[Pending] = collections.deque()
        self._issued = 0  # last ticket handed out
        self._settled = 0  # every ticket up to this one is committed or rejected
        self._urgent = 0  # someone waits for every ticket up to this one
        self._outcomes: dict[int, Outcome] = {}  # settled durable tickets not yet collected
        self._futures: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future[str]]] = {}
        self._abandoned: set[int] = set()  # durable tickets whose waiter gave up
        self._stopping = False
        self._head: tuple[int, str] | None = None  # (count, last_hash) as committed
        self._head_exists = False
        self.last_error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, name=f"pi-audit-{session_id[:8]}", daemon=True
        )
        self._thread.start()

    # -- callers' side ----------------------------------------------------------------
    def submit(
        self,
        ts: dt.datetime,
        kind: str,
        tool_call_id: str | None,
        tool_name: str | None,
        policy_version: str | None,
        payload: str,
        durable: bool = False,
        sync: bool = True,
    ) -> int:
        """Queue a record; returns its ticket (``sync``: see ``RowStore.write``).

        Raises:
            AuditUnavailableError: ``close`` has begun, so the record might never be written.
        """
        with self._lock:
            if self._stopping:
                raise AuditUnavailableError(
                    f"the audit store is unavailable: the audit writer of session "
                    f"{self._session_id} is closed"
                )
            self._issued += 1
            ticket = self._issued
            pending = Pending(
                ticket, ts, kind, tool_call_id, tool_name, policy_version, payload, durable, sync
            )
            self._queue.append(pending)
            if durable:
                self._urgent = ticket
                self._work.notify()
            elif len(self._queue) == 1 or len(self._queue) == _MAX_BATCH:
                # The writer waits for a first record, or lingers while fewer than a batch
                # are queued: records arrive one at a time, so the queue passes through both
                # sizes (a notify beyond them would wake no one, at a cost per record).
                self._work.notify()
            return ticket

    def wait(self, ticket: int | None = None, timeout: float | None = None) -> bool:
        """Block until every ticket up to ``ticket`` (default: all issued) is settled."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            target = self._issued if ticket is None else ticket
            if self._settled < target:
                self._urgent = max(self._urgent, target)
                self._work.notify()
            while self._settled < target:
                if not self._thread.is_alive():
                    return False
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                # Wake periodically so a writer that died is noticed.
                self._done.wait(0.5 if remaining is None else min(remaining, 0.5))
            return True

    def outcome(self, ticket: int, timeout: float) -> str:
        """Wait for a durable ticket; returns its record's hash.

        Raises:
            AuditUnavailableError: not committed within ``timeout`` seconds, or refused.
        """
        settled = self.wait(ticket, timeout)
        with self._lock:
            found = self._outcomes.pop(ticket, None)
        if not settled or found is None:
            self.forget(ticket)
            raise AuditUnavailableError(self._late_message(timeout))
        if isinstance(found, AuditUnavailableError):
            raise found
        return found

    def future(self, ticket: int, loop: asyncio.AbstractEventLoop) -> asyncio.Future[str]:
        """A future of ``loop`` resolved (by the writer thread) with a durable ticket's hash,
        or failed with ``AuditUnavailableError`` if the record is refused."""
        fut: asyncio.Future[str] = loop.create_future()
        with self._lock:
            found = self._outcomes.pop(ticket, None)
            if found is None:
                self._futures[ticket] = (loop, fut)
                return fut
        _resolve(fut, found)
        return fut

    def forget(self, ticket: int) -> None:
        """Drop what is kept for a durable ticket whose waiter gave up."""
        with self._lock:
            self._futures.pop(ticket, None)
            if self._outcomes.pop(ticket, None) is None and ticket > self._settled:
                self._abandoned.add(ticket)

    def late_error(self, timeout: float) -> AuditUnavailableError:
        """The error for a durable record not committed within ``timeout`` seconds."""
        return AuditUnavailableError(self._late_message(timeout))

    def _late_message(self, timeout: float) -> str:
        cause = f": {short_error(self.last_error)}" if self.last_error is not None else ""
        return (
            f"the audit store is unavailable: it did not commit the record within {timeout:g} s"
            f"{cause}"
        )

    def pending(self) -> int:
        """How many records are queued and not yet committed."""
        with self._lock:
            return len(self._queue)

    def close(self, timeout: float = 30.0) -> None:
        """Write what is queued (retrying a failing store for a while) and stop the thread."""
        with self._lock:
            self._stopping = True
            self._urgent = self._issued
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

    # -- the writer thread -------------------------------------------------------------
    def _run(self) -> None:
        backoff, failures = 0.05, 0
        stop_deadline: float | None = None
        try:
            while True:
                with self._lock:
                    batch = self._next_batch()
                    if batch is None:
                        return
                    if self._stopping and stop_deadline is None:
                        stop_deadline = time.monotonic() + self._stop_grace
                done, error = self._commit(batch, bisect=failures >= _BISECT_AFTER)
                if done:
                    self._settle(done)
                if error is None:
                    backoff, failures = 0.05, 0
                    continue
                self.last_error, failures = error, failures + 1
                _log.warning(
                    "audit: writing %d record(s) failed, will retry: %s",
                    len(batch) - len(done),
                    short_error(error),
                )
                if isinstance(error, sa_exc.IntegrityError) or "Integrity" in type(error).__name__:
                    self._head = None  # another writer shares this session: reload its head
                if stop_deadline is not None and time.monotonic() > stop_deadline:
                    return
                with self._lock:
                    self._work.wait(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF)
        finally:
            self._store.close()
            self._fail_waiters()

    def _next_batch(self) -> list[Pending] | None:
        # Called with the lock held.
        while not self._queue and not self._stopping:
            self._work.wait()
        if not self._queue:
            return None
        if self._linger > 0:
            deadline = time.monotonic() + self._linger
            while (
                not self._stopping
                and self._urgent < self._queue[0].ticket
                and len(self._queue) < _MAX_BATCH
            ):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._work.wait(remaining)
        return list(itertools.islice(self._queue, _MAX_BATCH))

    def _commit(
        self, batch: list[Pending], *, bisect: bool
    ) -> tuple[list[tuple[Pending, Outcome]], BaseException | None]:
        """Write ``batch``; on a content error, isolate and replace the failing record.

        Returns what was settled (in order, a prefix of ``batch``) and the store error that
        stopped it, if any.
        """
        try:
            hashes = self._write(batch)
        except Exception as exc:
            if not bisect and store_problem(exc):
                return [], exc
            if len(batch) == 1:
                return self._reject(batch[0], exc)
            mid = len(batch) // 2
            left, error = self._commit(batch[:mid], bisect=True)
            if error is not None:
                return left, error
            right, error = self._commit(batch[mid:], bisect=True)
            return left + right, error
        return list(zip(batch, hashes, strict=True)), None

    def _reject(
        self, item: Pending, exc: BaseException
    ) -> tuple[list[tuple[Pending, Outcome]], BaseException | None]:
        why = short_error(exc)
        stub_payload = rejected_payload(item.kind, item.payload, why)
        stub = Pending(
            item.ticket,
            item.ts,
            "audit_record_rejected",
            None if item.tool_call_id is None else ascii_cut(item.tool_call_id, 64),
            None if item.tool_name is None else ascii_cut(item.tool_name, 64),
            None if item.policy_version is None else ascii_cut(item.policy_version, 64),
            stub_payload,
            item.durable,
        )
        try:
            self._write([stub])
        except Exception as stub_exc:  # the store refuses even the stub: it is the store
            return [], stub_exc
        _log.error(
            "audit: the store refused a %r record of session %s (%s); stored a stub instead",
            item.kind,
            self._session_id,
            why,
        )
        refused = AuditUnavailableError(
            f"the audit store is unavailable for this record: the audit store refused the "
            f"{item.kind!r} record ({why}); it was not stored"
        )
        return [(item, refused)], None

    def _write(self, batch: list[Pending]) -> list[str]:
        sid, user = self._session_id, self._user
        if self._head is None:
            found = self._store.load_head(sid)
            self._head_exists = found is not None
            self._head = found if found is not None else (0, GENESIS)
        count, prev = self._head
        stamps, hashes = self._hasher.link(count, prev, batch)
        text_ts, utc = self._store.text_ts, dt.UTC
        if self._ts_form == "text":  # the store's text of a UTC stamp, cut from it
            times: list[dt.datetime | str] = [
                f"{stamp[:10]} {stamp[11:-1]}" if item.ts.tzinfo is utc else text_ts(item.ts, stamp)
                for item, stamp in zip(batch, stamps, strict=True)
            ]
        elif self._ts_form == "datetime":
            times = [item.ts for item in batch]
        else:
            times = [text_ts(item.ts, stamp) for item, stamp in zip(batch, stamps, strict=True)]
        rows: list[Row] = [
            (sid, seq, ts, item.kind, item.tool_call_id, item.tool_name, user,
             item.policy_version, item.payload, before, digest)
            for seq, item, ts, before, digest in zip(
                range(count + 1, count + len(batch) + 1), batch, times, [prev, *hashes], hashes,
                strict=False,  # (one more "before" than rows)
            )
        ]  # fmt: skip
        count, prev = rows[-1][1], hashes[-1]
        sync = any(item.durable and item.sync for item in batch)
        self._store.write(sid, rows, self._head_exists, sync=sync)
        self._head = (count, prev)
        self._head_exists = True
        return hashes

    def _settle(self, done: list[tuple[Pending, Outcome]]) -> None:
        resolve: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[str], Outcome]] = []
        with self._lock:
            for item, outcome in done:
                self._queue.popleft()
                if not item.durable:
                    continue
                waiter = self._futures.pop(item.ticket, None)
                if waiter is not None:
                    resolve.append((waiter[0], waiter[1], outcome))
                elif item.ticket in self._abandoned:
                    self._abandoned.discard(item.ticket)
                else:
                    self._outcomes[item.ticket] = outcome
            self._settled = done[-1][0].ticket
            self._done.notify_all()
        for loop, fut, outcome in resolve:
            try:
                loop.call_soon_threadsafe(_resolve, fut, outcome)
            except RuntimeError:  # that loop is closed: nobody is waiting any more
                pass

    def _fail_waiters(self) -> None:
        error = AuditUnavailableError(
            f"the audit store is unavailable: the audit writer of session {self._session_id} "
            "stopped before the record was committed"
        )
        with self._lock:
            futures = list(self._futures.values())
            self._futures.clear()
            self._done.notify_all()
        for loop, fut in futures:
            try:
                loop.call_soon_threadsafe(_resolve, fut, error)
            except RuntimeError:
                pass


def _ts_form(store: RowStore) -> str:
    """How ``store`` holds a UTC timestamp, judged on one (so the writer need not ask it per
    record): ``text`` (``format_ts``'s text with a space for the ``T`` and no ``Z``: SQLite),
    ``datetime`` (the datetime itself), else ``call`` (ask ``text_ts`` every time)."""
    probe = dt.datetime(2001, 2, 3, 4, 5, 6, 7, tzinfo=dt.UTC)
    stamp = format_ts(probe)
    held = store.text_ts(probe, stamp)
    if held == f"{stamp[:10]} {stamp[11:-1]}":
        return "text"
    return "datetime" if held is probe else "call"


def _resolve(fut: asyncio.Future[str], outcome: Outcome) -> None:
    if fut.done():
        return
    if isinstance(outcome, str):
        fut.set_result(outcome)
    else:
        fut.set_exception(outcome)
