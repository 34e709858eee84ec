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
    return create_agent_session(
        model=ScriptedModel([*steps, text("done")]),
        custom_tools=[tool],
        ui=ui,
        audit=False,
        builtin_tools=False,
    )


async def test_prompt_decides_once_and_disables_buttons() -> None:
    prompt = ApprovalPrompt(
        title="Database write", sql="DELETE FROM t", reason="DELETE changes data", timeout=None
    )
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

    tool = define_tool(
        ToolDefinition(name="ask", label="Ask", description="Ask.", parameters=_Empty, execute=ask)
    )
    holder: dict[str, Run] = {}
    ui = NotebookUI(lambda: holder.get("run"))
    run = Run(_session(tool, ui), "go")
    holder["run"] = run
    run.start()
    choice = await run.next_prompt(timeout=10)
    assert run.view.cards[0].prompt is choice
    choice.choose("b")  # type: ignore[attr-defined]
    typed = await run.next_prompt(timeout=10)
    typed.text.value = "Ada"  # type: ignore[attr-defined]
    typed.submit_button.click()  # type: ignore[attr-defined]
    state = await run.wait(timeout=10)
    assert answers == {"select": "b", "input": "Ada"}
    assert "all set" in run.view.notices.value
    assert state.status == "done"


async def test_rendering_is_throttled_and_touches_only_changed_cards() -> None:
    """Deterministic, no wall clock. A burst of updates schedules one
    render; a render re-renders only the cards an event changed."""
    from pi_notebook.agent.events import ToolExecutionStartEvent, ToolExecutionUpdateEvent
    from pi_notebook.notebook.store import RunState, reduce
    from pi_notebook.notebook.view import RunView

    holder = {"state": RunState()}
    view = RunView(lambda: holder["state"], lambda: None, str)
    rendered = asyncio.Event()
    real_render = view.render

    def render() -> None:
        real_render()
        rendered.set()

    view.render = render  # type: ignore[method-assign]
    for i in range(200):
        holder["state"] = reduce(
            holder["state"], ToolExecutionStartEvent(tool_call_id=f"c{i}", tool_name="t", args={})
        )
        view.touch(f"c{i}")
    view.render()
    assert len(view.cards) == 200 and view.card_renders == 200
    rendered.clear()
    before, renders = view.card_renders, view.render_count
    for i in range(1000):  # a tool reporting a thousand times before the loop turns
        holder["state"] = reduce(
            holder["state"],
            ToolExecutionUpdateEvent(
                tool_call_id="c7",
                tool_name="t",
                args={},
                partial_result=ToolResult(content=[TextContent(text=f"tick {i}")]),
            ),
        )
        view.touch("c7")
        view.request_render()
    assert view.render_count == renders  # nothing rendered during the burst: one is scheduled
    await rendered.wait()
    assert view.render_count == renders + 1
    assert view.card_renders == before + 1  # only the card that changed
    assert "tick 999" in view.card("c7").body.value


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


async def test_database_write_prompt_shows_the_statement_being_approved(tmp_path: Any) -> None:
    """If a handler changed the model's SQL, the prompt shows the changed statement (the one
    the approval binds to), not the card's original arguments (S24)."""
    import sqlite3

    from pi_notebook.database import database_extension

    path = tmp_path / "orders.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER)")
        conn.execute("INSERT INTO orders VALUES (1), (2)")

    def narrow(pi: Any) -> None:
        def handler(event: Any, ctx: Any) -> None:
            event.input.sql = "DELETE FROM orders WHERE id = 1"

        pi.on("tool_call", handler)

    model = ScriptedModel(
        [[tool_call("query_database", {"sql": "DELETE FROM orders"}, id="d1")], text("ok")]
    )
    holder: dict[str, Run] = {}
    ui = NotebookUI(lambda: holder.get("run"))
    session = create_agent_session(
        model=model,
        ui=ui,
        audit=False,
        builtin_tools=False,
        extensions=[narrow, database_extension(f"sqlite:///{path}")],
    )
    run = Run(session, "go")
    holder["run"] = run
    run.start()
    prompt = await run.next_prompt(timeout=10)
    assert isinstance(prompt, ApprovalPrompt) and run.view.card("d1").prompt is prompt
    assert prompt.sql == "DELETE FROM orders WHERE id = 1"
    assert prompt.reason == "DELETE changes data"
    prompt.reject_button.click()
    state = await run.wait(timeout=10)
    assert state.cards["d1"].status == "blocked"
    await session.close()


def test_a_running_query_shows_its_elapsed_time() -> None:
    from pi_notebook.agent.events import (
        AgentStartEvent,
        ToolExecutionStartEvent,
        ToolExecutionUpdateEvent,
    )
    from pi_notebook.notebook.store import RunState, reduce
    from pi_notebook.notebook.view import RunView

    now = {"t": 100.0}
    state = reduce(RunState(), AgentStartEvent())
    state = reduce(
        state,
        ToolExecutionStartEvent(
            tool_call_id="q", tool_name="query_database", args={"sql": "SELECT 1"}
        ),
        now=100.0,
    )
    state = reduce(
        state,
        ToolExecutionUpdateEvent(
            tool_call_id="q",
            tool_name="query_database",
            args={},
            partial_result=ToolResult(content=[TextContent(text="Querying…")]),
        ),
        now=100.5,
    )
    view = RunView(lambda: state, lambda: None, lambda n: "Query database", clock=lambda: now["t"])
    now["t"] = 112.5
    view.tick()
    view.render()
    assert "running · 12.5 s" in view.card("q").body.value
    assert "12.5 s" in view.status.value  # the run's own elapsed time
