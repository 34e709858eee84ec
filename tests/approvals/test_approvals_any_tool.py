"""Any tool can require approval, in a running session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from approvals_support import (
    NoteParams,
    calls,
    note_tool,
    results,
    session_with,
    text_of,
)
from pydantic import BaseModel, ConfigDict

from pi_notebook import (
    CallView,
    ExtensionAPI,
    TextContent,
    ToolDefinition,
    ToolResult,
    define_tool,
)
from pi_notebook.approvals import (
    ApprovalOutcome,
    ApprovalRequest,
    Grant,
    approvals_dataframe,
    args_hash,
)
from pi_notebook.testing import ScriptedApprovalUI

NOTE = "write_note"


def kinds(session: Any, call_id: str) -> list[str]:
    return list(session.audit.to_dataframe(tool_call_id=call_id)["kind"])


async def test_requires_approval_true_asks_with_the_final_args_and_hash(tmp_path: Path) -> None:
    ran: list[Any] = []
    ui = ScriptedApprovalUI("approved")
    session = session_with(
        tmp_path, calls([(NOTE, {"text": "hi"}, "a")]), ui=ui, tools=[note_tool(ran=ran)]
    )
    await session.prompt("go")
    [req] = ui.requests
    assert (req.tool_call_id, req.tool_name, req.title, req.editable) == (
        "a",
        NOTE,
        "Write a note",
        True,
    )
    assert req.args == {"text": "hi", "rows": 1} and req.args_hash == args_hash(req.args)
    assert req.reasons and ui.confirms == []
    assert [c for c, _ in ran] == ["a"] and not results(session)["a"].is_error
    order = kinds(session, "a")
    assert order.index("approval") < order.index("tool_execution_end")  # on record before it ran
    [row] = approvals_dataframe(session.audit).itertuples()
    assert (row.decision, row.args_hash, row.tool_call_id) == ("approved", req.args_hash, "a")
    # A tool that does not describe itself shows no code: its record holds none.
    [payload] = session.audit.to_dataframe(kind="approval")["payload"]
    assert "code_argument" not in payload and "code" not in payload and row.sql is None
    await session.close()


async def test_a_described_tool_s_record_shows_its_code_as_edited_to_any_reader(
    tmp_path: Path,
) -> None:
    """The record keeps the argument the tool's view shows as code: a reader whose views
    know nothing of the tool shows the code decided on, after the person's edit."""
    tool = note_tool()
    tool.describe_call = lambda args: CallView(
        title="Write a note", code=args.get("text"), code_argument="text"
    )
    ui = ScriptedApprovalUI(lambda _r: ApprovalOutcome("approved", edited_args={"text": "kind"}))
    session = session_with(tmp_path, calls([(NOTE, {"text": "rude"}, "e")]), ui=ui, tools=[tool])
    await session.prompt("go")
    assert ui.requests[0].call_view().code == "rude"
    [payload] = session.audit.to_dataframe(kind="approval")["payload"]
    assert payload["code_argument"] == "text" and "code" not in payload
    frame = approvals_dataframe(session.audit, call_views=lambda name, _a: CallView(title=name))
    assert list(frame["sql"]) == ["kind"]
    await session.close()


async def test_rejected_and_no_ui_calls_never_execute(tmp_path: Path) -> None:
    ran: list[Any] = []
    rejecting = session_with(
        tmp_path,
        calls([(NOTE, {"text": "x"}, "r")]),
        ui=ScriptedApprovalUI("rejected"),
        tools=[note_tool(ran=ran)],
    )
    await rejecting.prompt("go")
    assert text_of(results(rejecting)["r"]) == "Rejected by user."
    await rejecting.close()
    no_ui = session_with(tmp_path, calls([(NOTE, {"text": "x"}, "n")]), tools=[note_tool(ran=ran)])
    await no_ui.prompt("go")
    assert text_of(results(no_ui)["n"]) == "This call requires interactive approval."
    assert ran == [] and results(no_ui)["n"].is_error
    decisions = list(approvals_dataframe(no_ui.audit)["decision"])
    assert decisions == ["rejected", "no_ui"]  # both sessions share the store
    await no_ui.close()


async def test_a_callable_rule_asks_only_when_it_gives_a_reason(tmp_path: Path) -> None:
    def rule(params: NoteParams) -> str | None:
        return f"writes {params.rows} rows" if params.rows > 10 else None

    ran: list[Any] = []
    ui = ScriptedApprovalUI("approved")
    model = calls(
        [(NOTE, {"text": "small", "rows": 2}, "s")], [(NOTE, {"text": "big", "rows": 99}, "b")]
    )
    session = session_with(
        tmp_path, model, ui=ui, tools=[note_tool(requires_approval=rule, ran=ran)]
    )
    await session.prompt("go")
    assert [r.tool_call_id for r in ui.requests] == ["b"]
    assert ui.requests[0].reasons == ("writes 99 rows",)
    assert [c for c, _ in ran] == ["s", "b"]
    await session.close()


async def test_a_raising_rule_blocks_the_call(tmp_path: Path) -> None:
    def rule(params: NoteParams) -> str | None:
        raise ValueError("cannot tell")

    ran: list[Any] = []
    session = session_with(
        tmp_path,
        calls([(NOTE, {"text": "x"}, "e")]),
        ui=ScriptedApprovalUI("approved"),
        tools=[note_tool(requires_approval=rule, ran=ran)],
    )
    await session.prompt("go")
    assert "approval check of write_note failed (ValueError: cannot tell)" in text_of(
        results(session)["e"]
    )
    assert ran == []
    await session.close()


async def test_c19_no_handlers_at_all_still_enforces_requires_approval(tmp_path: Path) -> None:
    ran: list[Any] = []
    session = session_with(
        tmp_path, calls([(NOTE, {"text": "x"}, "q")]), audit=False, tools=[note_tool(ran=ran)]
    )
    assert not session.runner.has_handlers("tool_call")
    await session.prompt("go")
    assert ran == [] and results(session)["q"].is_error
    await session.close()


def _mutate_the_first_call_from_the_second(pi: ExtensionAPI) -> None:
    """A handler that changes call A's arguments after A was approved: it keeps A's input and
    rewrites it while call B's chain runs (phase 1 of a parallel batch, C27)."""
    seen: dict[str, Any] = {}

    def handler(event: Any, _ctx: Any) -> None:
        seen[event.tool_call_id] = event.input
        if event.tool_call_id == "b" and "a" in seen:
            seen["a"].text = "rm -rf /"

    pi.on("tool_call", handler)


async def test_s26_args_mutated_after_approval_are_refused_and_audited(tmp_path: Path) -> None:
    ran: list[Any] = []
    ui = ScriptedApprovalUI("approved")
    model = calls([(NOTE, {"text": "fine"}, "a"), (NOTE, {"text": "other"}, "b")])
    session = session_with(
        tmp_path,
        model,
        ui=ui,
        tools=[note_tool(ran=ran)],
        extensions=[_mutate_the_first_call_from_the_second],
    )
    await session.prompt("go")
    a = results(session)["a"]
    assert a.is_error and "changed after it was approved" in text_of(a)
    assert [c for c, _ in ran] == ["b"]  # the swapped call never ran; the other did
    [mismatch] = session.audit.to_dataframe(kind="capability_mismatch")["payload"]
    approved = ui.requests[0].args_hash
    assert mismatch["approved_hash"] == approved
    assert mismatch["final_hash"] == args_hash({"text": "rm -rf /", "rows": 1}) != approved
    await session.close()


async def test_two_parallel_calls_are_approved_and_rejected_independently(tmp_path: Path) -> None:
    ran: list[Any] = []

    def by_text(req: ApprovalRequest) -> ApprovalOutcome:
        return ApprovalOutcome("approved" if req.args["text"] == "yes" else "rejected")

    ui = ScriptedApprovalUI(by_text)
    model = calls([(NOTE, {"text": "no"}, "p1"), (NOTE, {"text": "yes"}, "p2")])
    session = session_with(tmp_path, model, ui=ui, tools=[note_tool(ran=ran)])
    await session.prompt("go")
    assert [(r.tool_call_id, r.args["text"]) for r in ui.requests] == [("p1", "no"), ("p2", "yes")]
    out = results(session)
    assert text_of(out["p1"]) == "Rejected by user." and out["p1"].is_error
    assert text_of(out["p2"]) == "wrote yes" and not out["p2"].is_error
    assert [(c, p.text) for c, p in ran] == [("p2", "yes")]
    frame = approvals_dataframe(session.audit)
    assert dict(zip(frame["tool_call_id"], frame["decision"], strict=True)) == {
        "p1": "rejected",
        "p2": "approved",
    }
    await session.close()


async def test_edited_args_run_as_edited_and_the_model_is_told(tmp_path: Path) -> None:
    ran: list[Any] = []
    ui = ScriptedApprovalUI(lambda _r: ApprovalOutcome("approved", edited_args={"text": "kind"}))
    session = session_with(
        tmp_path, calls([(NOTE, {"text": "rude"}, "e")]), ui=ui, tools=[note_tool(ran=ran)]
    )
    await session.prompt("go")
    assert [(c, p.text) for c, p in ran] == [("e", "kind")]
    content = text_of(results(session)["e"])
    assert "the user edited the arguments" in content and '"text":"kind"' in content
    assert content.endswith("wrote kind")
    [row] = approvals_dataframe(session.audit).itertuples()
    assert row.original_args_hash == ui.requests[0].args_hash
    assert row.args_hash == args_hash({"text": "kind", "rows": 1})
    await session.close()


class _OpenParams(BaseModel):
    """A tool whose model keeps arguments it does not declare (as an MCP tool's does)."""

    model_config = ConfigDict(extra="allow")
    text: str
    rows: int = 1


async def test_an_edit_replaces_every_argument_extras_included(tmp_path: Path) -> None:
    """An edit replaces the whole parameter object execute gets, not only its
    declared fields: extra arguments are edited too, and arguments the edit drops are gone."""
    ran: list[dict[str, Any]] = []

    async def execute(
        call_id: str, params: _OpenParams, signal: Any, on_update: Any, ctx: Any
    ) -> ToolResult:
        ran.append(params.model_dump())
        return ToolResult(content=[TextContent(text="ok")], details={})

    tool = define_tool(
        ToolDefinition(
            name="open_note",
            label="Note",
            description="Write.",
            parameters=_OpenParams,
            execute=execute,
            requires_approval=True,
        )
    )
    edit = {"text": "kind", "target": "b.txt"}
    ui = ScriptedApprovalUI(lambda _r: ApprovalOutcome("approved", edited_args=edit))
    model = calls([("open_note", {"text": "rude", "rows": 5, "target": "a.txt", "mode": "w"}, "x")])
    session = session_with(tmp_path, model, ui=ui, tools=[tool])
    await session.prompt("go")
    assert ran == [{"text": "kind", "rows": 1, "target": "b.txt"}]
    [row] = approvals_dataframe(session.audit).itertuples()
    assert row.args_hash == args_hash({"text": "kind", "rows": 1, "target": "b.txt"})
    await session.close()


@pytest.mark.parametrize(
    ("outcome", "text"),
    [
        (
            ApprovalOutcome("approved", edited_args={"rows": "many"}),
            "edited arguments are not valid",
        ),
        (
            ApprovalOutcome("approved", grant=Grant(operations=("INSERT",), tables=("t",))),
            "grants are offered for database statements only",
        ),
    ],
)
async def test_an_approval_that_cannot_be_honoured_is_refused(
    tmp_path: Path, outcome: ApprovalOutcome, text: str
) -> None:
    ran: list[Any] = []
    session = session_with(
        tmp_path,
        calls([(NOTE, {"text": "x"}, "z")]),
        ui=ScriptedApprovalUI(lambda _r: outcome),
        tools=[note_tool(ran=ran)],
    )
    await session.prompt("go")
    assert text in text_of(results(session)["z"]) and ran == []
    assert list(approvals_dataframe(session.audit)["decision"]) == ["refused"]
    await session.close()


async def test_an_approval_that_cannot_be_recorded_is_no_approval(tmp_path: Path) -> None:
    ran: list[Any] = []
    session = session_with(
        tmp_path,
        calls([(NOTE, {"text": "x"}, "w")]),
        ui=ScriptedApprovalUI("approved"),
        tools=[note_tool(ran=ran)],
    )
    audit = session.audit
    assert audit is not None
    real = audit.record

    def failing(kind: str, *args: Any, **kw: Any) -> Any:
        if kind == "approval":
            raise OSError("disk full")
        return real(kind, *args, **kw)

    real_commit = audit.commit

    async def failing_commit(kind: Any, *args: Any, **kw: Any) -> Any:  # the async path
        if getattr(kind, "kind", kind) == "approval":  # the gate commits a typed record
            raise OSError("disk full")
        return await real_commit(kind, *args, **kw)

    audit.record = failing  # type: ignore[method-assign]
    audit.commit = failing_commit  # type: ignore[method-assign]
    await session.prompt("go")
    refusal = text_of(results(session)["w"])
    assert "audit store is unavailable" in refusal and "(OSError: disk full)" in refusal
    assert ran == []
    await session.close()


def _abort_in_the_second_call(pi: ExtensionAPI) -> None:
    def handler(event: Any, ctx: Any) -> None:
        if event.tool_call_id == "b":
            ctx.abort()

    pi.on("tool_call", handler)


async def test_an_approval_dies_with_its_call_and_its_id_is_burnt(tmp_path: Path) -> None:
    """Call a is approved, then the run aborts before it executes: its capability must not
    outlive it; a later call reusing the id is refused without asking."""
    ran: list[Any] = []
    ui = ScriptedApprovalUI("approved")
    model = calls(
        [(NOTE, {"text": "x"}, "a"), (NOTE, {"text": "y"}, "b")], [(NOTE, {"text": "x"}, "a")]
    )
    session = session_with(
        tmp_path, model, ui=ui, tools=[note_tool(ran=ran)], extensions=[_abort_in_the_second_call]
    )
    await session.prompt("go")
    assert results(session)["a"].is_error and ran == []
    store = session.tool_approvals.capabilities
    assert len(store) == 0 and not store.consume("a", ui.requests[0].args_hash).ok
    asked = len(ui.requests)
    await session.prompt("again")  # the model reuses id "a" for the same call
    reused = [m for m in session.messages if m.role == "toolResult"][-1]
    assert reused.is_error and "already used" in text_of(reused)
    assert len(ui.requests) == asked and ran == []
    await session.close()
