"""One pooled connection inside one transaction, ended by this module.

:func:`transaction` opens (or takes from a :class:`ConnectionSlot`) a DBAPI connection,
begins the mode the statement's kind needs, keeps the cancel window exact (a cancel before
or after the body raises :class:`Cancelled`), commits or rolls back, resets the session and
hands the connection back, or invalidates one that cannot be rolled back or reset.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa

from pi_notebook.sql.backend.cancel import Canceller, driver_cancel
from pi_notebook.sql.backend.errors import ConnectFailed
from pi_notebook.sql.backend.fetch import RunSettings, read_limit
from pi_notebook.sql.backend.readonly import RunKind, begin, finish
from pi_notebook.sql.backend.reset import reset_session
from pi_notebook.sql.backend.roles import forget_role

__all__ = ["Cancelled", "ConnectionSlot", "transaction"]


class Cancelled(Exception):
    """The run was cancelled before or after the driver call; the transaction rolls back."""


class ConnectionSlot:
    """One idle pooled connection kept between runs, so a run skips the pool's checkout and
    checkin (the backend's worker runs one statement at a time). Thread-safe.

    :meth:`release` (the backend's ``dispose``) returns the kept connection to the pool; a
    connection taken before a release goes back to the pool instead of into the slot.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._raw: Any = None
        self._generation = 0

    def take(self, engine: sa.Engine) -> tuple[Any, int]:
        """The kept connection, else a new one from the pool, and the slot's generation.

        Raises:
            ConnectFailed: the pool could not open a connection.
        """
        with self._lock:
            raw, self._raw = self._raw, None
            generation = self._generation
        if raw is not None:
            return raw, generation
        try:
            return engine.raw_connection(), generation
        except Exception as exc:
            raise ConnectFailed(exc) from exc

    def give(self, raw: Any, generation: int) -> None:
        """Keep ``raw`` for the next run (or return it to the pool if the slot moved on)."""
        with self._lock:
            if self._raw is None and generation == self._generation:
                self._raw = raw
                return
        raw.close()

    def release(self) -> None:
        """Return the kept connection to the pool."""
        with self._lock:
            raw, self._raw = self._raw, None
            self._generation += 1
        if raw is not None:
            raw.close()


@contextmanager
def transaction(
    engine: sa.Engine,
    backend: str,
    kind: RunKind,
    settings: RunSettings,
    canceller: Canceller,
    *,
    commit: bool,
    slot: ConnectionSlot | None = None,
) -> Iterator[Any]:
    """A pooled DBAPI connection inside the transaction ``kind`` needs.

    The transaction commits only when ``commit`` is true, the body returned normally and no
    cancel was requested; anything else rolls back. Then the session is reset (see
    :mod:`.reset`). A connection that cannot be rolled back or reset is invalidated, never
    returned to the pool (nor kept in ``slot``).

    Raises:
        ConnectFailed: the connection could not be opened.
        Cancelled: a cancel was requested before the body ran or after it returned.
    """
    raw, generation = _connect(engine, slot)
    healthy = True
    try:
        begin(
            raw,
            backend,
            kind,
            timeout_s=settings.statement_timeout_s,
            mariadb=bool(getattr(engine.dialect, "is_mariadb", False)),
            select_limit=read_limit(settings),
            role=settings.role,
        )
        canceller.started(driver_cancel(engine, backend, raw))
        try:
            if canceller.reason is not None:
                raise Cancelled
            yield raw
        finally:
            canceller.stopped()
        if canceller.reason is not None:  # cancelled after the last driver call: roll back
            raise Cancelled
        finish(raw, backend, kind, commit=commit)
    except BaseException:
        forget_role(raw.info, settings.role)  # checked again before its next use here
        try:
            finish(raw, backend, kind, commit=False)
        except Exception:  # a connection we cannot roll back must never go back to the pool
            healthy = False
        raise
    finally:
        _hand_back(raw, backend, kind, healthy=healthy, slot=slot, generation=generation)


def _connect(engine: sa.Engine, slot: ConnectionSlot | None) -> tuple[Any, int]:
    """The slot's connection (or the pool's) and the slot's generation (0 without one)."""
    if slot is not None:
        return slot.take(engine)
    try:
        return engine.raw_connection(), 0
    except Exception as exc:
        raise ConnectFailed(exc) from exc


def _hand_back(
    raw: Any,
    backend: str,
    kind: RunKind,
    *,
    healthy: bool,
    slot: ConnectionSlot | None,
    generation: int,
) -> None:
    """Reset the session of a healthy connection and keep it in ``slot`` (else return it to
    the pool); invalidate one that is not healthy or cannot be reset."""
    if healthy:
        healthy = reset_session(raw, backend, kind)
    if not healthy:
        raw.invalidate()
    elif slot is not None:
        slot.give(raw, generation)
    else:
        raw.close()
