"""The durable and best-effort write rules: the audit interface gates and backends write to.

Records that must exist before something runs (final arguments, approvals, mismatches) are
committed durably first, and a failure stops the run (fail closed): ``commit_before`` raises
``AuditUnavailableError`` (its text starts "the audit store is unavailable") and the caller
refuses ("Refused: not run: the audit store is unavailable", ``backend.AUDIT_UNAVAILABLE``). Records about
what already happened are best effort: a broken audit must not turn a committed write into an
error. The package writes typed records (``pi_notebook.audit.records`` and the layers'
own ``AuditRecord`` classes); a kind with a dict payload is accepted for third-party
extensions.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, cast

if TYPE_CHECKING:
    from .records import AuditRecord

__all__ = ["AuditSink", "commit_before", "queue_before", "record_after", "record_before"]

log = logging.getLogger("pi_notebook.audit")


class AuditSink(Protocol):
    """What the backend needs from :class:`pi_notebook.audit.AuditLog`.

    ``record(..., durable=True)`` must return only once the record is committed and raise if
    it cannot be. A sink may also have ``async commit(kind_or_record, payload, **ids)``
    (``AuditLog`` does): async callers then await it instead of blocking a thread.
    """

    def record(
        self,
        kind: Any,
        payload: Mapping[str, Any] | None = None,
        *,
        tool_call_id: str | None = None,
        tool_name: str | None = None,
        policy_version: str | None = None,
        durable: bool = False,
    ) -> Any: ...


def _split(
    record: str | AuditRecord, payload: Mapping[str, Any] | None, ids: dict[str, Any]
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    if isinstance(record, str):
        return record, dict(payload or {}), ids
    return (
        record.kind,
        record.payload(),
        {
            "tool_call_id": record.tool_call_id,
            "tool_name": record.tool_name,
            "policy_version": record.policy_version,
        },
    )


def record_before(
    audit: AuditSink | None,
    record: str | AuditRecord,
    payload: Mapping[str, Any] | None = None,
    **ids: Any,
) -> Any:
    """Write a record that must be committed before the action (blocks: not on the loop).

    Returns what the sink returned (``AuditLog``: the record's hash).

    Raises:
        AuditUnavailableError: (``AuditLog``) the record could not be committed; another sink
            raises what it raises. Either way whatever it would authorise must not happen.
    """
    if audit is None:
        return None
    kind, body, ids = _split(record, payload, ids)
    return audit.record(kind, body, durable=True, **ids)


async def commit_before(
    audit: AuditSink | None,
    record: str | AuditRecord,
    payload: Mapping[str, Any] | None = None,
    *,
    sync: bool = True,
    **ids: Any,
) -> str | None:
    """``record_before`` for async callers: awaits the commit without blocking the loop.

    With an ``AuditLog`` this awaits its writer's group commit (no thread per call); other
    sinks run ``record(..., durable=True)`` in a thread. Returns the record's hash, if known.
    ``sync=False`` is for records of what cannot change anything (a read's final arguments):
    see ``AuditLog.commit``.

    Raises:
        AuditUnavailableError: (``AuditLog``) the record could not be committed in time;
            another sink raises what it raises. Whatever it would authorise must not happen.
    """
    if audit is None:
        return None
    commit = getattr(audit, "commit", None)
    if commit is None or not asyncio.iscoroutinefunction(commit):
        result = await asyncio.to_thread(record_before, audit, record, payload, **ids)
        return result if isinstance(result, str) else None
    if isinstance(record, str):
        return await commit(record, dict(payload or {}), sync=sync, **ids)
    return await commit(record, sync=sync)


def queue_before(
    audit: AuditSink | None,
    record: str | AuditRecord,
    payload: Mapping[str, Any] | None = None,
    *,
    sync: bool = True,
    **ids: Any,
) -> Callable[[], object] | None:
    """Queue a record that must be committed before the action; returns a blocking wait for
    its commit, to call in the worker thread before the action (no loop hop in between).

    With an ``AuditLog`` the record takes its place in the chain now (``queue_durable``);
    another sink writes it, blocking, when the wait is called. Either way the wait raises when
    the record is not committed, and whatever it authorises must then not happen.

    Raises:
        AuditUnavailableError: (``AuditLog``) the record cannot even be queued.
    """
    if audit is None:
        return None
    queue = getattr(audit, "queue_durable", None)
    if not callable(queue):
        return lambda: record_before(audit, record, payload, **ids)
    if isinstance(record, str):
        wait = queue(record, dict(payload or {}), sync=sync, **ids)
    else:
        wait = queue(record, sync=sync)
    return cast("Callable[[], object]", wait)


def record_after(
    audit: AuditSink | None,
    record: str | AuditRecord,
    payload: Mapping[str, Any] | None = None,
    **ids: Any,
) -> None:
    """Write a record about something already done; a failure is logged, not raised."""
    if audit is None:
        return
    try:
        append = getattr(audit, "append", None)
        if not isinstance(record, str) and callable(append):
            append(record)
            return
        kind, body, ids = _split(record, payload, ids)
        audit.record(kind, body, **ids)
    except Exception:  # the outcome stands whatever the audit does
        log.exception("audit record %r failed", record)
