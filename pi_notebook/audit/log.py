"""``AuditLog``: the append-only, hash-chained audit log of one session (D8, D9, D11, S29).

Writing never stalls the agent: ``record``/``append`` encode, redact and truncate the payload
in the caller's thread (so later mutation of the payload cannot change the record), then queue
it for the background writer. A durable record (``await commit(...)``, or ``record(...,
durable=True)`` from a thread) returns its hash once it and all before it are committed (on a
SQLite file the caller commits them itself when it can, see ``Writer.commit_here``), and
raises ``AuditUnavailableError`` when that does not happen within ``durable_timeout_s``:
whatever it would authorise must then not happen (fail closed).
"""

from __future__ import annotations

import asyncio
import atexit
import datetime as dt
import json
import logging
import uuid
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..agent.views import known_call_views
from ..errors import AuditUnavailableError, ConfigurationError
from ..identity import current_user
from .encode import safe_field, safe_text
from .engine import default_audit_url, make_engine
from .log_reads import LogReads
from .payload import encode_payload, storable_ids
from .records import AuditRecord
from .redact import Redactor
from .schema import ensure_schema
from .writer import Writer

if TYPE_CHECKING:
    from ..agent.views import ViewOf

__all__ = ["AuditLog", "default_audit_url"]

_log = logging.getLogger("pi_notebook.audit")
DURABLE_TIMEOUT_S = 5.0


class AuditLog(LogReads):
    """The audit log of one session, in a SQLAlchemy store shared with other sessions.

    Args:
        url_or_engine: A SQLAlchemy URL or Engine. ``None`` means ``default_audit_url()``. An
            engine passed in is not disposed by ``close``.
        session_id: This session's id in the store; ``None`` makes a new uuid4 hex. Reusing
            an id continues that session's chain (one writer per session at a time).
        user: Recorded with every record; defaults to the login name.
        redaction: The ``Redactor`` applied to every payload before hashing (default patterns
            if ``None``).
        max_payload_bytes: Payloads whose JSON is larger are truncated with a note.
        durable_timeout_s: How long a durable record may take to commit before it raises
            ``AuditUnavailableError``.
        linger_s: How long ordinary records wait to share a transaction (group commit); a
            durable record or a flush commits at once.
        call_views: How its calls read (``view_of(tool_name, args)``, from each tool's
            ``describe_call``). The recorder keeps in each start record which argument the
            tool shows as code, so ``calls_dataframe`` shows the statement of a call that
            never reached the backend to any reader of the store, with or without the tool's
            package. A session sets it to its own tools' views when it writes to this log;
            ``None``: the describers the imported packages remembered
            (:func:`~pi_notebook.agent.views.known_call_views`), which is also how records
            written before start records kept their code are read.

    Raises:
        sqlalchemy.exc.SQLAlchemyError: The store cannot be reached or its schema created.
        ConfigurationError: ``session_id`` is not a string of at most 64 characters.
    """

    def __init__(
        self,
        url_or_engine: str | sa.URL | sa.Engine | None = None,
        *,
        session_id: str | None = None,
        user: str | None = None,
        redaction: Redactor | None = None,
        max_payload_bytes: int = 16384,
        durable_timeout_s: float = DURABLE_TIMEOUT_S,
        linger_s: float = 0.05,
        call_views: ViewOf | None = None,
    ) -> None:
        self.call_views: ViewOf | None = call_views if call_views is not None else known_call_views
        if session_id is not None and (
            not isinstance(session_id, str)
            or not 0 < len(session_id) <= 64
            or safe_text(session_id) != session_id
        ):
            raise ConfigurationError(
                "session_id must be text of 1 to 64 characters (no NUL, valid Unicode)"
            )
        if isinstance(url_or_engine, sa.Engine):
            self.engine, owned = url_or_engine, False
        else:
            self.engine, owned = make_engine(url_or_engine or default_audit_url()), True
        try:
            ensure_schema(self.engine)
        except BaseException:
            if owned:
                self.engine.dispose()
            raise
        self.session_id: str = session_id or uuid.uuid4().hex
        self.user: str = safe_field(user or current_user(), 255)[0]
        self.redactor = redaction if redaction is not None else Redactor()
        self.max_payload_bytes = max_payload_bytes
        self.durable_timeout_s = durable_timeout_s
        # At close, a failing store is retried for twice the durable timeout, then given up.
        self._writer = Writer(
            self.engine,
            self.session_id,
            self.user,
            linger=linger_s,
            stop_grace=2 * durable_timeout_s,
        )
        self._closed = False
        # Runs on close() and on garbage collection. At interpreter exit our own hook runs
        # it: weakref.finalize's exit hook iterates its registry unguarded, and a writer
        # thread touching that registry meanwhile makes it skip every finalizer (seen).
        self._finalizer = weakref.finalize(
            self, _shutdown, self._writer, self.engine if owned else None
        )
        self._finalizer.atexit = False
        _open_logs.add(self)

    def __repr__(self) -> str:
        return f"AuditLog(url={self.engine.url!r}, session_id={self.session_id!r})"

    @property
    def last_error(self) -> BaseException | None:
        """The last store error the writer met (it retries), or ``None``."""
        return self._writer.last_error

    def record(
        self,
        kind: str | AuditRecord,
        payload: Mapping[str, Any] | None = None,
        *,
        tool_call_id: str | None = None,
        tool_name: str | None = None,
        policy_version: str | None = None,
        durable: bool = False,
    ) -> str | None:
        """Append a record: a typed ``AuditRecord``, or a kind and a free-form payload.

        The kind-and-payload form is the documented door for third-party extensions (their
        own kinds, free-form payloads). Every record the package itself writes is a typed
        ``AuditRecord`` (:mod:`pi_notebook.audit.records` lists them), written through
        :mod:`pi_notebook.audit.durable`'s rules.

        The payload is converted to JSON-safe values, redacted and truncated now; it is
        hashed and written by the background writer. Without ``durable`` this never raises
        and returns ``None``. With ``durable=True`` it blocks until the record and all records
        queued before it are committed and returns the record's hash: call it from a thread,
        never on the event loop (``await commit(...)`` there).

        Raises:
            AuditUnavailableError: (durable only) the record was not committed within
                ``durable_timeout_s``, the store refused it, or the log is closed.
        """
        if not durable:
            self._submit(kind, payload, tool_call_id, tool_name, policy_version, False)
            return None
        ticket = self._submit(
            kind, payload, tool_call_id, tool_name, policy_version, True, wake=False
        )
        return self._writer.outcome(ticket, self.durable_timeout_s)  # tries it in place first

    def append(self, record: AuditRecord) -> None:
        """Queue a typed record (not durable, whatever its kind); never raises."""
        self._submit(record, None, None, None, None, False)

    async def commit(
        self,
        record: str | AuditRecord,
        payload: Mapping[str, Any] | None = None,
        *,
        tool_call_id: str | None = None,
        tool_name: str | None = None,
        policy_version: str | None = None,
        sync: bool = True,
    ) -> str:
        """Write a record durably without blocking the event loop; returns its hash.

        Resolves once the record and everything queued before it are committed: on a SQLite
        file in WAL mode by this very call when it can (a few SQLite statements that wait for
        no lock and no disk, see ``Writer.commit_here``), else by the writer thread's group
        commit (no thread per call). ``sync=False`` (for records of what cannot
        change anything, such as a read's final arguments) lets a PostgreSQL store commit
        without waiting for its own disk flush: the record is committed and visible before
        this returns and survives a crash of this process, as on the SQLite store; only a
        crash of the server's machine in the next fraction of a second could lose it.

        Raises:
            AuditUnavailableError: not committed within ``durable_timeout_s``, refused by the
                store, or the log is closed. Whatever the record authorises must not happen.
        """
        ticket = self._submit(
            record, payload, tool_call_id, tool_name, policy_version, True, sync, wake=False
        )
        found = self._writer.commit_here(ticket)  # a SQLite file: no hand-over to the writer
        if found is not None:
            return found
        future = self._writer.future(ticket, asyncio.get_running_loop())
        try:
            async with asyncio.timeout(self.durable_timeout_s):
                return await future
        except TimeoutError:
            self._writer.forget(ticket)
            raise self._writer.late_error(self.durable_timeout_s) from None
        except asyncio.CancelledError:
            self._writer.forget(ticket)
            raise

    def queue_durable(
        self,
        record: str | AuditRecord,
        payload: Mapping[str, Any] | None = None,
        *,
        tool_call_id: str | None = None,
        tool_name: str | None = None,
        policy_version: str | None = None,
        sync: bool = True,
    ) -> Callable[[], str]:
        """Queue a durable record now (its place in the chain is taken) and return a blocking
        wait for its commit, for a worker thread: it returns the record's hash, or raises
        ``AuditUnavailableError`` as ``commit`` does. Never call the wait on the event loop.

        Raises:
            AuditUnavailableError: the record cannot even be queued (closed log, bad payload).
        """
        ticket = self._submit(record, payload, tool_call_id, tool_name, policy_version, True, sync)
        writer, timeout = self._writer, self.durable_timeout_s
        return lambda: writer.outcome(ticket, timeout)

    def _submit(
        self,
        kind: str | AuditRecord,
        payload: Mapping[str, Any] | None,
        tool_call_id: str | None,
        tool_name: str | None,
        policy_version: str | None,
        durable: bool,
        sync: bool = True,
        wake: bool = True,
    ) -> int:
        """Encode and queue; returns the ticket (0 if a non-durable record was dropped).

        Raises:
            AuditUnavailableError: (durable only) the record cannot even be queued.
        """
        if isinstance(kind, AuditRecord):
            payload = kind.payload()
            tool_call_id, tool_name = kind.tool_call_id, kind.tool_name
            policy_version, kind = kind.policy_version, kind.kind
        try:
            if self._closed:
                raise AuditUnavailableError(
                    f"the audit store is unavailable: the audit log of session "
                    f"{self.session_id} is closed"
                )
            text = self._payload_text(payload)
            fields, cut = storable_ids(str(kind), tool_call_id, tool_name, policy_version)
            if cut:
                noted = json.loads(text)
                noted["_cut_fields"] = cut
                text = self._payload_text(noted)
            return self._writer.submit(
                dt.datetime.now(dt.UTC),
                str(fields[0]),
                fields[1],
                fields[2],
                fields[3],
                text,
                durable,
                sync,
                wake,
            )
        except AuditUnavailableError as exc:
            if durable:
                raise
            _log.error("audit: record(%r) failed: %s; the record is dropped", kind, exc)
        except Exception as exc:  # the audit must not break the agent run
            if durable:
                raise AuditUnavailableError(
                    f"the audit store is unavailable for this record: the {kind!r} record "
                    f"could not be queued ({type(exc).__name__})"
                ) from exc
            _log.exception("audit: record(%r) failed", kind)
        return 0

    def _payload_text(self, payload: Mapping[str, Any] | None) -> str:
        return encode_payload(payload, self.redactor, self.max_payload_bytes)

    def flush(self, timeout: float | None = None) -> bool:
        """Block until everything queued so far is committed; returns whether it was.

        Gives up (logging why) after ``timeout`` seconds, or, without one, once the writer
        has made no progress for ``durable_timeout_s``. Blocks: call it from a thread when
        on the event loop.
        """
        if timeout is not None:
            done = self._writer.wait(None, timeout)
        else:
            while True:
                before = self._writer.pending()
                done = self._writer.wait(None, self.durable_timeout_s)
                if done or self._writer.pending() >= before:
                    break
        if not done:
            _log.error(
                "audit: flush incomplete, %d record(s) pending: %r",
                self._writer.pending(),
                self._writer.last_error,
            )
        return done

    def close(self) -> None:
        """Flush, stop the writer, and release the engine if this log created it. Idempotent."""
        self._closed = True
        self._finalizer()

    def __enter__(self) -> AuditLog:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _written(self) -> None:
        if not self._closed:
            self.flush()


_open_logs: weakref.WeakSet[AuditLog] = weakref.WeakSet()


@atexit.register
def _close_open_logs() -> None:
    """At interpreter exit, write what every open log still has queued."""
    for log in list(_open_logs):
        log.close()


def _shutdown(writer: Writer, engine: sa.Engine | None) -> None:
    # Also runs from garbage collection, where an exception would only be printed:
    # log it instead, with the context that says what failed.
    try:
        writer.close()
        if engine is not None:
            engine.dispose()
    except Exception:
        _log.exception("audit: shutting down the writer failed")
