"""Approvals: durable records of the user's decisions (D3) and one-shot capabilities (D4)."""

from pi_notebook.approvals.capabilities import CapabilityCheck, CapabilityStore
from pi_notebook.approvals.records import (
    ApprovalDecision,
    ApprovalRecord,
    ApprovalStore,
    default_approvals_url,
)

__all__ = [
    "ApprovalDecision",
    "ApprovalRecord",
    "ApprovalStore",
    "CapabilityCheck",
    "CapabilityStore",
    "default_approvals_url",
]
