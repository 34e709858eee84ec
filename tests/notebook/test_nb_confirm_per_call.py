"""A question an extension asks with ``ctx.ui.confirm`` belongs to the call that asked (C31, S14).

The call's context hands the extension the notebook UI bound to that call, so with two calls
running at once each prompt sits on its own card and answering one resolves that one only.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel

from pi_notebook import TextContent, ToolDefinition, ToolResult, create_agent_session, define_tool
from pi_notebook.notebook import ApprovalPrompt, NotebookUI, Run
from pi_notebook.testing import ScriptedModel, text, tool_call


class _Sql(BaseModel):
    sql: str


CALLS = [("p1", "DROP TABLE staging_a"), ("p2", "DELETE FROM staging_b")]


def _run(*, ask_in: str, answers: dict[str, bool], ran: list[str]) -> tuple[NotebookUI, Run]:
    """Two calls of ``write`` in one batch (run in parallel); each asks ``ctx.ui.confirm``
    with its own statement, from ``execute`` or from a ``tool_call`` handler (``ask_in``)."""

    async def write(
        tool_call_id: str, params: _Sql, signal: Any, on_update: Any, ctx: Any
    ) -> ToolResult:
        if ask_in == "execute":
            answers[tool_call_id] = await ctx.ui.confirm("Run this?", params.sql, timeout=10)
            if not answers[tool_call_id]:
                return ToolResult(content=[TextContent(text="not run")])
        ran.append(params.sql)
        return ToolResult(content=[TextContent(text=f"ran {params.sql}")])

    def extension(pi: Any) -> None:
        pi.register_tool(
            define_tool(
                ToolDefinition(
                    name="write",
                    label="Write",
                    description="Write.",
                    parameters=_Sql,
                    execute=write,
                )
            )
        )

        async def gate(event: Any, ctx: Any) -> dict[str, Any] | None:
            answers[event.tool_call_id] = await ctx.ui.confirm(
                "Run this?", event.input.sql, timeout=10
            )
            return None if answers[event.tool_call_id] else {"block": True, "reason": "No."}

        if ask_in == "tool_call":
            pi.on("tool_call", gate)

    steps = [[tool_call("write", {"sql": sql}, id=call_id) for call_id, sql in CALLS], text("ok")]
    holder: dict[str, Run] = {}
    ui = NotebookUI(lambda: holder.get("run"))
    session = create_agent_session(
        model=ScriptedModel(steps), extensions=[extension], ui=ui, audit=False, builtin_tools=False
    )
    run = Run(session, "go")
    holder["run"] = run
    run.start()
    return ui, run


async def _prompts(ui: NotebookUI, count: int) -> list[ApprovalPrompt]:
    for _ in range(500):
        if len(ui.prompts) >= count:
            break
        await asyncio.sleep(0.01)
    prompts = [p for p in ui.prompts if isinstance(p, ApprovalPrompt)]
    assert len(prompts) == count
    return prompts


async def test_parallel_calls_that_confirm_in_execute_each_ask_on_their_own_card() -> None:
    answers: dict[str, bool] = {}
    ran: list[str] = []
    ui, run = _run(ask_in="execute", answers=answers, ran=ran)
    prompts = await _prompts(ui, 2)
    for call_id, sql in CALLS:  # each on the card of the call that asked, with its statement
        mine = run.view.card(call_id).prompt
        assert isinstance(mine, ApprovalPrompt) and mine in prompts
        assert (mine.tool_call_id, mine.sql) == (call_id, sql)
    # Approve the second card's prompt only: the second call's statement runs, not the first's.
    run.view.card("p2").prompt.approve_button.click()  # type: ignore[union-attr]
    await asyncio.sleep(0.05)
    assert answers == {"p2": True} and ran == ["DELETE FROM staging_b"]
    run.view.card("p1").prompt.reject_button.click()  # type: ignore[union-attr]
    state = await run.wait(timeout=10)
    assert answers == {"p1": False, "p2": True} and ran == ["DELETE FROM staging_b"]
    assert state.cards["p1"].content == ("not run",)
    assert state.cards["p2"].content == ("ran DELETE FROM staging_b",)


async def test_a_tool_call_handler_asks_on_the_card_of_the_call_it_is_deciding() -> None:
    answers: dict[str, bool] = {}
    ran: list[str] = []
    ui, run = _run(ask_in="tool_call", answers=answers, ran=ran)
    (first,) = await _prompts(ui, 1)  # the handlers of a batch run one call at a time
    assert first.sql == "DROP TABLE staging_a" and run.view.card("p1").prompt is first
    first.reject_button.click()
    first_done, second = await _prompts(ui, 2)
    assert first_done is first
    assert second.sql == "DELETE FROM staging_b" and run.view.card("p2").prompt is second
    second.approve_button.click()
    state = await run.wait(timeout=10)
    assert answers == {"p1": False, "p2": True} and ran == ["DELETE FROM staging_b"]
    assert (state.cards["p1"].status, state.cards["p2"].status) == ("blocked", "done")


async def test_the_ui_bound_to_a_call_asks_on_that_call_and_shares_the_prompts() -> None:
    ui = NotebookUI(lambda: None)
    bound = ui.for_call("c9")
    assert (bound.tool_call_id, ui.tool_call_id) == ("c9", None)
    assert await bound.confirm("Sure?", "rm -r build", timeout=0.05) is False
    (prompt,) = ui.prompts  # one list of prompts for the notebook, bound or not
    assert isinstance(prompt, ApprovalPrompt) and prompt.tool_call_id == "c9"
    assert prompt.decision == "expired"
