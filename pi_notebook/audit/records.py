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
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

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

_IDS = frozenset({"tool_call_id", "tool_name", "policy_version"})
_PAYLOAD_FIELDS: dict[type, tuple[str, ...]] = {}


@dataclass(frozen=True, kw_only=True)
class AuditRecord:
    """Base of the typed records: the ids every record may carry beside its payload."""

    kind: ClassVar[str] = ""
    """The record kind stored in the ``kind`` column."""
    durable: ClassVar[bool] = False
    """Whether the fact authorises something, so it must be committed before that happens."""

    tool_call_id: str | None = None
    """The call this record belongs to, if any."""
    tool_name: str | None = None
    """The tool of that call."""
    policy_version: str | None = None
    """The version of the policy that decided, where one did."""

    def payload(self) -> dict[str, Any]:
        """The payload: every field but the ids, by name (values as given; encoded later)."""
        names = _PAYLOAD_FIELDS.get(type(self))
        if names is None:
            names = tuple(f.name for f in dataclasses.fields(self) if f.name not in _IDS)
            _PAYLOAD_FIELDS[type(self)] = names
        return {name: getattr(self, name) for name in names}


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

    def payload(self) -> dict[str, Any]:
        out = super().payload()
        if self.code_argument is None:
            del out["code_argument"]
        if self.code is None:
            del out["code"]
        return out


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
class FinalArgs(AuditRecord):
    """What the backend is about to run, and its own verdict (durable before it runs)."""

    kind: ClassVar[str] = "final_args"
    durable: ClassVar[bool] = True
    sql: str
    """The statement."""
    args_hash: str
    """The canonical hash of the final arguments."""
    verdict: str
    """The backend's classification: ``read`` or ``write``."""
    reasons: Sequence[str] = ()
    """The classifier's reasons."""
    dialect: str = ""
    """The sqlglot dialect it was checked with."""
    db_role: str | None = None
    """The database role it runs under (PostgreSQL ``role_per_user``; ``None``, and left
    out of the payload, otherwise)."""

    def payload(self) -> dict[str, Any]:
        out = super().payload()
        if self.db_role is None:
            del out["db_role"]
        return out


@dataclass(frozen=True, kw_only=True)
class CapabilityMismatch(AuditRecord):
    """A write without a live capability for these exact arguments (D4); nothing ran."""

    kind: ClassVar[str] = "capability_mismatch"
    durable: ClassVar[bool] = True
    sql: str | None = None
    """The statement the backend was given (``None``, and left out of the payload, for a
    tool that is not SQL)."""
    approved_hash: str | None
    """The hash the approval bound to (``None`` without one)."""
    final_hash: str
    """The hash of the final arguments."""
    reason: str
    """Why the capability did not match."""

    def payload(self) -> dict[str, Any]:
        out = super().payload()
        if self.sql is None:
            del out["sql"]
        return out


@dataclass(frozen=True, kw_only=True)
class QueryRefusal(AuditRecord):
    """The backend refused a statement before it reached the database."""

    kind: ClassVar[str] = "query_refused"
    sql: str
    """The statement."""
    reasons: Sequence[str] = ()
    """Why."""


@dataclass(frozen=True, kw_only=True)
class WritePreviewRecord(AuditRecord):
    """One phase of measuring a write before it is asked about: ``start`` is
    durable (committed before the measuring statement runs, and rolled back after it), then
    ``result`` or ``error``."""

    kind: ClassVar[str] = "write_preview"
    sql: str
    """The statement measured."""
    args_hash: str
    """The canonical hash of its arguments."""
    operation: str | None
    """The write's operation (``UPDATE``, ``DELETE``...), where the plan knows it."""
    phase: str
    """``start``, ``result`` or ``error``."""
    affected_rows: int | None = None
    """Rows it would change (``result``), or ``None`` where it could not be counted."""
    method: str | None = None
    """How they were counted (``rollback``, ``count``...)."""
    note: str | None = None
    """What the person is told beside the count."""
    error: str | None = None
    """The short error (``error``)."""
    db_role: str | None = None
    """The database role it was measured under (left out of the payload when ``None``)."""

    def payload(self) -> dict[str, Any]:
        out = super().payload()
        if self.db_role is None:
            del out["db_role"]
        return out


@dataclass(frozen=True, kw_only=True)
class PreviewDrift(AuditRecord):
    """An approved write changed a different number of rows than the approval was bound to:
    it was rolled back and refused."""

    kind: ClassVar[str] = "preview_drift"
    sql: str
    """The statement."""
    args_hash: str
    """The canonical hash of its arguments."""
    expected_rows: int | None
    """The count shown to the person (``None`` when only a bound applied)."""
    max_rows: int | None
    """The grant's row bound, where a grant applied."""
    actual_rows: int | None
    """What the write would have changed (``None`` where it could not be counted)."""
    reason: str | None = None
    """Why its rows could not be counted, where they could not."""


@dataclass(frozen=True, kw_only=True)
class QueryResult(AuditRecord):
    """A statement ran."""

    kind: ClassVar[str] = "query_result"
    row_count: int
    """Rows returned (or affected, for a write)."""
    truncated: bool
    """Whether the DataFrame holds fewer rows than the statement returned."""
    duration_ms: float
    """The statement's wall time at the backend, fetch included."""
    statement_kind: str
    """``read`` or ``write``."""
    args_hash: str
    """The canonical hash of the arguments that ran."""


@dataclass(frozen=True, kw_only=True)
class QueryFailure(AuditRecord):
    """A statement failed; it was rolled back."""

    kind: ClassVar[str] = "query_error"
    error: str
    """The short, credential-free error text."""
    args_hash: str = ""
    """The canonical hash of the arguments."""


@dataclass(frozen=True, kw_only=True)
class QueryAbort(QueryFailure):
    """A statement was cancelled by an abort; it was rolled back."""

    kind: ClassVar[str] = "query_aborted"


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

    def payload(self) -> dict[str, Any]:
        out = super().payload()
        if not self.updates:
            del out["updates"]
        if self.last_update is None:
            del out["last_update"]
        return out


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

    def payload(self) -> dict[str, Any]:
        out = super().payload()
        if self.prompt_digest is None:
            del out["prompt_digest"]
        return out


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
