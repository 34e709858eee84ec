"""The background writer: group commits of queued records, off the agent's thread and loop.

Callers append to an in-memory queue (``submit``). Ordinary records wait up to ``linger``
seconds so that several share one transaction; a durable record (or a flush) makes the writer
commit at once, everything queued before it included. The writer chains each batch (seq,
prev_hash, hash) from the head it last committed and writes rows and head in one transaction.

On a SQLite file in WAL mode a durable record's caller commits the queue itself
(``commit_here``), on a connection of its own that never waits for a lock or the disk: handing
the record to the writer thread and its hash back costs two thread wake-ups, several times the
commit. Whoever writes holds the chain lock; when the writer holds it, or the store is locked,
or the commit fails, the record is left to the writer thread as before.

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
_HERE_PAUSE = 1.0  # seconds after a failed commit in place during which the writer commits
_CHECKPOINT_EVERY = 500  # commits in place between two checkpoints by the writer thread
_HIGH_WATER = 10_000  # queued records at which ``submit`` waits for the writer to catch up
_LOW_WATER = _HIGH_WATER - _MAX_BATCH  # ... until this many are left
_PRESSURE_WAIT_S = 0.5  # the longest such wait: a stuck store never holds a caller longer


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
        wake: bool = True,
    ) -> int:
        """Queue a record; returns its ticket (``sync``: see ``RowStore.write``).

        ``wake=False`` leaves a durable record for ``commit_here`` to try first (which
        wakes the writer when it cannot commit it).

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
                if wake or self._here is None:
                    self._work.notify()
            elif self._idle or len(self._queue) == _MAX_BATCH:
                # Only an idle writer needs waking for an ordinary record: a busy one takes
                # the queue when its commit is done, and one that lingers (or has just
                # committed, see ``_await_work``) takes it within the linger anyway. A wake
                # costs both threads more than the record's own work; a full batch wakes it.
                self._work.notify()
            if len(self._queue) >= _HIGH_WATER and not self._failing:
                self._catch_up()
            return ticket

    def _catch_up(self) -> None:
        """Back-pressure (called with the lock held): a caller that queues records faster
        than the store takes them waits until the writer is ``_MAX_BATCH`` records lower,
        for at most ``_PRESSURE_WAIT_S``. The queue stays bounded while the store works, and
        the waiting caller leaves the GIL to the writer, which otherwise gets it back only
        at the interpreter's switch interval after each statement and falls behind."""
        if threading.current_thread() is self._thread or self._stalled_at == self._settled:
            return  # the writer's own thread, or a writer that made no progress in a whole wait
        self._work.notify()
        deadline = time.monotonic() + _PRESSURE_WAIT_S
        while len(self._queue) > _LOW_WATER and not self._stopping and not self._failing:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._stalled_at = self._settled  # no more waits until it moves again
                return
            self._done.wait(remaining)

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
        found = self.commit_here(ticket)
        if found is not None:
            return found
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

    def commit_here(self, ticket: int) -> str | None:
        """Commit a durable ``ticket`` (and everything queued before it) in the calling
        thread, on a connection of this thread's own, instead of waking the writer thread
        and waiting for it, and return its hash; ``None`` when it cannot be done at once (the
        store has no such path, the writer is writing, the store is locked, anything
        failed): then wait for the writer as usual (it was told of the ticket when it was
        queued).

        Raises:
            AuditUnavailableError: the record was refused (it is settled as not stored).

        Only a SQLite file in WAL mode has the path (``RowStore.in_place_possible``): a
        commit there writes its pages to the log without waiting for the disk; the
        connection waits for no lock and runs no checkpoint (the writer thread does, see
        ``_run``). Hand-over costs two thread wake-ups, several times the commit itself.
        """
        found = self._try_here(ticket)
        if found is None:
            with self._lock:
                if self._settled < ticket:
                    self._work.notify()  # ``submit(wake=False)`` left it to us
                else:
                    found = self._outcomes.pop(ticket, None)
        if isinstance(found, AuditUnavailableError):
            raise found
        return found

    def _try_here(self, ticket: int) -> Outcome | None:
        here = self._here
        if here is None or not here.ready or not self._chain.acquire(blocking=False):
            return None
        try:
            with self._lock:
                if self._settled >= ticket:  # the writer has just committed it
                    return self._outcomes.pop(ticket, None)
                if self._stopping or time.monotonic() < self._here_off_until:
                    return None
                batch = list(itertools.islice(self._queue, _MAX_BATCH))
            if not batch or batch[-1].ticket < ticket:
                return None
            try:
                hashes = self._write(batch, here)
            except Exception:  # the writer writes it (isolating a bad record, retrying)
                _log.debug("audit: a commit in place failed; the writer takes it", exc_info=True)
                self._head = None  # reloaded from the store, whatever happened
                self._here_off_until = time.monotonic() + _HERE_PAUSE
                return None
            self._settle(list(zip(batch, hashes, strict=True)))
            with self._lock:
                found = self._outcomes.pop(ticket, None)
                self._here_commits += 1
                if self._here_commits >= _CHECKPOINT_EVERY and not self._checkpoint_due:
                    # The log grows until the writer thread checkpoints it (see ``_run``).
                    self._checkpoint_due = True
                    self._work.notify()
            return found
        finally:
            self._chain.release()

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
                        batch = list(itertools.islice(self._queue, _MAX_BATCH))
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
                and len(self._queue) < _MAX_BATCH
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
