"""The session's hooks into the agent core: before and after each tool call.

Before a call, every extension ``tool_call`` handler runs (S5); a block stops the call. Then,
with the arguments ``execute`` will get, a tool that ``requires_approval`` asks for it
(:class:`~pi_notebook.approvals.tools.ToolApprovals`). The outcome of the whole chain is one
``tool_call`` audit record per call (D8), with or without handlers (C19: with no handler the
chain is skipped, but ``requires_approval`` holds).

After a call, every ``tool_result`` handler may patch the result; when the person edited the
call before approving it, the model is told so first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..agent.types import (
    AfterToolCallContext,
    AfterToolCallResult,
    BeforeToolCallContext,
    BeforeToolCallResult,
)
from ..ai.abort import AbortSignal
from ..ai.messages import ResultContent, TextContent, to_result_parts
from ..approvals.tools import ToolApprovals
from ..extensions.events import ToolCallEvent, ToolResultEvent
from ..extensions.runner import ExtensionRunner
from ..extensions.types import RegisteredTool

if TYPE_CHECKING:
    from ..audit import AuditLog

__all__ = ["ToolHooks"]


class ToolHooks:
    """``before_tool_call`` and ``after_tool_call`` of one session's agent.

    Args:
        runner: the session's extension runner (its ``tool_call`` and ``tool_result`` chains).
        approvals: approval for any tool, bound to the final arguments.
        tool_of: the registered tool of a name now (``None``: not in the registry; the
            wrapper still checks the call right before ``execute``).
        audit: where the decision of each call is recorded (``None``: nowhere).
    """

    __slots__ = ("_approvals", "_audit", "_runner", "_tool_of")

    def __init__(
        self,
        runner: ExtensionRunner,
        approvals: ToolApprovals,
        tool_of: Callable[[str], RegisteredTool | None],
        audit: AuditLog | None,
    ) -> None:
        self._runner = runner
        self._approvals = approvals
        self._tool_of = tool_of
        self._audit = audit

    async def before_tool_call(
        self, context: BeforeToolCallContext, signal: AbortSignal
    ) -> BeforeToolCallResult | None:
        """Every ``tool_call`` handler, then the tool's own approval; a block or ``None``."""
        runner = self._runner
        # C19: with no tool_call handler the chain is skipped, but requires_approval holds.
        if runner.has_handlers("tool_call"):
            event = ToolCallEvent(
                tool_call_id=context.tool_call.id,
                tool_name=context.tool_call.name,
                input=context.args,
            )
            try:
                decision = await runner.emit_tool_call(event)
            except Exception as exc:
                self._record_decision(context, "blocked", f"{type(exc).__name__}: {exc}")
                raise
            if decision is not None and decision.block:
                self._record_decision(context, "blocked", decision.reason)
                return BeforeToolCallResult(
                    block=decision.block, reason=decision.reason, terminate=decision.terminate
                )
        # After every handler: the approval binds to the arguments execute will get.
        tool = self._tool_of(context.tool_call.name)  # None: the wrapper still checks
        blocked = None
        if tool is not None and tool.definition.requires_approval:  # falsy: nothing to ask
            path, call_id = tool.source_info.path, context.tool_call.id
            blocked = await self._approvals.before(
                tool.definition,
                call_id,
                context.args,
                signal,
                lambda: runner.create_context(path, tool_call_id=call_id),
            )
        # One record of the decision per call, with or without handlers (the audit's recorder
        # does not listen to tool_call: this is the one place of that fact).
        self._record_decision(context, "blocked" if blocked else "allowed", blocked)
        return None if blocked is None else BeforeToolCallResult(block=True, reason=blocked)

    def _record_decision(
        self, context: BeforeToolCallContext, decision: str, reason: str | None
    ) -> None:
        """D8: the outcome of the whole tool_call chain, with the arguments execute will get.

        The one record of this fact (kind ``tool_call``); queued, never raises.
        """
        if self._audit is not None:
            from ..audit.records import ToolCallDecision

            self._audit.append(
                ToolCallDecision(
                    tool_call_id=context.tool_call.id,
                    tool_name=context.tool_call.name,
                    decision=decision,
                    reason=reason,
                    input=context.args,
                )
            )

    async def after_tool_call(
        self, context: AfterToolCallContext, signal: AbortSignal
    ) -> AfterToolCallResult | None:
        """Every ``tool_result`` handler's patch, after the note of an edit if there was one."""
        note = self._approvals.edit_note(context.tool_call.id)
        patch = None
        if self._runner.has_handlers("tool_result"):
            event = ToolResultEvent(
                tool_call_id=context.tool_call.id,
                tool_name=context.tool_call.name,
                input=context.args,
                content=list(context.result.content or []),
                details=context.result.details,
                is_error=context.is_error,
            )
            patch = await self._runner.emit_tool_result(event)
        if patch is None and note is None:
            return None
        content: list[ResultContent] | None = (
            to_result_parts(patch.content) if patch and patch.content is not None else None
        )
        if note is not None:  # the model is told the person edited what ran
            content = [TextContent(text=note), *(content or context.result.content or [])]
        return AfterToolCallResult(
            content=content,
            details=patch.details if patch else None,
            is_error=patch.is_error if patch else None,
        )
