"""``ctx`` and the UI context (C31, C36) and closing a session (C34).

The UI used here is written in this file: it honours ``timeout`` (seconds) and
``signal`` the way a host UI must. The notebook's widget prompt is tested for C36 by the
notebook's own tests; here we check what the session hands to any UI, and ``NoUI``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from pi_notebook import (
    ExtensionAPI,
    SessionClosedError,
    TextContent,
    ToolResult,
    create_agent_session,
)
from pi_notebook.ai.abort import AbortSignal
from pi_notebook.extensions import NoUI, UIContext
from pi_notebook.testing import ScriptedModel, text, tool_call


class DialogUI:
    """A host UI: answers ``answer`` after ``delay`` seconds, False on timeout or abort."""

    def __init__(self, *, answer: bool = True, delay: float = 0.0) -> None:
        self.answer, self.delay = answer, delay
        self.asked: list[dict[str, Any]] = []
        self.outcomes: list[str] = []
        self.was_asked = asyncio.Event()

    async def confirm(
        self,
        title: str,
        message: str,
        *,
        signal: AbortSignal | None = None,
        timeout: float | None = None,
    ) -> bool:
        self.asked.append(
            {"title": title, "message": message, "signal": signal, "timeout": timeout}
        )
        self.was_asked.set()
        user = asyncio.ensure_future(asyncio.sleep(self.delay, result=self.answer))
        waiters: set[asyncio.Future[Any]] = {user}
        aborted = asyncio.ensure_future(signal.wait()) if signal is not None else None
        if aborted is not None:
            waiters.add(aborted)
        done, pending = await asyncio.wait(
            waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
        for future in pending:
            future.cancel()
        if user in done:
            self.outcomes.append("answered")
            return bool(user.result())
        self.outcomes.append("aborted" if aborted is not None and aborted in done else "expired")
        return False


def gated_extension(
    make_tool: Any, ran: list[Any], decisions: list[bool], *, timeout: float = 30
) -> Any:
    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("write", log=ran))

        async def gate(event: Any, ctx: Any) -> Any:
            approved = await ctx.ui.confirm(
                "Database write", event.input.text, signal=ctx.signal, timeout=timeout
            )
            decisions.append(approved)
            return None if approved else {"block": True, "reason": "Rejected by user."}

        pi.on("tool_call", gate)

    return ext


async def test_c31_ctx_is_fresh_per_call_and_carries_the_session(
    make_tool: Any, tmp_path: Any
) -> None:
    contexts: list[tuple[str, Any]] = []

    async def execute(
        tool_call_id: str, params: Any, signal: Any, on_update: Any, ctx: Any
    ) -> ToolResult:
        contexts.append(("execute", ctx))
        assert ctx.signal is signal  # the run's abort signal
        assert ctx.is_idle() is False
        assert ctx.get_system_prompt() == ctx.session.system_prompt
        assert ctx.session.messages[-1].role == "assistant"
        assert "echo" in ctx.session.active_tool_names
        return ToolResult(content=[TextContent(text="ok")])

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("echo", execute=execute, snippet="echo text"))
        pi.on("tool_call", lambda e, c: contexts.append(("tool_call", c)))

    model = ScriptedModel([[tool_call("echo", {}), tool_call("echo", {})], text("done")])
    session = create_agent_session(model=model, extensions=[ext], cwd=str(tmp_path), audit=False)
    await session.prompt("go")
    assert [kind for kind, _ in contexts] == ["tool_call", "tool_call", "execute", "execute"]
    ctxs = [c for _, c in contexts]
    assert len({id(c) for c in ctxs}) == 4  # one per call, handlers included
    for ctx in ctxs:
        assert ctx.cwd == str(tmp_path)
        assert ctx.model is model
        assert ctx.has_ui is False
        assert isinstance(ctx.ui, NoUI)
        assert "- echo: echo text" in ctx.get_system_prompt()
        assert ctx.session.session_id == session.session_id
        assert ctx.audit is None
    assert ctxs[0].extension_path == "<inline:1>"


class PerCallUI(DialogUI):
    """A host UI that binds its dialogs to a call: ``for_call`` records which call asked."""

    def __init__(
        self,
        *,
        call_id: str | None = None,
        by_call: dict[str, list[str]] | None = None,
        answer: bool = True,
    ) -> None:
        super().__init__(answer=answer)
        self.call_id = call_id
        self.by_call: dict[str, list[str]] = by_call if by_call is not None else {}

    def for_call(self, tool_call_id: str) -> PerCallUI:
        return PerCallUI(call_id=tool_call_id, by_call=self.by_call, answer=self.answer)

    async def confirm(
        self,
        title: str,
        message: str,
        *,
        signal: AbortSignal | None = None,
        timeout: float | None = None,
    ) -> bool:
        self.by_call.setdefault(self.call_id or "-", []).append(message)
        return await super().confirm(title, message, signal=signal, timeout=timeout)


async def test_c31_ctx_knows_its_call_and_its_ui_is_bound_to_that_call(
    make_tool: Any, results_of: Any
) -> None:
    seen: list[tuple[str, str | None]] = []

    async def execute(
        tool_call_id: str, params: Any, signal: Any, on_update: Any, ctx: Any
    ) -> ToolResult:
        seen.append(("execute", ctx.tool_call_id))
        ok = await ctx.ui.confirm("Run?", f"execute {params.text}", timeout=5)
        return ToolResult(content=[TextContent(text=f"{params.text}:{ok}")])

    async def gate(event: Any, ctx: Any) -> None:
        seen.append(("tool_call", ctx.tool_call_id))
        await ctx.ui.confirm("Run?", f"gate {event.input.text}", timeout=5)

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("echo", execute=execute))
        pi.on("tool_call", gate)
        pi.on("tool_result", lambda e, c: seen.append(("tool_result", c.tool_call_id)))
        pi.on("tool_execution_end", lambda e, c: seen.append(("end", c.tool_call_id)))
        pi.on("agent_start", lambda e, c: seen.append(("agent_start", c.tool_call_id)))

    ui = PerCallUI()
    calls = [tool_call("echo", {"text": "a"}, id="a1"), tool_call("echo", {"text": "b"}, id="b2")]
    session = create_agent_session(
        model=ScriptedModel([calls, text("done")]), extensions=[ext], ui=ui, audit=False
    )
    await session.prompt("go")
    assert ("agent_start", None) in seen  # a handler of an event that belongs to no call
    for kind in ("tool_call", "execute", "tool_result", "end"):
        assert sorted(call for k, call in seen if k == kind) == ["a1", "b2"]
    # Every question was asked of the UI bound to the call that asked it.
    assert ui.by_call == {"a1": ["gate a", "execute a"], "b2": ["gate b", "execute b"]}
    assert [r.content[0].text for r in results_of(session)] == ["a:True", "b:True"]


async def test_c31_no_ui_confirm_is_false_at_once_and_gate_fails_closed(
    make_tool: Any, results_of: Any
) -> None:
    ran: list[Any] = []
    decisions: list[bool] = []
    model = ScriptedModel([tool_call("write", {"text": "DELETE"}), text("done")])
    session = create_agent_session(
        model=model, extensions=[gated_extension(make_tool, ran, decisions)], audit=False
    )
    started = time.monotonic()
    await session.prompt("go")
    assert time.monotonic() - started < 15  # never waited for the 30 s timeout
    assert decisions == [False] and ran == []
    assert results_of(session)[0].content[0].text == "Rejected by user."
    assert await NoUI().confirm("t", "m", timeout=30) is False


async def test_c31_c36_ui_gets_timeout_in_seconds_and_run_signal(
    make_tool: Any, results_of: Any
) -> None:
    ran: list[Any] = []
    decisions: list[bool] = []
    ui = DialogUI(answer=True)
    seen_ctx: list[Any] = []

    def spy(pi: ExtensionAPI) -> None:
        pi.on("tool_call", lambda e, c: seen_ctx.append(c))

    model = ScriptedModel([tool_call("write", {"text": "UPDATE t"}), text("done")])
    session = create_agent_session(
        model=model,
        extensions=[spy, gated_extension(make_tool, ran, decisions)],
        ui=ui,
        audit=False,
    )
    await session.prompt("go")
    assert isinstance(ui, UIContext)
    assert seen_ctx[0].has_ui is True and seen_ctx[0].ui is ui
    [asked] = ui.asked
    assert (asked["title"], asked["message"], asked["timeout"]) == (
        "Database write",
        "UPDATE t",
        30,
    )
    assert isinstance(asked["signal"], AbortSignal) and asked["signal"] is not None
    assert decisions == [True] and len(ran) == 1
    assert results_of(session)[0].is_error is False


async def test_c36_ui_confirm_returns_false_when_timeout_expires(
    make_tool: Any, results_of: Any
) -> None:
    ran: list[Any] = []
    decisions: list[bool] = []
    ui = DialogUI(answer=True, delay=10)
    model = ScriptedModel([tool_call("write", {"text": "DROP"}), text("done")])
    session = create_agent_session(
        model=model,
        extensions=[gated_extension(make_tool, ran, decisions, timeout=0.05)],
        ui=ui,
        audit=False,
    )
    started = time.monotonic()
    await session.prompt("go")
    assert time.monotonic() - started < 5
    assert ui.outcomes == ["expired"] and decisions == [False] and ran == []
    assert results_of(session)[0].content[0].text == "Rejected by user."


async def test_c31_ui_confirm_returns_false_when_signal_aborts(
    make_tool: Any, results_of: Any
) -> None:
    ran: list[Any] = []
    decisions: list[bool] = []
    ui = DialogUI(answer=True, delay=10)
    model = ScriptedModel([tool_call("write", {"text": "DROP"})])
    session = create_agent_session(
        model=model, extensions=[gated_extension(make_tool, ran, decisions)], ui=ui, audit=False
    )

    async def abort_when_asked() -> None:
        await ui.was_asked.wait()
        session.abort("user pressed stop")

    await asyncio.wait_for(asyncio.gather(session.prompt("go"), abort_when_asked()), timeout=5)
    assert ui.outcomes == ["aborted"] and decisions == [False] and ran == []
    [result] = results_of(session)
    assert (result.is_error, result.content[0].text) == (True, "Operation aborted")
    model.assert_complete()  # no further model request after the abort


async def test_c34_close_emits_session_shutdown_and_refuses_prompts(make_tool: Any) -> None:
    events: list[str] = []

    def ext(pi: ExtensionAPI) -> None:
        pi.on("session_start", lambda e, c: events.append(e.type))
        pi.on("session_shutdown", lambda e, c: events.append(e.type))

    session = create_agent_session(model=ScriptedModel([text("hi")]), extensions=[ext], audit=False)
    await session.prompt("go")
    await session.close()
    await session.close()  # idempotent: one shutdown
    assert events == ["session_start", "session_shutdown"]
    assert session.closed is True
    with pytest.raises(SessionClosedError):
        await session.prompt("again")


async def test_c34_close_without_any_prompt_still_reaches_extensions(make_tool: Any) -> None:
    events: list[str] = []
    reports: list[Any] = []

    def ext(pi: ExtensionAPI) -> None:
        pi.on("session_shutdown", lambda e, c: events.append(e.type))
        pi.on_error(reports.append)

    session = create_agent_session(model=ScriptedModel([]), extensions=[ext], audit=False)
    await session.close()
    assert events == ["session_shutdown"] and reports == []


async def test_c34_close_before_async_factories_finished_still_reaches_extensions() -> None:
    events: list[str] = []
    reports: list[Any] = []

    def ext(pi: ExtensionAPI) -> None:
        pi.on("session_shutdown", lambda e, c: events.append(e.type))
        pi.on_error(reports.append)

    async def later(pi: ExtensionAPI) -> None:
        pi.on("session_shutdown", lambda e, c: events.append("async ext"))

    session = create_agent_session(model=ScriptedModel([]), extensions=[ext, later], audit=False)
    await session.close()
    assert events == ["session_shutdown"]
    assert [r.error for r in reports] == []
