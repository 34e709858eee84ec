"""Typed audit records: one small frozen dataclass per record kind, one writer per fact.

Write a record with ``log.append(record)`` (queued) or ``await log.commit(record)`` (durable:
returns the record's hash once it is on disk, raises ``AuditUnavailableError`` otherwise). The
generic ``AuditLog.record(kind, payload)`` stays only for third-party extensions; its payloads
are free-form. Layers above the audit keep their record classes beside the code that writes
them (the audit imports none of them). What does not belong here: how records are encoded,
chained or stored.

Record kinds, who writes each (the one place per fact), and which are durable (committed
before what they authorise happens):

- ``session_start``, ``session_shutdown``: the recorder.
- ``tool_execution_start`` (the raw arguments, S28), ``tool_execution_update`` (at most one
  per interval while a call runs: a call that ends within the interval keeps its updates in
  the end record), ``tool_execution_end`` (outcome, duration, the result the model got, the
  number of updates): the recorder.
- ``tool_call``: the session, once per call: the decision of the whole ``tool_call`` chain
  (``allowed`` or ``blocked``) with the arguments execute gets.
- ``approval`` (durable), ``grant_use`` (durable): the approval gates
  (``pi_notebook.approvals.records.ApprovalDecided`` and ``GrantUsed``, typed there beside the
  gates; their payload is an ``ApprovalEntry``); ``capability_mismatch`` without ``sql``: a
  tool's approvals (``ToolApprovals``).
- ``review`` (durable): each step of a four-eyes review
  (``pi_notebook.approvals.records.ReviewStep``).
- ``grant_revoke``: the database's grants (``pi_notebook.database.grants.GrantRevoke``);
  ``data_policy``: the data policy, when protected columns were hidden from the model
  (``pi_notebook.database.guard.DataPolicyApplied``).
- ``provider_request_blocked``: the pre-model hooks
  (``pi_notebook.session.premodel.ProviderRequestBlocked``).
- ``mcp_request``: the MCP server, once per served call (``pi_notebook.mcp.server.McpRequest``).
- ``write_preview`` (its ``start`` phase durable), ``preview_drift``: the backend's measure of
  a write before it is asked about, and a write refused because its count drifted.
- ``final_args`` (durable), ``capability_mismatch`` (durable), ``query_refused``,
  ``query_result`` (only without the recorder: in a session the end record holds the outcome),
  ``query_error``, ``query_aborted``: the backend.
- ``tool_result``: the recorder, only when a ``tool_result`` handler changed the result (the
  result as ``execute`` returned it).
- ``extension_error``: the recorder's error listener.
- ``notebook_output`` (durable): the notebook, for a settled run's cell output.
- ``audit_record_rejected``: the audit writer, in place of a record the store refused.

The base class is :mod:`.record_base`'s; the backend's records are :mod:`.query_records`'
(both re-exported here).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .query_records import (
    CapabilityMismatch,
    FinalArgs,
    PreviewDrift,
    QueryAbort,
    QueryFailure,
    QueryRefusal,
    QueryResult,
    WritePreviewRecord,
)
from .record_base import AuditRecord

__all__ = [
    "AuditRecord",
    "CapabilityMismatch",
    "ConversationReset",
    "ExtensionError",
    "FinalArgs",
    "NotebookOutput",
    "PreviewDrift",
    "QueryAbort",
    "QueryFailure",
    "QueryRefusal",
    "QueryResult",
    "RecordRejected",
    "SessionShutdown",
    "SessionStart",
    "ToolCallDecision",
    "ToolExecutionEnd",
    "ToolExecutionStart",
    "ToolExecutionUpdate",
    "ToolResultRecord",
    "WritePreviewRecord",
]


@dataclass(frozen=True, kw_only=True)
class SessionStart(AuditRecord):
    """A session started."""

    kind: ClassVar[str] = "session_start"
    model: Any = None
    """The model, as ``provider:id``."""
    active_tools: Any = None
    """The active tool names at start."""


@dataclass(frozen=True, kw_only=True)
class ToolExecutionStart(AuditRecord):
    """A call began: its raw arguments, before preparation and validation (S28)."""

    kind: ClassVar[str] = "tool_execution_start"
    args: Any = None
    """The arguments as the model sent them."""
    code_argument: str | None = None
    """The argument its tool shows as a block of code (its ``describe_call``'s
    ``code_argument``, e.g. a statement), so a reader without the tool at hand shows it;
    omitted when the tool shows none."""
    code: str | None = None
    """The code its tool shows when that is not one argument as sent; omitted otherwise."""
    omitted_at_default: ClassVar[tuple[str, ...]] = ("code_argument", "code")


@dataclass(frozen=True, kw_only=True)
class ToolExecutionUpdate(AuditRecord):
    """A partial result of a call still running: at most one per interval (counted from the
    start); the last one not recorded goes into the end record."""

    kind: ClassVar[str] = "tool_execution_update"
    update: int = 0
    """The update's number within the call (1-based, counting skipped ones)."""
    skipped_before: int = 0
    """Updates left out by the rate limit since the previous recorded one."""
    partial_result: Mapping[str, Any] = field(default_factory=dict)
    """The bounded summary of the partial result (``summarise_result``)."""


@dataclass(frozen=True, kw_only=True)
class ToolCallDecision(AuditRecord):
    """The outcome of the whole ``tool_call`` chain, with the arguments execute gets (D8)."""

    kind: ClassVar[str] = "tool_call"
    decision: str = "allowed"
    """``allowed`` or ``blocked``."""
    reason: str | None = None
    """Why it was blocked, as the model is told."""
    input: Any = None
    """The arguments after every handler ran."""


@dataclass(frozen=True, kw_only=True)
class ToolResultRecord(AuditRecord):
    """The result as ``execute`` returned it, kept only when a handler then changed it."""

    kind: ClassVar[str] = "tool_result"
    input: Any = None
    """The arguments that were executed."""
    is_error: bool = False
    """Whether ``execute`` returned an error result."""
    result: Mapping[str, Any] = field(default_factory=dict)
    """Its bounded summary (``summarise_result``)."""


@dataclass(frozen=True, kw_only=True)
class ToolExecutionEnd(AuditRecord):
    """A call ended: how, how long it took, and the result the model got."""

    kind: ClassVar[str] = "tool_execution_end"
    is_error: bool = False
    """Whether the call ended as an error result."""
    duration_ms: float | None = None
    """Wall time from start to end, approval wait included."""
    result: Mapping[str, Any] = field(default_factory=dict)
    """The bounded summary of the final result (``summarise_result``)."""
    updates: int = 0
    """How many updates the call sent (in the payload only when there were any)."""
    last_update: Mapping[str, Any] | None = None
    """The summary of the last update when no ``tool_execution_update`` record holds it (a
    call that ended within the update interval of its last record); omitted otherwise."""
    omitted_at_default: ClassVar[tuple[str, ...]] = ("updates", "last_update")


@dataclass(frozen=True, kw_only=True)
class SessionShutdown(AuditRecord):
    """The session closed."""

    kind: ClassVar[str] = "session_shutdown"
    open_calls: Sequence[str] = ()
    """Calls that had started and not ended."""


@dataclass(frozen=True, kw_only=True)
class ConversationReset(AuditRecord):
    """``%pi_reset``: the model's messages were cleared; the session, its tools and grants
    stay. What the model saw before it is in the records before this one."""

    kind: ClassVar[str] = "conversation_reset"
    cleared_messages: int
    """How many messages the model forgot."""


@dataclass(frozen=True, kw_only=True)
class ExtensionError(AuditRecord):
    """An extension handler raised (S31)."""

    kind: ClassVar[str] = "extension_error"
    extension_path: Any = None
    """Where the extension came from."""
    event: Any = None
    """The event type it was handling."""
    error: Any = None
    """The exception (summarised on encoding)."""


@dataclass(frozen=True, kw_only=True)
class NotebookOutput(AuditRecord):
    """A settled run's durable cell output; its hash stamps the output's metadata."""

    kind: ClassVar[str] = "notebook_output"
    durable: ClassVar[bool] = True
    run_id: str
    """The run's id (also in the output's ``metadata["pi_notebook"]``)."""
    output_digest: str
    """``output_digest(output["data"])`` of the display output."""
    calls: Sequence[Mapping[str, Any]] = ()
    """The stamped calls: tool_call_id, tool_name, args_hash, decision, outcome, rows,
    audit_hash."""
    prompt_digest: str | None = None
    """``prompt_digest(prompt)`` of the run's prompt (left out of the payload when ``None``)."""
    omitted_at_default: ClassVar[tuple[str, ...]] = ("prompt_digest",)


@dataclass(frozen=True, kw_only=True)
class RecordRejected(AuditRecord):
    """Stands in the chain for a record the store refused (so the chain shows the gap)."""

    kind: ClassVar[str] = "audit_record_rejected"
    rejected_kind: str
    """The kind of the refused record."""
    error: str
    """The store's error, short and credential-free."""
    payload_sha256: str
    """SHA-256 of the refused payload's text."""
    payload_chars: int
    """Its length in characters."""
    payload_preview: str = ""
    """Its first characters, ASCII-escaped."""
