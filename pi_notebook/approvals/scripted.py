"""``ScriptedApprovalUI``: a UI double that answers approval requests as a script says.

For tests, demos and scripts: it implements ``request_approval`` (so the gate never falls back
to ``confirm``), records every request, and answers with a fixed decision or with
``answer(request)`` (a function returning an :class:`ApprovalOutcome`, possibly async).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, cast

from pi_notebook.approvals.protocol import ApprovalOutcome, ApprovalRequest, Decision

__all__ = ["ScriptedApprovalUI"]

Answer = Callable[[ApprovalRequest], "ApprovalOutcome | Awaitable[ApprovalOutcome] | Any"]


class ScriptedApprovalUI:
    """Answers each request with ``answer`` (a decision, or a function of the request).

    Attributes:
        requests: every request given, in order.
        confirms: every ``confirm(title, message, timeout)`` asked (a UI with
            ``request_approval`` should never be asked that way); ``confirm`` answers False.
    """

    def __init__(self, answer: Answer | Decision = "approved") -> None:
        self.answer = answer
        self.requests: list[ApprovalRequest] = []
        self.confirms: list[tuple[str, str, float | None]] = []

    async def request_approval(self, request: ApprovalRequest) -> ApprovalOutcome:
        """Record ``request`` and answer it as scripted (a raising script raises here)."""
        self.requests.append(request)
        if isinstance(self.answer, str):
            return ApprovalOutcome(cast(Decision, self.answer))
        value = self.answer(request)
        if inspect.isawaitable(value):
            value = await value
        return value

    async def confirm(
        self, title: str, message: str, *, signal: Any = None, timeout: float | None = None
    ) -> bool:
        """Record the question and decline it."""
        self.confirms.append((title, message, timeout))
        return False
