"""The notebook's ``UIContext``: what ``ctx.ui`` does in a notebook.

``request_approval(request)`` renders the :class:`~pi_notebook.approvals.ApprovalRequest` it
is given on the card of ``request.tool_call_id``: the SQL (editable when the request is), the
reasons, the write preview, Approve / Reject and a scope to grant; it returns the person's
:class:`~pi_notebook.approvals.ApprovalOutcome`. Nothing is guessed and nothing is asked back
of the extension: the request carries all the prompt shows. The gate owns the deadline (it
cancels the wait, which the prompt shows as expired).

``confirm`` stays for extensions that only call it: the prompt lands on the card of the call
whose ``tool_call`` handlers are running (the notebook's own handler notes the call id just
before the others run), else on the latest started card. ``select`` and ``input`` render in
the same place; ``notify`` adds a line to the run view. Every answer is False/None on timeout
(expired) or abort (C31, C36: timeouts in seconds).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from ..ai.abort import AbortSignal
from .prompts import ApprovalPrompt, ChoicePrompt, Prompt, TextPrompt
from .store import Notice

if TYPE_CHECKING:
    from .run import Run

__all__ = ["CALL_BEING_GATED", "NotebookUI"]

# The call whose tool_call handlers are running in this task (set by the notebook's handler,
# which runs first); preparation of a batch is sequential, so it names the asking call.
CALL_BEING_GATED: ContextVar[str | None] = ContextVar("pi_call_being_gated", default=None)

log = logging.getLogger(__name__)
_BECAUSE = "needs approval because:"


DATABASE_WRITE = "Database write"


def _sql_and_reason(
    title: str, message: str, args: Any, explain: Callable[[str], str | None]
) -> tuple[str, str]:
    """The statement to show and why it needs approval.

    The database gate asks ``confirm("Database write", sql)``, as in the chapter: its
    message *is* the statement being approved (which a handler may have changed since
    the model sent it), so that is what the prompt shows. Other callers' messages are
    prose: the card's ``sql`` argument is shown, and the message says why.
    """
    if title == DATABASE_WRITE:
        return message, explain(message) or "it is not a plain read."
    sql = args.get("sql") if isinstance(args, dict) else None
    sql = sql if isinstance(sql, str) else message
    lowered = message.lower()
    if _BECAUSE in lowered:  # an extension that says why in its message
        return sql, message[lowered.index(_BECAUSE) + len(_BECAUSE) :].strip()
    if sql.strip() != message.strip():
        return sql, message
    return sql, explain(sql) or f"{title}: it is not a plain read."


class NotebookUI:
    """Renders the extension UI calls as widgets in the current run's view.

    Args:
        get_run: the run that is going (``None`` if none).
        default_timeout: seconds a prompt waits when the caller gives no timeout.
        explain: says why a statement needs approval, when the caller's message is only
            the statement (as the database gate's is).
    """

    def __init__(self, get_run: Callable[[], Run | None], *, default_timeout: float = 30.0,
                 explain: Callable[[str], str | None] = lambda sql: None) -> None:  # fmt: skip
        self._get_run = get_run
        self._explain = explain
        self.default_timeout = default_timeout
        self.prompts: list[Prompt] = []

    def _show(self, prompt: Prompt) -> None:
        self.prompts.append(prompt)
        run = self._get_run()
        if run is not None:
            run.attach_prompt(prompt, run.state.pending_card_id())

    def _timeout(self, timeout: float | None) -> float:
        return self.default_timeout if timeout is None else timeout

    async def confirm(self, title: str, message: str, *, signal: AbortSignal | None = None,
                      timeout: float | None = None) -> bool:  # fmt: skip
        """Ask Approve / Reject in the pending tool card; False unless approved in time."""
        run = self._get_run()
        call_id = CALL_BEING_GATED.get()
        if run is not None and (call_id is None or call_id not in run.state.cards):
            call_id = run.state.pending_card_id()
        args = run.state.cards[call_id].args if run is not None and call_id is not None else None
        sql, reason = _sql_and_reason(title, message, args, self._explain)
        prompt = ApprovalPrompt(title=title, sql=sql, reason=reason,
                                timeout=self._timeout(timeout), tool_call_id=call_id)  # fmt: skip
        self._show(prompt)
        return await prompt.wait(signal) == "approved"

    async def request_approval(self, request: Any) -> Any:
        """Show ``request`` on its call's card; the person's ``ApprovalOutcome``.

        Approve (with the SQL as edited, if it was), Reject, or Grant (a scope instead of one
        approval). If the run stops while asking, the outcome is ``aborted``; if the gate's
        deadline passes it cancels this call and the prompt shows ``expired``.
        """
        run = self._get_run()
        timeout = request.timeout_s if request.timeout_s is not None else self.default_timeout
        prompt = ApprovalPrompt.for_request(request, timeout=timeout)
        self.prompts.append(prompt)
        signal = None
        if run is not None:
            call_id = request.tool_call_id if request.tool_call_id in run.state.cards else None
            run.attach_prompt(prompt, call_id, reasons=tuple(request.reasons))
            signal = getattr(run.session, "signal", None)
        await prompt.wait(signal)
        return prompt.outcome()

    async def select(self, title: str, options: Sequence[str], *,
                     signal: AbortSignal | None = None, timeout: float | None = None) -> str | None:  # fmt: skip
        """Let the user pick one option; None if cancelled, expired or aborted."""
        prompt = ChoicePrompt(title=title, options=options, timeout=self._timeout(timeout))
        self._show(prompt)
        return prompt.value if await prompt.wait(signal) == "answered" else None

    async def input(self, title: str, placeholder: str = "", *,
                    signal: AbortSignal | None = None, timeout: float | None = None) -> str | None:  # fmt: skip
        """Let the user type a line; None if cancelled, expired or aborted."""
        prompt = TextPrompt(title=title, placeholder=placeholder, timeout=self._timeout(timeout))
        self._show(prompt)
        return prompt.value if await prompt.wait(signal) == "answered" else None

    def notify(self, message: str, level: str = "info") -> None:
        """Show a one-line notice in the run view (logged when no run is going)."""
        run = self._get_run()
        if run is None:
            log.info("%s: %s", level, message)
        else:
            run.dispatch(Notice(message=message, level=level))
