"""The notebook's ``UIContext``: what ``ctx.ui`` does in a notebook.

Every question is shown on the card of the call that asks. A call's context hands its
extension ``NotebookUI.for_call(tool_call_id)`` as ``ctx.ui`` (see
:func:`~pi_notebook.extensions.ui.bound_to_call`), so ``confirm``, ``select`` and ``input`` asked
from a call's ``tool_call`` handler or its ``execute`` land on that call's card, however many
calls run at once; nothing is guessed. A question asked outside any call (say, from an
``agent_start`` handler) is shown below the cards.

``request_approval(request)`` renders the :class:`~pi_notebook.approvals.ApprovalRequest` it
is given on the card of ``request.tool_call_id``: the SQL (editable when the request is), the
reasons, the write preview, Approve / Reject and a scope to grant; it returns the person's
:class:`~pi_notebook.approvals.ApprovalOutcome`. The request carries all the prompt shows. The
gate owns the deadline (it cancels the wait, which the prompt shows as expired).

``confirm(title, message)`` is an extension's own yes/no question: the prompt shows the title,
the message as it is given, and Approve / Reject. ``notify`` adds a line to the run view. Every
answer is False/None on timeout (expired) or abort (C31, C36: timeouts in seconds).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from ..ai.abort import AbortSignal
from ..approvals.protocol import ApprovalOutcome, ApprovalRequest
from .prompts import ApprovalPrompt, ChoicePrompt, Prompt, TextPrompt
from .store import Notice

if TYPE_CHECKING:
    from .run import Run

__all__ = ["NotebookUI"]

log = logging.getLogger(__name__)


class NotebookUI:
    """Renders the extension UI calls as widgets in the current run's view.

    Args:
        get_run: the run that is going (``None`` if none).
        default_timeout: seconds a prompt waits when the caller gives no timeout.
        tool_call_id: the call whose card this UI's questions are shown on (``None``: below
            the cards); :meth:`for_call` makes one.
        prompts: the list every prompt is added to (shared with the UI it was bound from).
    """

    def __init__(
        self,
        get_run: Callable[[], Run | None],
        *,
        default_timeout: float = 30.0,
        tool_call_id: str | None = None,
        prompts: list[Prompt] | None = None,
    ) -> None:
        self._get_run = get_run
        self.default_timeout = default_timeout
        self.tool_call_id = tool_call_id
        self.prompts: list[Prompt] = prompts if prompts is not None else []

    def for_call(self, tool_call_id: str) -> NotebookUI:
        """This UI with its questions shown on the card of ``tool_call_id``."""
        return NotebookUI(
            self._get_run,
            default_timeout=self.default_timeout,
            tool_call_id=tool_call_id,
            prompts=self.prompts,
        )

    def _show(self, prompt: Prompt) -> None:
        self.prompts.append(prompt)
        run = self._get_run()
        if run is not None:
            run.attach_prompt(prompt, self.tool_call_id)

    def _timeout(self, timeout: float | None) -> float:
        return self.default_timeout if timeout is None else timeout

    async def confirm(
        self,
        title: str,
        message: str,
        *,
        signal: AbortSignal | None = None,
        timeout: float | None = None,
    ) -> bool:
        """Ask Approve / Reject on this call's card; False unless approved in time."""
        prompt = ApprovalPrompt(
            title=title,
            sql=message,
            reason="",
            timeout=self._timeout(timeout),
            tool_call_id=self.tool_call_id,
        )
        self._show(prompt)
        return await prompt.wait(signal) == "approved"

    async def request_approval(self, request: ApprovalRequest) -> ApprovalOutcome:
        """Show ``request`` on its call's card; the person's ``ApprovalOutcome``.

        Approve (with the SQL as edited, if it was), Reject, or Grant (a scope instead of one
        approval). If the run stops while asking, the outcome is ``aborted``; if the gate's
        deadline passes it cancels this call and the prompt shows ``expired``.
        """
        timeout = request.timeout_s if request.timeout_s is not None else self.default_timeout
        run = self._get_run()
        view_of = getattr(run, "view_of", None)
        if request.view is None and view_of is not None:  # shown as its tool describes it
            request = replace(request, view=view_of(request.tool_name, request.args))
        prompt = ApprovalPrompt.for_request(request, timeout=timeout)
        self.prompts.append(prompt)
        signal = None
        if run is not None:  # on the card the request names
            run.attach_prompt(prompt, request.tool_call_id, reasons=tuple(request.reasons))
            signal = run.session.signal
        await prompt.wait(signal)
        return prompt.outcome()

    async def select(
        self,
        title: str,
        options: Sequence[str],
        *,
        signal: AbortSignal | None = None,
        timeout: float | None = None,
    ) -> str | None:
        """Let the user pick one option; None if cancelled, expired or aborted."""
        prompt = ChoicePrompt(title=title, options=options, timeout=self._timeout(timeout))
        self._show(prompt)
        return prompt.value if await prompt.wait(signal) == "answered" else None

    async def input(
        self,
        title: str,
        placeholder: str = "",
        *,
        signal: AbortSignal | None = None,
        timeout: float | None = None,
    ) -> str | None:
        """Let the user type a line; None if cancelled, expired or aborted."""
        prompt = TextPrompt(title=title, placeholder=placeholder, timeout=self._timeout(timeout))
        self._show(prompt)
        return prompt.value if await prompt.wait(signal) == "answered" else None

    def show_review(self, request: ApprovalRequest, state: str, message: str) -> None:
        """Show a four-eyes review of ``request`` on its call's card: ``waiting`` (for whom),
        then ``approved``, ``rejected`` or ``expired`` (the reviewer's side is ``%pi_review``)."""
        run = self._get_run()
        if run is not None:
            run.show_review(request.tool_call_id, state, message, tuple(request.reasons))

    def notify(self, message: str, level: str = "info") -> None:
        """Show a one-line notice in the run view (logged when no run is going)."""
        run = self._get_run()
        if run is None:
            log.info("%s: %s", level, message)
        else:
            run.dispatch(Notice(message=message, level=level))
