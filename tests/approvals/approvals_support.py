"""Helpers of the approval tests: a scripted UI that implements ``request_approval``, a generic
tool that requires approval, and a session runner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from pi_notebook import (
    AgentSession,
    TextContent,
    ToolDefinition,
    ToolResult,
    create_agent_session,
    define_tool,
)
from pi_notebook.testing import ScriptedModel, text, tool_call


class NoteParams(BaseModel):
    text: str
    rows: int = 1


def note_tool(
    *,
    requires_approval: Any = True,
    ran: list[tuple[str, NoteParams]] | None = None,
    execution_mode: Any = "parallel",
    name: str = "write_note",
) -> ToolDefinition[NoteParams]:
    """A tool with side effects in a test's eyes: ``ran`` gets (call id, params) per execute."""

    async def execute(
        call_id: str, params: NoteParams, signal: Any, on_update: Any, ctx: Any
    ) -> ToolResult:
        if ran is not None:
            ran.append((call_id, params.model_copy()))
        return ToolResult(content=[TextContent(text=f"wrote {params.text}")], details={})

    return define_tool(
        ToolDefinition(
            name=name,
            label="Write a note",
            description="Write.",
            parameters=NoteParams,
            execute=execute,
            execution_mode=execution_mode,
            requires_approval=requires_approval,
        )
    )


def calls(*batches: list[tuple[str, dict[str, Any], str]]) -> ScriptedModel:
    """A model that sends each batch of (tool, args, id) calls in one turn, then "done"."""
    steps: list[Any] = [[tool_call(n, a, id=i) for n, a, i in batch] for batch in batches]
    return ScriptedModel([*steps, text("done")])


def results(session: AgentSession) -> dict[str, Any]:
    """Tool-result messages by call id."""
    return {m.tool_call_id: m for m in session.messages if m.role == "toolResult"}


def text_of(message: Any) -> str:
    return " ".join(getattr(p, "text", "") for p in message.content)


def audit_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'audit.sqlite'}"


def session_with(
    tmp_path: Path,
    model: ScriptedModel,
    *,
    ui: Any = None,
    tools: list[Any] | None = None,
    extensions: list[Any] | None = None,
    audit: Any = None,
) -> AgentSession:
    return create_agent_session(
        model=model,
        ui=ui,
        custom_tools=tools or [],
        extensions=extensions or [],
        audit=audit_url(tmp_path) if audit is None else audit,
    )
