"""Approvals: the approval protocol, durable records of decisions (D3) and one-shot
capabilities (D4)."""

from pi_notebook.approvals.capabilities import CapabilityCheck, CapabilityStore
from pi_notebook.approvals.protocol import (
    ApprovalOutcome,
    ApprovalRequest,
    ApprovalUI,
    Decision,
    Grant,
    WritePreview,
)
from pi_notebook.approvals.records import (
    ApprovalDecision,
    ApprovalRecord,
    ApprovalStore,
    default_approvals_url,
)

__all__ = [
    "ApprovalDecision",
    "ApprovalOutcome",
    "ApprovalRecord",
    "ApprovalRequest",
    "ApprovalStore",
    "ApprovalUI",
    "CapabilityCheck",
    "CapabilityStore",
    "Decision",
    "Grant",
    "WritePreview",
    "default_approvals_url",
]
