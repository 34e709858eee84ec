"""The MCP server's approval bridge: how a question reaches the client and what binds an answer."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from mcp.types import ElicitResult

from pi_notebook import create_agent_session
from pi_notebook.approvals import (
    ApprovalOutcome,
    ApprovalRequest,
    WritePreview,
    approvals_dataframe,
    args_hash,
)
from pi_notebook.mcp import mcp_extension
from pi_notebook.mcp.approval import (
    APPROVAL_SCHEMA,
    McpApprovalUI,
    PendingApprovals,
    PriorAnswer,
    Question,
    RequestApproval,
    approval_message,
    decision_of,
    serving,
)
from tests.mcp.mcp_support import Relay, toy_stdio

PREVIEW = WritePreview(
    affected_rows=3,
    method="counted in a rolled-back transaction",
    sample=pd.DataFrame({"id": [1, 2, 3]}),
)


def request(
    sql: str = "DELETE FROM t WHERE a < 4",
    *,
    digest: str = "h" * 64,
    preview: WritePreview | None = PREVIEW,
) -> ApprovalRequest:
    return ApprovalRequest(
        tool_call_id="c1",
        tool_name="query_database",
        title="Database write",
        args={"sql": sql},
        args_hash=digest,
        reasons=("DELETE changes data",),
        preview=preview,
    )


def ui() -> McpApprovalUI:
    return McpApprovalUI()


def test_the_message_shows_statement_reasons_preview_and_binding() -> None:
    text = approval_message(
        Question(
            title="Database write",
            tool_name="query_database",
            statement="DELETE FROM t WHERE a < 4",
            args_hash="ab" * 32,
            reasons=("DELETE changes data",),
            preview=PREVIEW,
        ),
        "Claude",
    )
    assert text.startswith("Database write: Claude asks to run this query_database call.")
    assert "    DELETE FROM t WHERE a < 4" in text
    assert "Why it needs approval: DELETE changes data." in text
    assert "Preview: 3 row(s) would change (counted in a rolled-back transaction)." in text
    assert "Rows it would touch" in text and " id\n  1\n  2\n  3" in text
    assert "approval hash abababababab…" in text


@pytest.mark.parametrize(
    ("response", "approved"),
    [
        (ElicitResult(action="accept", content={"approve": True}), True),
        (ElicitResult(action="accept", content={"approve": False}), False),
        (ElicitResult(action="accept", content={"approve": "yes"}), False),
        (ElicitResult(action="accept"), False),
        (ElicitResult(action="decline"), False),
        (ElicitResult(action="cancel"), False),
        ({"action": "accept", "content": {"approve": True}}, False),  # not a parsed answer
        (None, False),
    ],
)
def test_only_an_explicit_accept_approves(response: Any, approved: bool) -> None:
    assert decision_of(response) is approved


async def test_mid_call_elicitation_decides_the_call() -> None:
    asked: list[tuple[str, dict[str, Any]]] = []

    async def elicit(message: str, schema: dict[str, Any]) -> ElicitResult:
        asked.append((message, schema))
        return ElicitResult(action="accept", content={"approve": True})

    state = RequestApproval(client="desk", mode="elicit", elicit=elicit)
    with serving(state):
        outcome = await ui().request_approval(request())
    assert outcome.decision == "approved" and outcome.approver == "desk"
    assert asked[0][1] == APPROVAL_SCHEMA and "DELETE FROM t" in asked[0][0]


async def test_a_failing_or_late_elicitation_is_a_denial() -> None:
    async def broken(message: str, schema: dict[str, Any]) -> ElicitResult:
        raise RuntimeError("client went away")

    async def slow(message: str, schema: dict[str, Any]) -> ElicitResult:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    for elicit, timeout in ((broken, None), (slow, 0.05)):
        state = RequestApproval(client="desk", mode="elicit", elicit=elicit)
        with serving(state):
            assert not await ui().confirm("Database write", "DELETE FROM t", timeout=timeout)
        assert state.decisions == ["failed"]


async def test_without_a_request_or_without_elicitation_nothing_is_approved() -> None:
    assert (await ui().request_approval(request())).decision == "rejected"  # nobody to ask
    state = RequestApproval(client="cli", mode="unavailable")
    with serving(state):
        assert (await ui().request_approval(request())).decision == "rejected"
    assert state.refused


async def test_a_retry_answer_binds_to_hash_and_previewed_rows_once() -> None:
    def answered(**change: Any) -> RequestApproval:
        answer = PriorAnswer(args_hash="h" * 64, affected_rows=3, approved=True, **change)
        return RequestApproval(client="new", mode="input_required", answer=answer)

    state = answered()
    with serving(state):
        assert (await ui().request_approval(request())).decision == "approved"
        again = await ui().request_approval(request())  # the same answer cannot serve twice
    # Asked afresh in the result: no decision yet (deferred, never "rejected"), nobody named.
    assert again.decision == "deferred" and state.asked is not None
    for req in (request(digest="other" + "h" * 59), request(preview=WritePreview(affected_rows=4))):
        state = answered()
        with serving(state):
            outcome = await ui().request_approval(req)
        assert outcome.decision == "deferred" and state.asked is not None  # asked afresh
        assert outcome.approver is None


async def test_an_extensions_own_confirm_is_asked_as_it_is_and_binds_to_its_words() -> None:
    state = RequestApproval(client="desk", mode="input_required")
    with serving(state):
        assert not await ui().confirm("Sure?", "Delete the cache directory.")
    asked = state.asked
    assert asked is not None and asked.tool_name is None
    assert asked.statement == "Delete the cache directory." and asked.reasons == ()
    assert approval_message(asked, "desk").startswith("Sure?: desk asks to run this call.")
    answer = PriorAnswer(args_hash=asked.args_hash, affected_rows=None, approved=True)
    state = RequestApproval(client="desk", mode="input_required", answer=answer)
    with serving(state):
        assert not await ui().confirm("Sure?", "Delete the whole disk.")  # other words: asked
        assert await ui().confirm("Sure?", "Delete the cache directory.")  # the words answered
    assert state.decisions == ["asked", "approved"]


def test_pending_questions_are_consumed_once_and_expire() -> None:
    now = [0.0]
    pending = PendingApprovals(10, clock=lambda: now[0])
    question = Question(title="t", tool_name="q", statement="s", args_hash="h", preview=PREVIEW)
    nonce = pending.add(question, "k", asked_in="call-1")
    yes = {"k": ElicitResult(action="accept", content={"approve": True})}
    answer = pending.consume(nonce, yes)
    assert answer == PriorAnswer(args_hash="h", affected_rows=3, approved=True, asked_in="call-1")
    assert pending.consume(nonce, yes) is None  # a replay finds nothing
    assert pending.consume(pending.add(question, "k"), {}).approved is False  # type: ignore[union-attr]
    late = pending.add(question, "k")
    now[0] = 11.0
    assert pending.consume(late, yes) is None and len(pending) == 0


def test_an_unanswered_question_is_handed_on_as_expired_once() -> None:
    """A question sent with a call's result that no retry answers ends: the server audits the
    asking call's approval as expired (at the next look, or when the server stops)."""
    now = [0.0]
    expired: list[tuple[str | None, str]] = []
    pending = PendingApprovals(
        10, clock=lambda: now[0], on_expired=lambda call, q: expired.append((call, q.args_hash))
    )
    question = Question(title="t", tool_name="q", statement="s", args_hash="h", preview=PREVIEW)
    pending.add(question, "k", asked_in="call-late")
    kept = pending.add(question, "k", asked_in="call-kept")
    pending.add(question, "k", asked_in="call-open")
    yes = {"k": ElicitResult(action="accept", content={"approve": True})}
    assert pending.consume(kept, yes) is not None  # answered: never handed on
    now[0] = 5.0
    assert len(pending) == 2 and expired == []
    now[0] = 11.0
    assert len(pending) == 0
    assert expired == [("call-late", "h"), ("call-open", "h")]
    pending.close()
    assert len(expired) == 2  # once each
    still = pending.add(question, "k", asked_in="call-at-stop")
    pending.close()
    assert expired[-1] == ("call-at-stop", "h") and pending.consume(still, yes) is None


# -- an edit made before approving an MCP tool call is what runs -----------------------


class _EditingUI:
    def __init__(self, new_args: dict[str, Any]) -> None:
        self.new_args = new_args
        self.asked: list[ApprovalRequest] = []

    async def request_approval(self, request: ApprovalRequest) -> ApprovalOutcome:
        self.asked.append(request)
        return ApprovalOutcome("approved", edited_args=self.new_args, approver="t")


async def test_an_edited_mcp_call_runs_as_edited(tmp_path: Path) -> None:
    """The MCP parameter model keeps every argument as an extra: the edit replaces them all."""
    original, edited = tmp_path / "orig.txt", tmp_path / "edited.txt"
    ui = _EditingUI({"path": str(edited), "text": "edited"})
    ext = mcp_extension({"toy": toy_stdio()}, log_dir=tmp_path)
    session = create_agent_session(
        model=Relay(), extensions=[ext], ui=ui, audit="sqlite://", builtin_tools=False
    )
    await session.start()
    try:
        result = await session.call_tool("mcp__toy__write_marker", {"path": str(original)})
        assert not result.is_error, result.content
        assert edited.exists() and not original.exists()
        assert [r.args for r in ui.asked] == [{"path": str(original)}]
        [row] = approvals_dataframe(session.audit).itertuples()
        assert row.original_args_hash == ui.asked[0].args_hash
        assert row.args_hash == args_hash({"path": str(edited), "text": "edited"})
    finally:
        await session.close()


async def test_a_question_left_unanswered_when_the_server_stops_ends_expired_in_the_audit(
    tmp_path: Path,
) -> None:
    from pi_notebook.approvals import approvals_dataframe
    from pi_notebook.audit import AuditLog
    from pi_notebook.database import call_views
    from pi_notebook.mcp.serve import ServeOptions, served_session

    options = ServeOptions(
        command="serve",
        database_url=f"sqlite:///{tmp_path}/data.sqlite",
        audit_url=f"sqlite:///{tmp_path}/audit.sqlite",
        data_policy=None,
        approval_timeout=60,
        http=None,
        issuer=None,
        audience=None,
        resource_url=None,
    )
    question = Question(
        title="Database write",
        tool_name="query_database",
        statement="DELETE FROM t",
        args_hash="h" * 64,
        reasons=("DELETE",),
        args={"sql": "DELETE FROM t"},
    )
    async with served_session(options) as (_session, server):
        server.pending.add(question, "approve", asked_in="mcp_asked")
    # Read later, without the session: the reader says how the database tool's calls read.
    with AuditLog(options.audit_url, call_views=call_views) as log:
        frame = approvals_dataframe(log, tool_call_id="mcp_asked")
        records = log.to_dataframe(tool_call_id="mcp_asked", kind="approval")
    assert list(frame["decision"]) == ["expired"]
    # The record keeps the argument the tool shows, so a reader without views shows it too.
    assert records["payload"].iloc[0]["code_argument"] == "sql"
    assert frame["sql"].iloc[0] == "DELETE FROM t" and "never answered" in frame["reason"].iloc[0]
