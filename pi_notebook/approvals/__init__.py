"""Approvals: the typed approval protocol, the one gate that asks, one-shot capabilities (D4),
approval for any tool (``requires_approval``), and decisions read back from the audit (D3).

A gate builds an :class:`ApprovalRequest`, :func:`ask` -- the only way a gate asks -- puts it
to the call's UI (``request_approval``, else ``confirm``, adapted there alone) and returns an
exact :data:`Decision`, the one spelling of a decision everywhere; the caller commits an
``approval`` audit record before anything runs, then grants a capability bound to the call id
and the hash of the final arguments, which the executing layer consumes once.
"""

from pi_notebook.approvals.capabilities import CapabilityCheck, CapabilityStore
from pi_notebook.approvals.gate import (
    NO_UI_REASON,
    REJECTED_REASON,
    AskContext,
    GateAnswer,
    approval_method,
    ask,
)
from pi_notebook.approvals.hashing import args_hash, canonical_args, canonical_json
from pi_notebook.approvals.protocol import (
    DECISIONS,
    ApprovalOutcome,
    ApprovalRequest,
    ApprovalUI,
    Decision,
    Grant,
    WritePreview,
    is_decision,
)
from pi_notebook.approvals.records import (
    ApprovalDecided,
    ApprovalEntry,
    ApprovalRecord,
    AuditApprovals,
    GrantUsed,
    approvals_dataframe,
)
from pi_notebook.approvals.tools import TOOL_POLICY_VERSION, ToolApprovals, commit_record

__all__ = [
    "DECISIONS",
    "NO_UI_REASON",
    "REJECTED_REASON",
    "TOOL_POLICY_VERSION",
    "ApprovalDecided",
    "ApprovalEntry",
    "ApprovalOutcome",
    "ApprovalRecord",
    "ApprovalRequest",
    "ApprovalUI",
    "AskContext",
    "AuditApprovals",
    "CapabilityCheck",
    "CapabilityStore",
    "Decision",
    "GateAnswer",
    "Grant",
    "GrantUsed",
    "ToolApprovals",
    "WritePreview",
    "approval_method",
    "approvals_dataframe",
    "args_hash",
    "ask",
    "canonical_args",
    "canonical_json",
    "commit_record",
    "is_decision",
]
