"""The notebook's ``UIContext``: what ``ctx.ui`` does in a notebook.

``confirm`` renders an :class:`~.prompts.ApprovalPrompt` inside the tool card being
confirmed. A gate runs while its call is being prepared, after that call's
``tool_execution_start``, so the latest started card that has not ended is the one asking.
``select`` and ``input`` render in the same place; ``notify`` adds a line to the run view.
Every answer is False/None on timeout (expired) or abort (C31, C36: timeouts in seconds).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..ai.abort import AbortSignal
from .prompts import ApprovalPrompt, ChoicePrompt, Prompt, TextPrompt
from .store import Notice

if TYPE_CHECKING:
    from .run import Run

__all__ = ["NotebookUI"]

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
        call_id = run.state.pending_card_id() if run is not None else None
        args = run.state.cards[call_id].args if run is not None and call_id is not None else None
        sql, reason = _sql_and_reason(title, message, args, self._explain)
        prompt = ApprovalPrompt(title=title, sql=sql, reason=reason,
                                timeout=self._timeout(timeout), tool_call_id=call_id)  # fmt: skip
        self._show(prompt)
        return await prompt.wait(signal) == "approved"

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
