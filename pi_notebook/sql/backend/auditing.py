"""The audit interface the backend and the gate write to, and how failures are handled.

Records that must exist before something runs (final arguments, approvals, mismatches) are
written ``durable=True`` and a failure stops the run (fail closed). Records about what already
happened are best effort: a broken audit must not turn a committed write into an error.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any, Protocol

__all__ = ["AuditSink", "commit_before", "record_after", "record_before"]

log = logging.getLogger("pi_notebook.sql.backend")


class AuditSink(Protocol):
    """What the backend needs from :class:`pi_notebook.audit.AuditLog`."""

    def record(
        self,
        kind: str,
        payload: Mapping[str, Any] | None = None,
        *,
        tool_call_id: str | None = None,
        tool_name: str | None = None,
        policy_version: str | None = None,
        durable: bool = False,
    ) -> Any: ...


def record_before(
    audit: AuditSink | None, kind: str, payload: Mapping[str, Any], **ids: Any
) -> None:
    """Write a record that must be committed before the action; raises if it cannot be."""
    if audit is not None:
        audit.record(kind, dict(payload), durable=True, **ids)


async def commit_before(
    audit: AuditSink | None, kind: str, payload: Mapping[str, Any], **ids: Any
) -> None:
    """``record_before`` for async callers: waits for the commit without blocking the loop.

    Raises:
        pi_notebook.errors.AuditUnavailableError: the record could not be committed in time;
            whatever it would authorise must not happen.
    """
    if audit is not None:
        await asyncio.to_thread(record_before, audit, kind, payload, **ids)


def record_after(
    audit: AuditSink | None, kind: str, payload: Mapping[str, Any], **ids: Any
) -> None:
    """Write a record about something already done; a failure is logged, not raised."""
    if audit is None:
        return
    try:
        audit.record(kind, dict(payload), **ids)
    except Exception:  # the outcome stands whatever the audit does
        log.exception("audit record %r failed", kind)
