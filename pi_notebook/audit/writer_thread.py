"""The writer thread of one session's audit chain: its state, its loop, and how it writes a
batch (see :mod:`.writer` for what callers do).

The thread takes queued records in batches (lingering for ordinary ones), chains each batch
(seq, prev_hash, hash) from the head it last committed and writes rows and head in one
transaction. A batch that fails for a reason of the store (locked, read-only, full,
unreachable) stays queued and is retried with back-off. A batch that fails for a reason of its
content is bisected until the failing record is alone; that record is replaced in the chain by
an ``audit_record_rejected`` stub, the rest commits, and the rejected record's durable waiter
gets ``AuditUnavailableError`` (fail closed). If even the stub cannot be written, the store is
the problem after all and the batch is retried.
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

__all__ = ["MAX_BATCH", "Outcome", "Pending", "WriterThread", "resolve_future"]

_log = logging.getLogger("pi_notebook.audit")
MAX_BATCH = 2000
"""The most records one transaction writes."""
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


class WriterThread:
    """Owns one session's chain in one store and the thread that writes it; the callers'
    side is :class:`~.writer.Writer`."""

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
        # Whoever writes the chain holds this: the writer thread, or a caller committing its
        # durable record in place (``commit_here``) on a connection of its own.
        self._chain = threading.Lock()
        self._here = RowStore(engine, in_place=True) if RowStore.in_place_possible(engine) else None
        self._here_off_until = 0.0  # after a failure in place, the writer alone for a while
        self._here_commits = 0  # commits in place since the writer last checkpointed
        self._checkpoint_due = False
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
        self._failing = False  # the last write failed (the writer retries): no back-pressure
        self._stalled_at = -1  # ``_settled`` when a back-pressure wait last timed out
        self._idle = False  # the writer waits for a first record with no deadline of its own
        self._head: tuple[int, str] | None = None  # (count, last_hash) as committed
        self._head_exists = False
        self.last_error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, name=f"pi-audit-{session_id[:8]}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        backoff, failures = 0.05, 0
        stop_deadline: float | None = None
        try:
            if self._here is not None:
                with self._chain:
                    self._here.open()
            while True:
                with self._lock:
                    if not self._await_work():
                        return
                    if self._stopping and stop_deadline is None:
                        stop_deadline = time.monotonic() + self._stop_grace
                    checkpoint, self._checkpoint_due = self._checkpoint_due, False
                    if checkpoint:
                        self._here_commits = 0
                if checkpoint:
                    self._store.checkpoint()
                with self._chain:
                    if self._here is not None and self._here.usable and not self._here.ready:
                        # Callers commit in place only on a connection already open: opening
                        # one (its connect hooks, a lock on the file) is no work for a caller.
                        self._here.open()
                    with self._lock:  # what a commit in place left of it
                        batch = list(itertools.islice(self._queue, MAX_BATCH))
                    if not batch:
                        continue
                    done, error = self._commit(batch, bisect=failures >= _BISECT_AFTER)
                    if done:
                        self._settle(done)
                if error is None:
                    backoff, failures = 0.05, 0
                    if self._failing:
                        with self._lock:
                            self._failing = False
                    continue
                with self._lock:
                    self._failing = True
                    self._done.notify_all()  # callers held back by ``_catch_up`` go on
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
            if self._here is not None:
                with self._chain:
                    self._here.close()
            self._fail_waiters()

    def _await_work(self) -> bool:
        """Wait until a batch is due (lingering for ordinary records); ``False`` once stopped
        with nothing queued. Called with the lock held."""
        lingered = False
        if not self._queue and not self._stopping and self._linger > 0:
            # Just committed (or started): ordinary records that arrive within the linger
            # are not woken for (``submit``); they share the transaction of the first
            # durable record, or are committed when the linger is over.
            self._work.wait(self._linger)
            lingered = bool(self._queue)
        while not self._queue and not self._stopping and not self._checkpoint_due:
            self._idle = True
            try:
                self._work.wait()
            finally:
                self._idle = False
        if not self._queue:
            return not self._stopping  # a checkpoint is due, or nothing is left to write
        if self._linger > 0 and not lingered:
            deadline = time.monotonic() + self._linger
            while (
                self._queue  # a commit in place may take the queue meanwhile
                and not self._stopping
                and self._urgent < self._queue[0].ticket
                and len(self._queue) < MAX_BATCH
            ):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._work.wait(remaining)
        return True

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

    def _write(self, batch: list[Pending], store: RowStore | None = None) -> list[str]:
        # Called with the chain lock held.
        store = self._store if store is None else store
        sid, user = self._session_id, self._user
        if self._head is None:
            found = store.load_head(sid)
            self._head_exists = found is not None
            self._head = found if found is not None else (0, GENESIS)
        count, prev = self._head
        stamps, hashes = self._hasher.link(count, prev, batch)
        text_ts, utc = store.text_ts, dt.UTC
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
            (
                sid,
                seq,
                ts,
                item.kind,
                item.tool_call_id,
                item.tool_name,
                user,
                item.policy_version,
                item.payload,
                before,
                digest,
            )
            for seq, item, ts, before, digest in zip(
                range(count + 1, count + len(batch) + 1),
                batch,
                times,
                [prev, *hashes],
                hashes,
                strict=False,  # (one more "before" than rows)
            )
        ]
        count, prev = rows[-1][1], hashes[-1]
        sync = any(item.durable and item.sync for item in batch)
        store.write(sid, rows, self._head_exists, sync=sync)
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
                loop.call_soon_threadsafe(resolve_future, fut, outcome)
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
                loop.call_soon_threadsafe(resolve_future, fut, error)
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


def resolve_future(fut: asyncio.Future[str], outcome: Outcome) -> None:
    """Resolve ``fut`` with a hash, or fail it with the error (unless it is done)."""
    if fut.done():
        return
    if isinstance(outcome, str):
        fut.set_result(outcome)
    else:
        fut.set_exception(outcome)
