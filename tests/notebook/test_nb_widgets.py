"""In-process widget behaviour: prompts, the UI adapter (C31, C36), throttling, failures."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pydantic import BaseModel

from pi_notebook import TextContent, ToolDefinition, ToolResult, create_agent_session, define_tool
from pi_notebook.ai.abort import AbortController
from pi_notebook.notebook import ApprovalPrompt, NotebookUI, Run
from pi_notebook.testing import ScriptedModel, text, tool_call


class _Empty(BaseModel):
    pass


def _session(tool: ToolDefinition[Any], ui: Any = None, calls: int = 1) -> Any:
    steps: list[Any] = [[tool_call(tool.name, {}, id=f"c{i}")] for i in range(calls)]
    return create_agent_session(model=ScriptedModel([*steps, text("done")]), custom_tools=[tool],
                                ui=ui, audit=False, builtin_tools=False)  # fmt: skip


async def test_prompt_decides_once_and_disables_buttons() -> None:
    prompt = ApprovalPrompt(title="Database write", sql="DELETE FROM t", reason="DELETE changes data",
                            timeout=None)  # fmt: skip
    waiter = asyncio.ensure_future(prompt.wait())
    await asyncio.sleep(0)
    prompt.reject_button.click()
    assert await waiter == "rejected"
    assert not prompt.approve()
    assert prompt.decision == "rejected"
    assert prompt.approve_button.disabled and prompt.reject_button.disabled


async def test_c36_confirm_timeout_is_seconds_and_expires_false() -> None:
    ui = NotebookUI(lambda: None)
    started = time.monotonic()
    assert await ui.confirm("Database write", "DELETE FROM t", timeout=0.3) is False
    assert 0.25 < time.monotonic() - started < 3
    (prompt,) = ui.prompts
    assert prompt.decision == "expired"
    assert prompt.approve_button.disabled  # type: ignore[attr-defined]


async def test_c31_confirm_false_when_signal_aborts() -> None:
    ui = NotebookUI(lambda: None)
    controller = AbortController()
    asyncio.get_running_loop().call_later(0.05, controller.abort)
    assert (
        await ui.confirm("Database write", "DELETE FROM t", signal=controller.signal, timeout=10)
        is False
    )
    assert ui.prompts[0].decision == "aborted"


async def test_select_input_notify_render_in_run_view() -> None:
    answers: dict[str, Any] = {}

    async def ask(
        tool_call_id: str, params: _Empty, signal: Any, on_update: Any, ctx: Any
    ) -> ToolResult:
        answers["select"] = await ctx.ui.select("Pick", ["a", "b"], timeout=10)
        answers["input"] = await ctx.ui.input("Name?", "type here", timeout=10)
        ctx.ui.notify("all set")
        return ToolResult(content=[TextContent(text="ok")])

    tool = define_tool(ToolDefinition(name="ask", label="Ask", description="Ask.", parameters=_Empty,
                                      execute=ask))  # fmt: skip
    holder: dict[str, Run] = {}
    ui = NotebookUI(lambda: holder.get("run"))
    run = Run(_session(tool, ui), "go")
    holder["run"] = run
    run.start()
    choice = await run.next_prompt(timeout=10)
    assert choice in run.view.cards[0].approval_box.children
    choice.choose("b")  # type: ignore[attr-defined]
    typed = await run.next_prompt(timeout=10)
    typed.text.value = "Ada"  # type: ignore[attr-defined]
    typed.submit_button.click()  # type: ignore[attr-defined]
    state = await run.wait(timeout=10)
    assert answers == {"select": "b", "input": "Ada"}
    assert "all set" in run.view.notices.value
    assert state.status == "done"


async def test_rendering_is_throttled_to_about_20_per_second() -> None:
    async def chatty(
        tool_call_id: str, params: _Empty, signal: Any, on_update: Any, ctx: Any
    ) -> ToolResult:
        deadline = time.monotonic() + 1.0
        i = 0
        while time.monotonic() < deadline:
            i += 1
            on_update(ToolResult(content=[TextContent(text=f"tick {i}")]))
            if i % 10 == 0:
                await asyncio.sleep(0.01)  # ~1000 updates a second
        return ToolResult(content=[TextContent(text=f"{i} ticks")])

    tool = define_tool(ToolDefinition(name="chatty", label="Chatty", description="Chatty.",
                                      parameters=_Empty, execute=chatty))  # fmt: skip
    run = Run(_session(tool), "go")
    run.start()
    while not run.view.cards:  # noqa: ASYNC110 - polling the widget is the point
        await asyncio.sleep(0.005)
    changes: list[Any] = []
    run.view.cards[0].progress.observe(changes.append, names="value")
    started = time.monotonic()
    state = await run.wait(timeout=20)
    elapsed = time.monotonic() - started
    updates = state.cards["c0"].updates
    assert updates > 500, updates
    assert len(changes) <= 20 * elapsed + 5, (len(changes), elapsed)
    assert len(changes) >= 5  # but progress is still shown


async def test_task_exception_is_shown_in_run_view() -> None:
    class Broken:
        is_running = False

        def subscribe(self, listener: Any) -> Any:
            return lambda: None

        async def prompt(self, text: str) -> None:
            raise RuntimeError("provider exploded")

    run = Run(Broken(), "go")  # type: ignore[arg-type]
    run.start()
    state = await run.wait(timeout=5)
    assert state.status == "failed"
    assert "provider exploded" in run.view.error.value
    assert run.view.stop_button.disabled


def test_database_write_prompt_shows_the_statement_being_approved() -> None:
    """The gate's message is the statement it approves; if a handler changed the model's SQL,
    the prompt must show the changed statement, not the card's original arguments."""
    from pi_notebook.notebook.ui import _sql_and_reason  # pyright: ignore[reportPrivateUsage]

    sql, reason = _sql_and_reason(
        "Database write", "DELETE FROM orders", {"sql": "SELECT 1"}, lambda s: f"why: {s}"
    )
    assert (sql, reason) == ("DELETE FROM orders", "why: DELETE FROM orders")
    # Another extension's prose message: the card's SQL is shown, the message says why.
    sql, reason = _sql_and_reason(
        "Confirm", "This is risky.", {"sql": "DROP TABLE t"}, lambda s: None
    )
    assert (sql, reason) == ("DROP TABLE t", "This is risky.")
