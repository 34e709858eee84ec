"""The audit store's tables, its schema version, and race-safe creation and upgrade.

Three tables: ``pi_audit_records`` (the append-only, hash-chained records),
``pi_audit_heads`` (per session: record count and last hash, written in the same transaction
as each batch, so a removed last record is detectable, D11) and ``pi_audit_schema`` (one row:
the schema version). Several kernels may open one PostgreSQL store at the same moment, so
creation runs under an advisory lock there, and tolerates "already exists" elsewhere.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import mysql

from .chain import VerifyReport, verify_session

__all__ = [
    "SCHEMA_VERSION",
    "ensure_schema",
    "heads",
    "metadata",
    "records",
    "schema_version",
    "verify_store",
]

SCHEMA_VERSION = 1
_log = logging.getLogger("pi_notebook.audit")

# BIGINT ids where the engine has them; SQLite only auto-increments an INTEGER primary key.
_Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
# Microseconds matter: the timestamp is part of the hashed record. MySQL drops them by default.
_Timestamp = sa.DateTime(timezone=True).with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
_Json = sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb")

metadata = sa.MetaData()

records = sa.Table(
    "pi_audit_records",
    metadata,
    sa.Column("id", _Id, primary_key=True, autoincrement=True),
    sa.Column("session_id", sa.String(64), nullable=False),
    sa.Column("seq", sa.Integer(), nullable=False),
    sa.Column("ts", _Timestamp, nullable=False),
    sa.Column("kind", sa.String(64), nullable=False),
    sa.Column("tool_call_id", sa.String(255)),
    sa.Column("tool_name", sa.String(255)),
    sa.Column("user", sa.String(255)),
    sa.Column("policy_version", sa.String(64)),
    sa.Column("payload", _Json, nullable=False),
    sa.Column("prev_hash", sa.String(64), nullable=False),
    sa.Column("hash", sa.String(64), nullable=False),
    sa.UniqueConstraint("session_id", "seq", name="uq_pi_audit_records_session_seq"),
)
sa.Index("ix_pi_audit_records_tool_call_id", records.c.tool_call_id)
sa.Index("ix_pi_audit_records_ts", records.c.ts)

heads = sa.Table(
    "pi_audit_heads",
    metadata,
    sa.Column("session_id", sa.String(64), primary_key=True),
    sa.Column("count", sa.Integer(), nullable=False),
    sa.Column("last_hash", sa.String(64), nullable=False),
)

schema_version = sa.Table(
    "pi_audit_schema",
    metadata,
    sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
    sa.Column("version", sa.Integer(), nullable=False),
)

# version -> the step that upgrades a store from ``version`` to ``version + 1``.
_UPGRADES: dict[int, Callable[[sa.Connection], None]] = {}

_PG_LOCK_KEY = 0x70695F6175646974  # "pi_audit": one advisory lock for schema work


def ensure_schema(engine: sa.Engine) -> None:
    """Create the tables if missing and upgrade an older store to ``SCHEMA_VERSION``.

    Safe when several processes do it at once. Raises ``RuntimeError`` for a store written
    by a newer version of pi_notebook, rather than writing records it cannot vouch for.
    """
    for attempt in range(3):
        try:
            with engine.begin() as conn:
                if conn.dialect.name == "postgresql":
                    # Serialises concurrent creators; released at commit.
                    conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK_KEY})
                metadata.create_all(conn, checkfirst=True)
                _upgrade(conn)
            return
        except sa_exc.DBAPIError as exc:
            # Another process created a table between our check and our CREATE.
            if attempt == 2 or not _is_duplicate(exc):
                raise
            _log.debug("audit schema creation raced with another process; retrying")


def _is_duplicate(exc: sa_exc.DBAPIError) -> bool:
    text = str(exc.orig).lower()
    return "already exists" in text or "duplicate" in text or "unique" in text


def _upgrade(conn: sa.Connection) -> None:
    row = conn.execute(sa.select(schema_version.c.version).where(schema_version.c.id == 1)).first()
    if row is None:
        conn.execute(sa.insert(schema_version).values(id=1, version=SCHEMA_VERSION))
        return
    version = int(row[0])
    if version > SCHEMA_VERSION:
        raise RuntimeError(
            f"the audit store has schema version {version}; this pi_notebook "
            f"understands up to {SCHEMA_VERSION}. Upgrade pi_notebook."
        )
    while version < SCHEMA_VERSION:
        _UPGRADES[version](conn)
        version += 1
        conn.execute(
            sa.update(schema_version).where(schema_version.c.id == 1).values(version=version)
        )


_VERIFY_COLUMNS = (
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


def verify_store(engine: sa.Engine, session_id: str | None = None) -> VerifyReport:
    """Check the hash chains in a store: every session, or only ``session_id`` (D11).

    Returns a ``VerifyReport``; ``ok`` is true only if no record was altered, inserted or
    removed. Raises what the driver raises if the store cannot be read.
    """
    report = VerifyReport()
    cols = [records.c[n] for n in _VERIFY_COLUMNS]
    with engine.connect() as conn:
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
