"""``AuditLog``: the append-only, hash-chained audit log of one session (D8, D9, D11, S29).

Writing never stalls the agent: ``record`` encodes, redacts and truncates the payload in the
caller's thread (so later mutation of the payload cannot change the record), then queues it
for the background writer. ``durable=True`` waits until the record and all before it are
committed (approval decisions and final arguments must be on disk before a statement runs).
"""

from __future__ import annotations

import atexit
import datetime as dt
import getpass
import json
import logging
import os
import uuid
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy import event as sa_event

from .chain import VerifyReport, verify_session
from .encode import to_jsonable
from .redact import STRICT_ENCODER, Redactor, dumps, truncate
from .schema import ensure_schema, heads, records
from .writer import Writer

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["AuditLog", "default_audit_url"]

_log = logging.getLogger("pi_notebook.audit")
_ENV = "PI_NOTEBOOK_AUDIT_URL"
_DURABLE_TIMEOUT = 30.0


def default_audit_url() -> str:
    """``PI_NOTEBOOK_AUDIT_URL`` if set, else a SQLite file ``audit.sqlite`` in the data dir."""
    env = os.environ.get(_ENV)
    if env:
        return env
    from pi_notebook._paths import data_dir

    return f"sqlite:///{data_dir() / 'audit.sqlite'}"


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    try:
        # WAL lets readers (to_dataframe, other kernels) run beside the writer; NORMAL sync is
        # durable against a killed process, which is the failure the audit must survive.
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA busy_timeout=10000")
    finally:
        cur.close()


def _make_engine(url: str | sa.URL) -> sa.Engine:
    parsed = sa.make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return sa.create_engine(parsed, pool_pre_ping=True)
    if parsed.database in (None, "", ":memory:"):
        # One shared connection, or the writer and readers would each see an empty database.
        engine = sa.create_engine(
            parsed, poolclass=sa.StaticPool, connect_args={"check_same_thread": False}
        )
    else:
        engine = sa.create_engine(parsed)
    sa_event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _current_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no login name in some containers
        return "unknown"


class AuditLog:
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

    Raises:
        sqlalchemy.exc.SQLAlchemyError: The store cannot be reached or its schema created.
    """

    def __init__(
        self,
        url_or_engine: str | sa.URL | sa.Engine | None = None,
        *,
        session_id: str | None = None,
        user: str | None = None,
        redaction: Redactor | None = None,
        max_payload_bytes: int = 16384,
    ) -> None:
        if isinstance(url_or_engine, sa.Engine):
            self.engine, owned = url_or_engine, False
        else:
            self.engine, owned = _make_engine(url_or_engine or default_audit_url()), True
        try:
            ensure_schema(self.engine)
        except BaseException:
            if owned:
                self.engine.dispose()
            raise
        self.session_id: str = session_id or uuid.uuid4().hex
        self.user: str = user or _current_user()
        self.redactor = redaction if redaction is not None else Redactor()
        self.max_payload_bytes = max_payload_bytes
        self._writer = Writer(self.engine, self.session_id, self.user)
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
        kind: str,
        payload: Mapping[str, Any] | None = None,
        *,
        tool_call_id: str | None = None,
        tool_name: str | None = None,
        policy_version: str | None = None,
        durable: bool = False,
    ) -> None:
        """Append a record. Never raises into the caller.

        The payload is converted to JSON-safe values, redacted and truncated now; it is
        hashed and written by the background writer. With ``durable=True`` this returns only
        once the record and all records queued before it are committed (or, if the store
        keeps failing, after 30 seconds, with an error logged and ``last_error`` set).
        """
        try:
            if self._closed:
                _log.error("audit: record(%r) after close() is dropped", kind)
                return
            text = self._payload_text(payload)
            ticket = self._writer.submit(
                dt.datetime.now(dt.UTC),
                str(kind),
                _opt_str(tool_call_id),
                _opt_str(tool_name),
                _opt_str(policy_version),
                text,
            )
            if durable and not self._writer.wait(ticket, _DURABLE_TIMEOUT):
                _log.error(
                    "audit: durable record %r of session %s is not committed: %r",
                    kind,
                    self.session_id,
                    self._writer.last_error,
                )
        except Exception:  # the audit must not break the agent run
            _log.exception("audit: record(%r) failed", kind)

    def _payload_text(self, payload: Mapping[str, Any] | None) -> str:
        value: Any = None
        text = ""
        if payload is None:
            payload = {}
        if type(payload) is dict:
            try:
                # Most payloads are plain JSON already: let the C encoder take them as they
                # are, and convert only when it refuses.
                text = STRICT_ENCODER.encode(payload)
            except (TypeError, ValueError, RecursionError):
                text = ""
        if not text:
            value = to_jsonable(payload)
            if not isinstance(value, dict):
                value = {"value": value}
            text = dumps(value)
        text, value = self.redactor.redact_json(text, value)
        if len(text) * 4 > self.max_payload_bytes and len(text.encode()) > self.max_payload_bytes:
            text = truncate(
                json.loads(text) if value is None else value, text, self.max_payload_bytes
            )
        return text

    def flush(self, timeout: float | None = 60.0) -> None:
        """Return once everything queued so far is committed (or ``timeout`` seconds passed)."""
        if not self._writer.wait(None, timeout):
            _log.error(
                "audit: flush incomplete, %d record(s) pending: %r",
                self._writer.pending(),
                self._writer.last_error,
            )

    def close(self) -> None:
        """Flush, stop the writer, and release the engine if this log created it. Idempotent."""
        self._closed = True
        self._finalizer()

    def __enter__(self) -> AuditLog:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def verify(self, session_id: str | None = None) -> VerifyReport:
        """Check the hash chains: every session in the store, or only ``session_id``.

        Returns:
            A ``VerifyReport``; ``ok`` is true only if no record was altered, inserted or
            removed. ``problems`` names the session, sequence number and what happened.
        """
        if not self._closed:
            self.flush()
        report = VerifyReport()
        cols = [
            records.c[n]
            for n in (
                "session_id",
                "seq",
                "ts",
                "kind",
                "tool_call_id",
                "tool_name",
                "user",
                "policy_version",
                "payload",
                "prev_hash",
                "hash",
            )
        ]
        with self.engine.connect() as conn:
            head_q = sa.select(heads.c.session_id, heads.c.count, heads.c.last_hash)
            ids_q = sa.select(records.c.session_id).distinct()
            if session_id is not None:
                head_q = head_q.where(heads.c.session_id == session_id)
                ids_q = ids_q.where(records.c.session_id == session_id)
            head_map = {r[0]: (int(r[1]), str(r[2])) for r in conn.execute(head_q)}
            sessions = sorted(set(head_map) | {r[0] for r in conn.execute(ids_q)})
            for sid in sessions:
                rows = conn.execution_options(yield_per=5000).execute(
                    sa.select(*cols).where(records.c.session_id == sid).order_by(records.c.seq)
                )
                verify_session(sid, rows, head_map.get(sid), report)
                report.sessions += 1
        report.ok = not report.problems
        return report

    def to_dataframe(
        self,
        session: str | None = None,
        tool: str | None = None,
        tool_call_id: str | None = None,
        since: Any = None,
        kind: str | Sequence[str] | None = None,
    ) -> pd.DataFrame:
        """The records as a DataFrame, one row per record, ordered by session and seq (D9).

        Args:
            session: Only this session id.
            tool: Only records of this tool name.
            tool_call_id: Only records of this call.
            since: Only records at or after this time (datetime, pandas Timestamp or ISO
                string; naive means UTC).
            kind: Only records of this kind (or these kinds).

        Returns:
            Columns id, session_id, seq, timestamp (datetime64, UTC), kind, tool_call_id,
            tool_name, user, policy_version, payload (dict), prev_hash, hash.
        """
        from .frames import read_records

        if not self._closed:
            self.flush()
        return read_records(
            self.engine,
            session=session,
            tool=tool,
            tool_call_id=tool_call_id,
            since=since,
            kind=kind,
        )

    def calls_dataframe(self, session: str | None = None) -> pd.DataFrame:
        """One row per tool call: tool_call_id, tool_name, args_hash, decision, outcome,
        is_error, duration_ms, started_at, ended_at (see ``frames.summarise_calls``)."""
        from .frames import read_records, summarise_calls

        if not self._closed:
            self.flush()
        return summarise_calls(read_records(self.engine, session=session, calls_only=True))


def _opt_str(value: object) -> str | None:
    return None if value is None else str(value)


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
