"""A tool describes its own calls: a third-party tool's card, record, approval prompt, audit
summary and approval records render from its ``describe_call``; a tool without one is shown
by its label and its arguments."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from pi_notebook import (
    CallView,
    TextContent,
    ToolDefinition,
    ToolResult,
    create_agent_session,
    define_tool,
)
from pi_notebook.approvals import ApprovalRequest, approvals_dataframe
from pi_notebook.notebook import ApprovalPrompt, NotebookUI, Run
from pi_notebook.notebook.record import args_html
from pi_notebook.testing import ScriptedApprovalUI, ScriptedModel, text, tool_call

ASKED = "https://example.org/orders?page=1"
EDITED = "https://example.org/orders?page=2"


class FetchParams(BaseModel):
    url: str
    method: str = "GET"


def fetch_view(args: Mapping[str, Any]) -> CallView:
    """The toy tool's own view: the URL is the code, the method a field."""
    return CallView(
        title="Fetch a page",
        code=str(args.get("url")),
        code_language="url",
        code_argument="url",
        fields={"method": args.get("method", "GET")},
    )


def fetch_tool(ran: list[str], *, describe: bool = True) -> ToolDefinition[FetchParams]:
    async def execute(call_id: str, params: FetchParams, *_: Any) -> ToolResult:
        ran.append(params.url)
        return ToolResult(content=[TextContent(text=f"fetched {params.url}")])

    return define_tool(
        ToolDefinition(
            name="fetch",
            label="Fetch",
            description="Fetch a web page.",
            parameters=FetchParams,
            execute=execute,
            requires_approval=True,
            describe_call=fetch_view if describe else None,
        )
    )


def _session(tmp_path: Path, ran: list[str], *, ui: Any, describe: bool = True) -> Any:
    model = ScriptedModel([[tool_call("fetch", {"url": ASKED}, id="f1")], text("done")])
    return create_agent_session(
        model=model,
        ui=ui,
        custom_tools=[fetch_tool(ran, describe=describe)],
        audit=f"sqlite:///{tmp_path / 'audit.sqlite'}",
        builtin_tools=False,
    )


async def test_a_tool_s_request_summary_and_records_show_its_own_code(tmp_path: Path) -> None:
    ui, ran = ScriptedApprovalUI("rejected"), []
    session = _session(tmp_path, ran, ui=ui)
    await session.prompt("go")
    [request] = ui.requests
    assert request.view == fetch_view({"url": ASKED, "method": "GET"})
    assert session.view_of_call("fetch", {"url": ASKED}).code == ASKED
    # The call never ran: the audit's summary shows the code its tool shows for it.
    [call] = session.audit.calls_dataframe().to_dict("records")
    assert (call["tool_name"], call["decision"], call["sql"]) == ("fetch", "rejected", ASKED)
    [approval] = approvals_dataframe(session.audit).to_dict("records")
    assert approval["sql"] == ASKED and ran == []
    await session.close()


async def test_a_tool_without_a_view_is_shown_by_its_label_and_arguments(tmp_path: Path) -> None:
    ui, ran = ScriptedApprovalUI("rejected"), []
    session = _session(tmp_path, ran, ui=ui, describe=False)
    await session.prompt("go")
    [request] = ui.requests
    view = request.call_view()
    assert (view.title, view.code, dict(view.fields)) == ("Fetch", None, request.args)
    [call] = session.audit.calls_dataframe().to_dict("records")
    assert call["sql"] is None  # no code shown, no statement guessed
    assert "<pre class='pi-args'" in args_html(request.args, view)
    await session.close()


async def test_the_card_prompt_and_record_render_the_tool_s_view(tmp_path: Path) -> None:
    ran: list[str] = []
    ui = NotebookUI(lambda: None)
    session = _session(tmp_path, ran, ui=ui)
    run = Run(session, "go")
    ui._get_run = lambda: run  # pyright: ignore[reportPrivateUsage]
    run.start()
    prompt = await run.next_prompt(timeout=10)
    assert isinstance(prompt, ApprovalPrompt) and prompt.editor is not None
    assert prompt.editor.value == ASKED  # the tool's code, editable: it named its argument
    prompt.editor.value = EDITED
    prompt.approve_button.click()
    state = await run.wait(timeout=10)
    assert ran == [EDITED] and state.cards["f1"].word == "approved"
    card = run.view.card("f1").body.value  # type: ignore[union-attr]
    assert "<pre class='pi-code' data-language='url'" in card and EDITED in card
    assert html.escape(json.dumps({"method": "GET"})) in card
    record = run.record or {}
    page, plain = record["text/html"], record["text/plain"]
    assert page.index(EDITED) < page.index("Edited before approval") < page.rindex(ASKED)
    assert plain.index(EDITED) < plain.index("model asked for") < plain.rindex(ASKED)
    await session.close()


def test_a_failing_describer_falls_back_to_the_arguments() -> None:
    from pi_notebook.agent.views import call_view

    def broken(args: Mapping[str, Any]) -> CallView:
        raise RuntimeError("no view")

    view = call_view("Fetch", {"url": ASKED}, broken)
    assert (view.title, view.code, dict(view.fields)) == ("Fetch", None, {"url": ASKED})
    assert (
        ApprovalRequest(
            tool_call_id="x", tool_name="fetch", title="Fetch", args={"url": ASKED}, args_hash="h"
        )
        .call_view()
        .code
        is None
    )
