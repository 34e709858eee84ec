"""Pi's pre-model events through a real session: input, before_agent_start, context,
before_provider_request (what each may return, how they chain, how faults are handled)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from pi_notebook import (
    ExtensionAPI,
    TextContent,
    ToolDefinition,
    ToolResult,
    UserMessage,
    create_agent_session,
    define_tool,
)
from pi_notebook.ai.abort import AbortSignal
from pi_notebook.ai.messages import content_text
from pi_notebook.ai.model import Context
from pi_notebook.ai.payload import BLOCKED_PREFIX
from pi_notebook.ai.stream import AssistantStream
from pi_notebook.audit import AuditLog
from pi_notebook.errors import AgentBusyError
from pi_notebook.extensions import BeforeAgentStartEventResult, InputEventResult
from pi_notebook.testing import ScriptedModel, text, tool_call


def session_with(*extensions: Any, model: Any, **kw: Any) -> Any:
    kw.setdefault("audit", False)
    return create_agent_session(model=model, extensions=list(extensions), builtin_tools=False, **kw)


def user_texts(messages: Any) -> list[str]:
    return [content_text(m.content) for m in messages if m.role == "user"]


# -- input ----------------------------------------------------------------------------------
async def test_input_transforms_chain_in_load_order_and_reach_model_and_history() -> None:
    seen: list[str] = []

    def first(pi: ExtensionAPI) -> None:
        pi.on("input", lambda e, ctx: seen.append(e.text) or {"text": e.text.upper()})

    def second(pi: ExtensionAPI) -> None:
        pi.on("input", lambda e, ctx: seen.append(e.text) or InputEventResult(text=e.text + "!"))

    model = ScriptedModel([text("ok")])
    session = session_with(first, second, model=model)
    await session.prompt("hello")
    assert seen == ["hello", "HELLO"]
    assert user_texts(model.calls[0].messages) == ["HELLO!"]
    assert user_texts(session.messages) == ["HELLO!"]


async def test_input_handled_makes_no_model_call_and_emits_no_events() -> None:
    later: list[str] = []

    def handler(pi: ExtensionAPI) -> None:
        pi.on("input", lambda e, ctx: {"handled": True})
        pi.on("input", lambda e, ctx: later.append(e.text))  # never reached
        pi.on("before_agent_start", lambda e, ctx: later.append("bas"))

    model = ScriptedModel([])
    session = session_with(handler, model=model)
    events: list[str] = []
    session.subscribe(lambda e: events.append(e.type))
    await session.prompt("/local command")
    assert model.calls == [] and events == [] and session.messages == [] and later == []


async def test_input_errors_and_garbled_answers_are_reported_and_isolated() -> None:
    def broken(pi: ExtensionAPI) -> None:
        def boom(e: Any, ctx: Any) -> None:
            raise RuntimeError("input exploded")

        pi.on("input", boom)
        pi.on("input", lambda e, ctx: {"txt": "typo"})
        pi.on("input", lambda e, ctx: 42)
        pi.on("input", lambda e, ctx: {"text": 7})
        pi.on("input", lambda e, ctx: {"text": e.text + " (kept)"})

    model = ScriptedModel([text("ok")])
    session = session_with(broken, model=model)
    await session.prompt("hi")
    assert user_texts(session.messages) == ["hi (kept)"]
    errors = session.extension_errors()
    assert [e["event"] for e in errors] == ["input"] * 4
    assert "input exploded" in errors[0]["error"]
    assert "unknown keys ['txt']" in errors[1]["error"]
    assert "returned int" in errors[2]["error"]
    assert "text of type int" in errors[3]["error"]


# -- before_agent_start ----------------------------------------------------------------------
async def test_before_agent_start_replaces_system_prompt_for_this_prompt_only_and_chains() -> None:
    seen: list[str] = []
    enabled = [True]

    def first(pi: ExtensionAPI) -> None:
        def extend(e: Any, ctx: Any) -> Any:
            seen.append(e.system_prompt)
            return {"system_prompt": e.system_prompt + "\nFIRST"} if enabled[0] else None

        pi.on("before_agent_start", extend)

    def second(pi: ExtensionAPI) -> None:
        def extend(e: Any, ctx: Any) -> Any:
            seen.append(e.system_prompt)
            if enabled[0]:
                return BeforeAgentStartEventResult(system_prompt=e.system_prompt + "\nSECOND")
            return None

        pi.on("before_agent_start", extend)

    model = ScriptedModel([text("one"), text("two")])
    session = session_with(first, second, model=model)
    base = session.system_prompt
    await session.prompt("a")
    assert model.calls[0].system_prompt == base + "\nFIRST\nSECOND"
    assert seen == [base, base + "\nFIRST"]
    assert session.system_prompt == base == session.base_system_prompt  # restored after the run
    enabled[0] = False
    await session.prompt("b")
    assert model.calls[1].system_prompt == base


async def test_before_agent_start_injects_one_message_per_handler_before_the_prompt() -> None:
    prompts: list[str] = []

    def rewrite(pi: ExtensionAPI) -> None:
        pi.on("input", lambda e, ctx: {"text": e.text.replace("{x}", "42")})

    def inject_a(pi: ExtensionAPI) -> None:
        def handler(e: Any, ctx: Any) -> Any:
            prompts.append(e.prompt)
            return {"message": "context A", "custom_type": "ctx_a"}

        pi.on("before_agent_start", handler)

    def inject_b(pi: ExtensionAPI) -> None:
        pi.on(
            "before_agent_start",
            lambda e, ctx: {"message": {"content": [TextContent(text="context B")]}},
        )

    model = ScriptedModel([text("one"), text("two")])
    session = session_with(rewrite, inject_a, inject_b, model=model)
    await session.prompt("x is {x}")
    assert prompts == ["x is 42"]  # before_agent_start sees the text after input
    sent = model.calls[0].messages
    assert user_texts(sent) == ["context A", "context B", "x is 42"]
    assert [m.custom_type for m in sent] == ["ctx_a", "<inline:3>", None]
    # Kept in the history (the next request of the run and later prompts see them too).
    await session.prompt("again")
    assert user_texts(model.calls[1].messages)[:3] == ["context A", "context B", "x is 42"]


async def test_before_agent_start_errors_are_reported_and_others_still_apply() -> None:
    def broken(pi: ExtensionAPI) -> None:
        def boom(e: Any, ctx: Any) -> None:
            raise ValueError("no schema")

        pi.on("before_agent_start", boom)
        pi.on("before_agent_start", lambda e, ctx: {"system_prompt": 3})
        pi.on("before_agent_start", lambda e, ctx: {"message": object()})
        pi.on("before_agent_start", lambda e, ctx: {"system_prompt": "replaced"})

    model = ScriptedModel([text("ok")])
    session = session_with(broken, model=model)
    await session.prompt("hi")
    assert model.calls[0].system_prompt == "replaced"
    errors = [e["error"] for e in session.extension_errors()]
    assert len(errors) == 3 and "no schema" in errors[0]
    assert "system_prompt of type int" in errors[1] and "message of type object" in errors[2]


class Switch(BaseModel):
    pass


async def test_before_agent_start_replacement_follows_an_active_set_change_mid_run() -> None:
    """C10 still holds: a tool that changes the active set changes the next request's base
    prompt, and this prompt's extension of the base is kept on top of it."""

    def ext(pi: ExtensionAPI) -> None:
        async def execute(*_: Any) -> ToolResult:
            pi.set_active_tools(["switch", "other"])
            return ToolResult(content=[TextContent(text="switched")])

        for name, snippet in (("switch", "switch tools"), ("other", "the other tool")):
            pi.register_tool(
                define_tool(
                    ToolDefinition(
                        name=name,
                        label=name,
                        description=name,
                        parameters=Switch,
                        execute=execute,
                        prompt_snippet=snippet,
                    )
                )
            )
        pi.on("before_agent_start", lambda e, ctx: {"system_prompt": e.system_prompt + "\nTAIL"})

    model = ScriptedModel([tool_call("switch", {}), text("done")])
    session = session_with(ext, model=model)
    session.set_active_tools_by_name(["switch"])
    await session.prompt("go")
    first, second = model.calls[0].system_prompt, model.calls[1].system_prompt
    assert first.endswith("\nTAIL") and "the other tool" not in first
    assert second.endswith("\nTAIL") and "- other: the other tool" in second
    assert (
        session.system_prompt == session.base_system_prompt and "TAIL" not in session.system_prompt
    )


async def test_second_prompt_while_before_agent_start_runs_is_refused() -> None:
    release = asyncio.Event()

    def slow(pi: ExtensionAPI) -> None:
        async def wait(e: Any, ctx: Any) -> None:
            await release.wait()

        pi.on("before_agent_start", wait)

    session = session_with(slow, model=ScriptedModel([text("ok")]))
    first = asyncio.ensure_future(session.prompt("one"))
    await asyncio.sleep(0)
    with pytest.raises(AgentBusyError):
        await session.prompt("two")
    release.set()
    await first
    assert user_texts(session.messages) == ["one"]


# -- context --------------------------------------------------------------------------------
async def test_context_rewrites_each_request_without_touching_the_history(make_tool: Any) -> None:
    copies: list[list[Any]] = []

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("echo"))

        def rewrite(e: Any, ctx: Any) -> Any:
            copies.append(e.messages)
            for message in e.messages:  # in-place changes to the copy change nothing
                if message.role == "user":
                    message.content[0].text = "MUTATED"
            return {"messages": [UserMessage(content="only this"), *e.messages[1:]]}

        pi.on("context", rewrite)

    def chained(pi: ExtensionAPI) -> None:
        pi.on("context", lambda e, ctx: {"messages": [*e.messages, UserMessage(content="tail")]})

    model = ScriptedModel([tool_call("echo", {"text": "x"}), text("done")])
    session = session_with(ext, chained, model=model)
    await session.prompt("original")
    assert len(copies) == 2  # once per model request
    assert user_texts(model.calls[0].messages) == ["only this", "tail"]
    assert [m.role for m in model.calls[1].messages] == ["user", "assistant", "toolResult", "user"]
    assert user_texts(session.messages) == ["original"]
    assert [m.role for m in session.messages] == ["user", "assistant", "toolResult", "assistant"]
    assert copies[1][2] is not session.messages[2]
    assert copies[1][2].details is session.messages[2].details  # details shared, never sent


async def test_context_garbled_answers_are_reported_and_the_copy_is_sent() -> None:
    def ext(pi: ExtensionAPI) -> None:
        pi.on("context", lambda e, ctx: {"messages": ["not a message"]})
        pi.on("context", lambda e, ctx: [UserMessage(content="bare list")])

    model = ScriptedModel([text("ok")])
    session = session_with(ext, model=model)
    await session.prompt("hi")
    assert user_texts(model.calls[0].messages) == ["hi"]
    errors = [e["error"] for e in session.extension_errors()]
    assert len(errors) == 2 and "not a list of UserMessage" in errors[0]


# -- before_provider_request ----------------------------------------------------------------
def blocker(reason: str = "contains a secret") -> Any:
    def ext(pi: ExtensionAPI) -> None:
        def check(e: Any, ctx: Any) -> Any:
            return {"block": "SECRET-1" in e.payload_text, "reason": reason}

        pi.on("before_provider_request", check)

    return ext


async def test_before_provider_request_block_sends_nothing_and_is_audited(tmp_path: Path) -> None:
    model = ScriptedModel([text("never")])
    log = AuditLog(f"sqlite:///{tmp_path}/audit.sqlite")
    session = session_with(blocker(), model=model, audit=log)
    events: list[str] = []
    session.subscribe(lambda e: events.append(e.type))
    await session.prompt("my key is SECRET-1")
    await session.close()
    assert model.calls == [] and model.remaining == 1  # no step consumed: nothing was sent
    [blocked] = model.blocked
    assert "SECRET-1" in blocked.payload_text and blocked.block_reason is not None
    final = session.messages[-1]
    assert final.stop_reason == "error"
    assert final.error_message.startswith(BLOCKED_PREFIX)
    assert "contains a secret (blocked by <inline:1>)" in final.error_message
    assert events[-1] == "agent_end"
    frame = log.to_dataframe()
    [record] = frame[frame["kind"] == "provider_request_blocked"]["payload"]
    assert record["reason"] == "contains a secret" and record["extension_path"] == "<inline:1>"
    assert len(record["payload_sha256"]) == 64 and record["payload_chars"] > 0
    assert "SECRET-1" not in json.dumps(frame["payload"].tolist(), default=str)
    log.close()


async def test_before_provider_request_sees_the_payload_that_is_sent() -> None:
    payloads: list[Any] = []

    def ext(pi: ExtensionAPI) -> None:
        pi.on("before_provider_request", lambda e, ctx: payloads.append((e.payload, e.model)))

    model = ScriptedModel([text("ok")])
    session = session_with(blocker(), ext, model=model)
    await session.prompt("harmless")
    [(payload, name)] = payloads
    assert payload == model.calls[0].payload and name == "scripted:scripted"
    assert payload["messages"] == [{"role": "user", "content": "harmless"}]
    assert payload["system"] == session.system_prompt


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"blok": True}, "unknown keys ['blok']"),
        ({"payload": {}}, "unknown keys ['payload']"),
        ("replace me", "returned str"),
        (RuntimeError("checker down"), "failed (checker down)"),
    ],
)
async def test_before_provider_request_fault_blocks_fail_closed(answer: Any, expected: str) -> None:
    def ext(pi: ExtensionAPI) -> None:
        def check(e: Any, ctx: Any) -> Any:
            if isinstance(answer, Exception):
                raise answer
            return answer

        pi.on("before_provider_request", check)

    model = ScriptedModel([text("never")])
    session = session_with(ext, model=model)
    await session.prompt("hi")
    assert model.calls == [] and len(model.blocked) == 1
    assert expected in session.messages[-1].error_message


class PlainModel:
    """A user's own model: ``stream`` takes no ``before_request``."""

    id = "plain"
    provider = "custom"

    def __init__(self) -> None:
        self.requests = 0

    async def stream(
        self, context: Context, *, signal: AbortSignal | None = None
    ) -> AsyncIterator[Any]:
        self.requests += 1
        out = AssistantStream(model=self.id, provider=self.provider)
        yield out.start()
        yield out.done()


async def test_model_without_the_hook_is_checked_on_the_neutral_payload() -> None:
    model = PlainModel()
    session = session_with(blocker(), model=model)
    await session.prompt("fine")
    assert model.requests == 1
    await session.prompt("SECRET-1 here")
    assert model.requests == 1
    assert session.messages[-1].error_message.startswith(BLOCKED_PREFIX)


async def test_c30_event_order_is_unchanged_by_pre_model_handlers(make_tool: Any) -> None:
    def plain(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("echo"))

    def busy(pi: ExtensionAPI) -> None:
        plain(pi)
        pi.on("input", lambda e, ctx: {"text": e.text})
        pi.on("before_agent_start", lambda e, ctx: {"system_prompt": e.system_prompt})
        pi.on("context", lambda e, ctx: {"messages": e.messages})
        pi.on("before_provider_request", lambda e, ctx: None)

    orders: list[list[str]] = []
    for ext in (plain, busy):
        model = ScriptedModel([tool_call("echo", {}), text("done")])
        session = session_with(ext, model=model)
        order: list[str] = []
        session.subscribe(lambda e, order=order: order.append(e.type))
        await session.prompt("go")
        orders.append(order)
    assert orders[0] == orders[1]
    assert orders[0][:4] == ["agent_start", "turn_start", "message_start", "message_end"]
