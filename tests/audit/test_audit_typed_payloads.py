"""The typed records of the gates, the review queue, the data policy, the pre-model hooks, the
MCP server and the notebook store exactly the payloads those places wrote as a kind and a dict
(the readers: ``approvals_dataframe``, ``verify_notebook``, the provenance stamps, the tests
that read each kind). Each case is the dict the untyped code built for the same inputs."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from pi_notebook.approvals import ApprovalDecided, ApprovalEntry, GrantUsed
from pi_notebook.approvals.records import ReviewStep
from pi_notebook.audit import AuditLog
from pi_notebook.audit.records import AuditRecord, CapabilityMismatch, NotebookOutput
from pi_notebook.database.guard import DataPolicyApplied
from pi_notebook.mcp.server import McpRequest
from pi_notebook.session.premodel import ProviderRequestBlocked

IDS = {"tool_call_id": "c1", "tool_name": "query_database", "policy_version": "p1"}
ENTRY = ApprovalEntry(
    decision="approved",
    args_hash="h1",
    args={"sql": "DELETE FROM t"},
    reasons=("write",),
    user="ann",
    requester="ann",
    approver="bob",
    via="request_approval",
    waited_ms=12.5,
    timeout_s=60.0,
    preview={"affected_rows": 3, "method": "rollback"},
)
REQUEST: dict[str, Any] = {
    "request_id": "r1",
    "requester": "ann",
    "reviewers": ("bob", "eve"),
    "args": {"sql": "DELETE FROM t"},
    "args_hash": "h1",
    "expires_at": "2026-01-01T00:00:00+00:00",
}


def _review(event: str, approver: str | None = None, **more: Any) -> dict[str, Any]:
    """The dict ``ReviewQueue._record`` built before the record was typed."""
    return {
        "event": event,
        "request_id": REQUEST["request_id"],
        "requester": REQUEST["requester"],
        "approver": approver,
        "reviewers": list(REQUEST["reviewers"]),
        "args": REQUEST["args"],
        "args_hash": REQUEST["args_hash"],
        "expires_at": REQUEST["expires_at"],
        **more,
    }


TEXT = "the provider request"
CASES: list[tuple[AuditRecord, str, dict[str, Any]]] = [
    (ApprovalDecided(entry=ENTRY, **IDS), "approval", ENTRY.payload()),
    (GrantUsed(entry=ENTRY, **IDS), "grant_use", ENTRY.payload()),
    (
        CapabilityMismatch(approved_hash="h1", final_hash="h2", reason="edited", **IDS),
        "capability_mismatch",
        {"approved_hash": "h1", "final_hash": "h2", "reason": "edited"},
    ),
    (
        CapabilityMismatch(sql="SELECT 1", approved_hash=None, final_hash="h2", reason="none"),
        "capability_mismatch",
        {"sql": "SELECT 1", "approved_hash": None, "final_hash": "h2", "reason": "none"},
    ),
    (ReviewStep(event="posted", **REQUEST), "review", _review("posted")),
    (
        ReviewStep(event="expired", decision="expired", **REQUEST),
        "review",
        _review("expired", decision="expired"),
    ),
    (
        ReviewStep(event="withdrawn", decision="withdrawn", **REQUEST),
        "review",
        _review("withdrawn", decision="withdrawn"),
    ),
    (
        ReviewStep(event="refused", decision="approved", reviewer="ann", reason="own", **REQUEST),
        "review",
        _review("refused", decision="approved", reviewer="ann", reason="own"),
    ),
    (
        ReviewStep(
            event="decision",
            approver="bob",
            decision="approved",
            note=None,
            edited_args=None,
            **REQUEST,
        ),
        "review",
        _review("decision", "bob", decision="approved", note=None, edited_args=None),
    ),
    (
        ReviewStep(
            event="decision_lost",
            approver="eve",
            decision="rejected",
            reviewer="bob",
            state="approved",
            **REQUEST,
        ),
        "review",
        _review("decision_lost", "eve", decision="rejected", reviewer="bob", state="approved"),
    ),
    (
        DataPolicyApplied(protected={"email": "masked"}, **IDS),
        "data_policy",
        {"protected": {"email": "masked"}, "policy_version": "p1"},
    ),
    (
        ProviderRequestBlocked(
            reason="no",
            extension_path="/x.py",
            model="m:1",
            payload_sha256=hashlib.sha256(TEXT.encode()).hexdigest(),
            payload_chars=len(TEXT),
        ),
        "provider_request_blocked",
        {
            "reason": "no",
            "extension_path": "/x.py",
            "model": "m:1",
            "payload_sha256": hashlib.sha256(TEXT.encode()).hexdigest(),
            "payload_chars": len(TEXT),
        },
    ),
    (
        McpRequest(
            caller={"requester": "sub", "client_id": "cli", "issuer": "iss", "scopes": ["a"]},
            client="claude",
            client_version="1",
            protocol_version="2025-06-18",
            transport="http",
            request_id="7",
            approval_mode="elicit",
            answers_question_of=None,
            tool_call_id="c1",
            tool_name="query_database",
        ),
        "mcp_request",
        {
            "requester": "sub",
            "client_id": "cli",
            "issuer": "iss",
            "scopes": ["a"],
            "client": "claude",
            "client_version": "1",
            "protocol_version": "2025-06-18",
            "transport": "http",
            "request_id": "7",
            "approval_mode": "elicit",
            "answers_question_of": None,
        },
    ),
    (
        McpRequest(
            caller={"requester": None},
            client="c",
            client_version=None,
            protocol_version="p",
            transport="stdio",
            request_id="1",
            approval_mode="none",
        ),
        "mcp_request",
        {
            "requester": None,
            "client": "c",
            "client_version": None,
            "protocol_version": "p",
            "transport": "stdio",
            "request_id": "1",
            "approval_mode": "none",
            "answers_question_of": None,
        },
    ),
    (
        NotebookOutput(
            run_id="run", output_digest="d", calls=[{"tool_call_id": "c1"}], prompt_digest="pd"
        ),
        "notebook_output",
        {
            "run_id": "run",
            "output_digest": "d",
            "calls": [{"tool_call_id": "c1"}],
            "prompt_digest": "pd",
        },
    ),
]


@pytest.mark.parametrize(
    ("record", "kind", "payload"), CASES, ids=[f"{k}-{i}" for i, (_, k, _) in enumerate(CASES)]
)
def test_typed_record_payload_is_the_dict_written_before(
    record: AuditRecord, kind: str, payload: dict[str, Any]
) -> None:
    assert record.kind == kind
    assert record.payload() == payload
    assert list(record.payload()) == list(payload)  # same keys in the same order


def test_review_step_refuses_an_unknown_event() -> None:
    with pytest.raises(ValueError, match="unknown review event"):
        ReviewStep(event="approved", **REQUEST)


async def test_a_typed_record_is_stored_as_the_kind_and_dict(tmp_path: Any) -> None:
    """Through the log: the stored row of a typed record equals the untyped write's row."""
    log = AuditLog(f"sqlite:///{tmp_path / 'a.db'}")
    try:
        for record, kind, payload in CASES:
            await log.commit(record)
            await log.commit(
                kind,
                payload,
                tool_call_id=record.tool_call_id,
                tool_name=record.tool_name,
                policy_version=record.policy_version,
            )
        frame = log.to_dataframe()
    finally:
        log.close()
    columns = ("kind", "payload", "tool_call_id", "tool_name", "policy_version")
    rows = list(zip(*(frame[c] for c in columns), strict=True))
    assert len(rows) == 2 * len(CASES)
    for typed, untyped in zip(rows[::2], rows[1::2], strict=True):
        assert typed == untyped
