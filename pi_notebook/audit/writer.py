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

Failures: a batch that fails for a reason of the store stays queued and is retried with
back-off; a durable waiter is not kept waiting for it (its deadline is its own, see
``AuditLog``). A record the store refuses for its content is replaced by a stub and its durable
waiter gets ``AuditUnavailableError``. The thread, its state and how it writes a batch are
:mod:`.writer_thread`; this module is what callers do.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import logging
import threading
import time

from ..errors import AuditUnavailableError
from .failures import short_error
from .writer_thread import MAX_BATCH, Outcome, Pending, WriterThread, resolve_future

__all__ = ["Pending", "Writer"]

_log = logging.getLogger("pi_notebook.audit")
_HERE_PAUSE = 1.0  # seconds after a failed commit in place during which the writer commits
_CHECKPOINT_EVERY = 500  # commits in place between two checkpoints by the writer thread
_HIGH_WATER = 10_000  # queued records at which ``submit`` waits for the writer to catch up
_LOW_WATER = _HIGH_WATER - MAX_BATCH  # ... until this many are left
_PRESSURE_WAIT_S = 0.5  # the longest such wait: a stuck store never holds a caller longer


class Writer(WriterThread):
    """Owns one session's chain in one store and the thread that writes it: queue a record,
    wait for it, commit a durable one in place, close."""

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
            elif self._idle or len(self._queue) == MAX_BATCH:
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
        than the store takes them waits until the writer is ``MAX_BATCH`` records lower,
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
        resolve_future(fut, found)
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
                batch = list(itertools.islice(self._queue, MAX_BATCH))
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
