"""Scoped grants: later statements inside a scope a person granted run without asking.

A :class:`~pi_notebook.approvals.Grant` is a scope over what the SQL does: operations ×
patterns of the tables written × patterns of tables only read × at most ``max_rows`` affected
rows × ``ttl_s`` seconds. The operations apply to the written tables only: a statement's
written tables must match ``tables``; a table it only reads must match ``tables`` or
``reads`` (so a table read by the statement that earned the grant is never writable under it). :class:`GrantStore`
creates them (refusing any that would cover DDL, privileges, settings, or file and network
access), finds the live grant that covers a statement (its scope comes from the parsed
statement, see :mod:`.scope`), and lists, expires and revokes them. Each use is audited by the
gate (``grant_use``) and earns its call a one-shot capability bounded by ``max_rows``.

What does not belong here: asking the person, and the capability the backend consumes.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from pi_notebook.approvals import Grant
from pi_notebook.audit.records import AuditRecord
from pi_notebook.database.scope import (
    GRANTABLE_OPERATIONS,
    StatementScope,
    pattern_matches,
    statement_scope,
)
from pi_notebook.errors import GrantError

__all__ = ["MAX_GRANT_TTL_S", "ActiveGrant", "GrantRevoke", "GrantStore", "check_grant"]

log = logging.getLogger(__name__)

MAX_GRANT_TTL_S = 8 * 3600.0
"""The longest a grant may live (a working day)."""
_PATTERN = re.compile(r"[\w$*?.]+")


@dataclass(frozen=True, kw_only=True)
class ActiveGrant:
    """A grant in force.

    Attributes:
        grant_id: the id to revoke it by.
        grant: the scope the person granted.
        created_at: wall-clock time (seconds since the epoch) it was granted.
        expires_at: wall-clock time it ends.
        approver: who granted it, when the UI said.
        origin_call_id: the call whose approval prompt granted it.
        uses: statements that ran inside it so far.
    """

    grant_id: str
    grant: Grant
    created_at: float
    expires_at: float
    approver: str | None = None
    origin_call_id: str | None = None
    uses: int = 0

    def describe(self) -> dict[str, Any]:
        """A plain JSON description (for the audit and for listings)."""
        return {
            "grant_id": self.grant_id,
            "operations": list(self.grant.operations),
            "tables": list(self.grant.tables),
            "reads": list(self.grant.reads),
            "max_rows": self.grant.max_rows,
            "ttl_s": self.grant.ttl_s,
            "expires_at": self.expires_at,
            "approver": self.approver,
            "origin_call_id": self.origin_call_id,
            "uses": self.uses,
        }


@dataclass(frozen=True, kw_only=True)
class GrantRevoke(AuditRecord):
    """A grant ended before its time: revoked by the person (``%pi_grants --revoke``,
    ``ext.grants.revoke``) or with its session. Not durable: it takes authority away."""

    kind: ClassVar[str] = "grant_revoke"
    grant: dict[str, Any]
    """The grant as :meth:`ActiveGrant.describe` gives it (its id, scope and uses)."""
    reason: str
    """Why it ended ("revoked", "session closed")."""


def check_grant(grant: Grant, *, tool_name: str = "query_database") -> Grant:
    """The grant normalised (operations upper-case, duplicates dropped), or why not.

    Raises:
        GrantError: the grant would cover what grants never cover (anything but INSERT,
            UPDATE and DELETE: DDL, privileges, settings, file or network access), names no
            table or only wildcards, has no positive row bound or time limit, lives longer
            than :data:`MAX_GRANT_TTL_S`, or is for another tool.
    """
    if grant.tool_name != tool_name:
        raise GrantError(f"a grant for {grant.tool_name!r} cannot be created here")
    if isinstance(grant.operations, str) or not grant.operations:  # pyright: ignore[reportUnnecessaryIsInstance]
        raise GrantError("a grant names its operations, e.g. ('INSERT',)")
    ops = tuple(dict.fromkeys(str(op).strip().upper() for op in grant.operations))
    outside = [op for op in ops if op not in GRANTABLE_OPERATIONS]
    if outside:
        raise GrantError(
            f"grants cover only INSERT, UPDATE and DELETE, never {', '.join(outside)} "
            "(no DDL, privileges, settings, or file and network access)"
        )
    if isinstance(grant.tables, str) or not grant.tables:  # pyright: ignore[reportUnnecessaryIsInstance]
        raise GrantError("a grant names its tables, e.g. ('staging_*',)")
    tables = tuple(dict.fromkeys(str(t).strip() for t in grant.tables))
    if isinstance(grant.reads, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise GrantError("a grant's reads are a tuple of table patterns, e.g. ('orders',)")
    reads = tuple(dict.fromkeys(str(t).strip() for t in grant.reads or () if str(t).strip()))
    for pattern in (*tables, *reads):
        if not _PATTERN.fullmatch(pattern) or not pattern.strip("*?."):
            raise GrantError(
                f"table pattern {pattern!r} must name tables (letters, digits, _, $, '.', "
                "with * or ? as wildcards), not only wildcards"
            )
    rows = grant.max_rows
    if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 1):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise GrantError("max_rows must be a positive whole number of rows (or None)")
    ttl = grant.ttl_s
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 < ttl <= MAX_GRANT_TTL_S:  # pyright: ignore[reportUnnecessaryIsInstance]
        raise GrantError(f"ttl_s must be more than 0 and at most {MAX_GRANT_TTL_S:g} seconds")
    return replace(grant, operations=ops, tables=tables, reads=reads, ttl_s=float(ttl))


class GrantStore:
    """The grants of one database extension (thread-safe). ``ext.grants`` is one.

    Args:
        dialect: the database's sqlglot dialect (how table names are compared); ``None``
            before the extension is connected, when no statement is inside any grant.
        clock: wall-clock seconds (the ``clock`` attribute; tests replace it to expire grants).
        audit: the session's audit log, or a function returning it (each revoke is recorded
            there as a :class:`GrantRevoke`); ``None``: not recorded.
    """

    def __init__(
        self, dialect: str | None, *, clock: Callable[[], float] = time.time, audit: Any = None
    ) -> None:
        self.dialect = dialect
        self.clock = clock
        self.audit = audit
        self._lock = threading.Lock()
        self._grants: dict[str, ActiveGrant] = {}

    def prepare(
        self, grant: Grant, *, approver: str | None = None, origin_call_id: str | None = None
    ) -> ActiveGrant:
        """Check ``grant`` and give it an id and times, without putting it in force yet (the
        gate records it durably first, then calls :meth:`activate`).

        Raises:
            GrantError: see :func:`check_grant`.
        """
        checked = check_grant(grant)
        now = self.clock()
        return ActiveGrant(
            grant_id=f"g-{uuid.uuid4().hex[:8]}",
            grant=checked,
            created_at=now,
            expires_at=now + checked.ttl_s,
            approver=approver,
            origin_call_id=origin_call_id,
        )

    def activate(self, active: ActiveGrant) -> ActiveGrant:
        """Put a prepared grant in force (its clock started when it was prepared)."""
        with self._lock:
            self._grants[active.grant_id] = active
        return active

    def create(
        self, grant: Grant, *, approver: str | None = None, origin_call_id: str | None = None
    ) -> ActiveGrant:
        """Put ``grant`` in force now (:meth:`prepare` then :meth:`activate`).

        Raises:
            GrantError: see :func:`check_grant`.
        """
        return self.activate(self.prepare(grant, approver=approver, origin_call_id=origin_call_id))

    def list(self) -> list[ActiveGrant]:
        """The grants in force, oldest first (expired ones are dropped)."""
        with self._lock:
            self._expire_locked()
            return list(self._grants.values())

    def get(self, grant_id: str) -> ActiveGrant | None:
        """The grant in force with this id, if any."""
        with self._lock:
            self._expire_locked()
            return self._grants.get(grant_id)

    def revoke(self, grant_id: str, *, reason: str = "revoked") -> bool:
        """End a grant now (audited as ``grant_revoke``); False if no grant in force has this
        id."""
        with self._lock:
            self._expire_locked()
            ended = self._grants.pop(grant_id, None)
        if ended is not None:
            self._record(ended, reason)
        return ended is not None

    def revoke_all(self, *, reason: str = "revoked") -> int:
        """End every grant (each audited as ``grant_revoke``); returns how many were in force."""
        with self._lock:
            self._expire_locked()
            ended = list(self._grants.values())
            self._grants.clear()
        for active in ended:
            self._record(active, reason)
        return len(ended)

    def _record(self, active: ActiveGrant, reason: str) -> None:
        audit = self.audit() if callable(self.audit) else self.audit
        append = getattr(audit, "append", None)
        if append is None:
            return
        try:
            # No tool_call_id: the record belongs to no call (a call's record is its own).
            append(
                GrantRevoke(
                    grant=active.describe(), reason=reason, tool_name=active.grant.tool_name
                )
            )
        except Exception:  # the grant is gone either way
            log.exception("audit: grant_revoke of %s could not be recorded", active.grant_id)

    def scope_of(self, sql: str) -> StatementScope | None:
        """The statement's scope (``None``: outside every grant)."""
        return statement_scope(sql, self.dialect) if self.dialect else None

    def candidates(self, scope: StatementScope | None) -> list[ActiveGrant]:
        """Grants in force that cover ``scope``'s operations and tables, most rows first
        (``max_rows=None`` counts as unbounded). The row bound is checked by the caller."""
        if scope is None:
            return []
        found = [g for g in self.list() if self._covers(g.grant, scope)]
        return sorted(found, key=lambda g: -(g.grant.max_rows or float("inf")))

    def _covers(self, grant: Grant, scope: StatementScope) -> bool:
        if not scope.operations <= set(grant.operations) or not scope.written:
            return False
        dialect = self.dialect or ""

        def matched(table: str, patterns: tuple[str, ...]) -> bool:
            return any(pattern_matches(p, table, dialect) for p in patterns)

        # The operations apply to the written tables only; a read table may match either.
        return all(matched(t, grant.tables) for t in scope.written) and all(
            matched(t, (*grant.tables, *grant.reads)) for t in scope.read
        )

    def used(self, grant_id: str) -> ActiveGrant | None:
        """Count one use of a grant still in force; the updated grant, or ``None``."""
        with self._lock:
            self._expire_locked()
            current = self._grants.get(grant_id)
            if current is None:
                return None
            current = replace(current, uses=current.uses + 1)
            self._grants[grant_id] = current
            return current

    def _expire_locked(self) -> None:
        now = self.clock()
        for key in [k for k, g in self._grants.items() if now >= g.expires_at]:
            del self._grants[key]
