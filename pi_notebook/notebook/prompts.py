"""Questions the agent asks the user, as widgets: approval, choice and text prompts.

A prompt is answered once: by a button click, by its method (``approve()``, ``reject()``,
``choose()``, ``submit()``, ``cancel()``) so scripts and tests can drive it, by its deadline
(``expired``) or by the run's abort signal (``aborted``). Afterwards every control is
disabled. ``wait()`` is what the UI adapter awaits; the buttons resolve it, so the kernel
must stay free to receive clicks (the ``%%pi`` cell has returned long before).
"""

from __future__ import annotations

import asyncio
import html
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Literal, TypeAlias

import ipywidgets as widgets

from ..ai.abort import AbortSignal
from ..approvals.protocol import ApprovalOutcome, ApprovalRequest, Decision, Grant, WritePreview
from .format import format_count, frame_html

__all__ = [
    "ApprovalPrompt",
    "ChoicePrompt",
    "GrantForm",
    "Prompt",
    "PromptAnswer",
    "TextPrompt",
    "preview_html",
]

PromptAnswer: TypeAlias = Decision | Literal["answered", "cancelled"]
"""How a prompt was answered: an approval prompt with a :data:`~pi_notebook.approvals.Decision`
(``approved``, ``granted`` when the person granted a scope, ``rejected``, ``expired``,
``aborted``), a choice or text prompt ``answered`` or ``cancelled`` (or ``expired``,
``aborted``)."""

_DECIDED_TEXT: dict[PromptAnswer, str] = {
    "approved": "✔ Approved",
    "granted": "✔ Granted: statements inside the scope run without asking",
    "rejected": "✘ Rejected",
    "expired": "⌛ Expired: no decision in time (counts as a rejection)",
    "aborted": "■ Aborted: the run was stopped",
    "answered": "✔ Answered",
    "cancelled": "✘ Cancelled",
}


class Prompt(widgets.VBox):
    """Base class: a question with an optional deadline, answered exactly once."""

    def __init__(
        self,
        *,
        title: str,
        timeout: float | None,
        body: Sequence[widgets.Widget],
        controls: Sequence[widgets.DOMWidget],
        self_expire: bool = True,
        also_disable: Sequence[widgets.DOMWidget] = (),
        after_controls: Sequence[widgets.Widget] = (),
    ) -> None:
        self.title = title
        self.timeout = timeout
        self.self_expire = self_expire
        self.decision: PromptAnswer | None = None
        self.value: Any = None
        self.decided_at: float | None = None
        self.requested_at = time.time()
        self._controls = [*controls, *also_disable]
        self._future: asyncio.Future[PromptAnswer] | None = None
        self._listeners: list[Callable[[Prompt], None]] = []
        self.countdown = widgets.HTML(self._countdown_text(timeout))
        heading = widgets.HTML(f"<b>{html.escape(title)}</b>")
        super().__init__(
            children=[
                heading,
                *body,
                widgets.HBox(list(controls)),
                *after_controls,
                self.countdown,
            ],
            layout=widgets.Layout(padding="6px", margin="4px 0"),
        )
        self.add_class("pi-prompt")

    @staticmethod
    def _countdown_text(remaining: float | None) -> str:
        if remaining is None:
            return "<i>Waiting for your decision.</i>"
        seconds = max(0, round(remaining))
        if seconds >= 60:
            return f"<i>Expires in {seconds // 60} min {seconds % 60:02d} s.</i>"
        return f"<i>Expires in {seconds} s.</i>"

    @property
    def decided(self) -> bool:
        return self.decision is not None

    def on_decided(self, listener: Callable[[Prompt], None]) -> None:
        """Call ``listener(prompt)`` once the prompt is answered (at once if it is)."""
        if self.decided:
            listener(self)
        else:
            self._listeners.append(listener)

    def _decide(self, decision: PromptAnswer, value: Any = None) -> bool:
        if self.decision is not None:
            return False  # the first answer wins; a late click or timeout changes nothing
        self.decision, self.value, self.decided_at = decision, value, time.time()
        for control in self._controls:
            control.set_trait("disabled", True)
        self.countdown.value = f"<b>{_DECIDED_TEXT.get(decision, decision)}</b>"
        if self._future is not None and not self._future.done():
            self._future.set_result(decision)
        for listener in self._listeners:
            listener(self)
        self._listeners.clear()
        return True

    def _aborted(self) -> None:
        self._decide("aborted")

    def expire(self) -> None:
        """Treat the prompt as unanswered in time."""
        self._decide("expired")

    async def _tick(self, deadline: float) -> None:
        while self.decision is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0 and not self.self_expire:
                # The caller owns the deadline (the approval gate): it cancels the wait.
                self.countdown.value = "<i>Expiring…</i>"
                await asyncio.sleep(1.0)
                continue
            if remaining <= 0:
                self._decide("expired")
                return
            self.countdown.value = self._countdown_text(remaining)
            await asyncio.sleep(min(1.0, remaining))

    async def wait(self, signal: AbortSignal | None = None) -> PromptAnswer:
        """Wait for the answer; returns the decision string.

        An aborted ``signal`` answers ``aborted``; the deadline answers ``expired``; being
        cancelled (the caller gave up) also counts as ``expired``.
        """
        if self.decision is not None:
            return self.decision
        loop = asyncio.get_running_loop()
        self._future = loop.create_future()
        remove = signal.add_listener(self._aborted) if signal else None
        ticker = None
        if self.timeout is not None and self.decision is None:
            ticker = loop.create_task(self._tick(time.monotonic() + self.timeout))
        try:
            if self.decision is not None:
                return self.decision
            return await self._future
        except asyncio.CancelledError:
            self._decide("expired")
            raise
        finally:
            if remove is not None:
                remove()
            if ticker is not None:
                ticker.cancel()


def _button(description: str, style: str, action: Callable[[], Any]) -> widgets.Button:
    button = widgets.Button(description=description, button_style=style)
    button.on_click(lambda _b: action())
    return button


class ApprovalPrompt(Prompt):
    """Approve / Reject for a call that needs the user's consent.

    Built from an :class:`~pi_notebook.approvals.ApprovalRequest` (:meth:`for_request`) it
    also shows the request's reasons and write preview, lets the person edit the SQL when the
    request is editable, and offers a scope to grant instead of one approval.

    Args:
        title: what is asked, e.g. "Database write".
        sql: the statement (or the arguments as JSON, or a ``confirm`` message), shown as code.
        reason: why it needs approval (``""``: the prompt gives no reasons line).
        timeout: seconds until the prompt expires (``None``: never).
        tool_call_id: the call this approval is for.
        request: the request shown (``None`` for a ``confirm``).
    """

    def __init__(
        self,
        *,
        title: str,
        sql: str,
        reason: str,
        timeout: float | None,
        tool_call_id: str | None = None,
        request: ApprovalRequest | None = None,
    ) -> None:
        self.sql = sql
        self.reason = reason
        self.tool_call_id = tool_call_id
        self.request = request
        self.approve_button = _button("Approve", "success", self.approve)
        self.reject_button = _button("Reject", "danger", self.reject)
        self.editor: widgets.Textarea | None = None
        self.grant_form: GrantForm | None = None
        self._edited: str | None = None
        self._grant: Grant | None = None
        # The code the request's tool shows may be edited, when it says which argument it is.
        view = request.call_view() if request is not None else None
        self._code_argument = view.code_argument if view is not None else None
        if (
            request is not None
            and request.editable
            and view is not None
            and view.code is not None
            and self._code_argument is not None
        ):
            self.editor = widgets.Textarea(
                value=sql, rows=min(12, sql.count("\n") + 2), layout=widgets.Layout(width="100%")
            )
            self.editor.add_class("pi-sql-editor")
            statement: widgets.Widget = widgets.VBox(
                [
                    widgets.HTML(
                        "<div class='pi-meta'>The statement (you may edit it before "
                        "approving; an edit is checked again):</div>"
                    ),
                    self.editor,
                ]
            )
        else:
            statement = widgets.HTML(f"<pre class='pi-sql'>{html.escape(sql)}</pre>")
        body: list[widgets.Widget] = [statement]
        if reason:
            body.append(
                widgets.HTML(
                    f"<div class='pi-reasons'>Needs approval because: {html.escape(reason)}</div>"
                )
            )
        preview = request.preview if request is not None else None
        if preview is not None:
            body.append(widgets.HTML(preview_html(preview)))
        disable: list[widgets.DOMWidget] = []
        scope = request.grant_scope if request is not None else None
        if scope is not None:
            self.grant_form = GrantForm(scope, on_grant=self.grant)
            disable.extend(self.grant_form.controls)
        if self.editor is not None:
            disable.append(self.editor)
        super().__init__(
            title=title,
            timeout=timeout,
            body=body,
            controls=[self.approve_button, self.reject_button],
            self_expire=request is None,
            also_disable=disable,
            after_controls=[self.grant_form] if self.grant_form else [],
        )
        self.add_class("pi-approval")

    @classmethod
    def for_request(cls, request: ApprovalRequest, *, timeout: float | None) -> ApprovalPrompt:
        """The prompt for an ``ApprovalRequest``: its code as its tool shows it (else the
        arguments), reasons, preview."""
        sql = request.call_view().code
        if sql is None:
            sql = json.dumps(request.args, indent=2, default=str, ensure_ascii=False)
        reason = "; ".join(request.reasons) or f"{request.tool_name} needs your approval"
        return cls(
            title=request.title,
            sql=sql,
            reason=reason,
            timeout=timeout,
            tool_call_id=request.tool_call_id,
            request=request,
        )

    def approve(self) -> bool:
        """Approve (what the Approve button does), with the edited SQL if it was edited.

        False if already decided.
        """
        if self.decided:
            return False
        self._edited = self._edit()
        return self._decide("approved")

    def _edit(self) -> str | None:
        """The SQL as the person edited it, or ``None`` when it is unchanged."""
        if self.editor is not None and self.editor.value.strip() != self.sql.strip():
            return self.editor.value
        return None

    def reject(self) -> bool:
        """Reject (what the Reject button does). False if already decided."""
        return self._decide("rejected")

    def grant(self, scope: Grant) -> bool:
        """Grant ``scope`` (a ``Grant``) instead of one approval (what the Grant button does).

        An edit of the SQL goes with it: this call runs as edited (checked again), the grant
        covers later calls. False if already decided.
        """
        if self.decided:
            return False
        self._grant, self._edited = scope, self._edit()
        return self._decide("granted")

    def outcome(self) -> ApprovalOutcome:
        """The ``ApprovalOutcome`` of the decision (approved with edits or a grant, else the
        denial as it was decided: rejected, expired or aborted)."""
        decision = self.decision or "expired"
        if decision in ("approved", "granted"):
            args = dict(self.request.args) if self.request is not None else {}
            edited = (
                {**args, self._code_argument: self._edited}
                if self._edited is not None and self._code_argument is not None
                else None
            )
            grant = self._grant if decision == "granted" else None
            return ApprovalOutcome("approved", edited_args=edited, grant=grant)
        if decision == "expired" or decision == "aborted":
            return ApprovalOutcome(decision)
        return ApprovalOutcome("rejected")


def preview_html(preview: WritePreview) -> str:
    """A ``WritePreview`` as HTML: rows it would change, how that was measured, plan, sample."""
    parts = ["<div class='pi-preview'>"]
    rows = preview.affected_rows
    how = preview.method
    if isinstance(rows, int):
        noun = "row" if rows == 1 else "rows"
        parts.append(f"<b>Would change {format_count(rows)} {noun}</b>")
    else:
        parts.append("<b>Rows it would change: unknown</b>")
    if how:
        parts.append(f" <span class='pi-meta'>({html.escape(str(how))})</span>")
    note = preview.note
    if note:
        parts.append(f"<div class='pi-meta'>{html.escape(str(note))}</div>")
    sample = preview.sample
    if sample is not None and len(sample.columns):
        parts.append("<div class='pi-meta'>Some of the rows it would touch:</div>")
        parts.append(frame_html(sample, max_rows=5))
    plan = preview.plan
    if plan:
        parts.append(
            f"<details><summary>Plan</summary><pre class='pi-args'>{html.escape(str(plan))}</pre></details>"
        )
    parts.append("</div>")
    return "".join(parts)


class GrantForm(widgets.VBox):
    """ "Grant a scope instead": operations × tables written × tables only read × max rows ×
    minutes.

    Prefilled from the statement's scope; ``Grant`` answers the prompt with the scope as
    edited (see :meth:`scope`).
    """

    def __init__(self, scope: Grant, *, on_grant: Callable[[Grant], Any]) -> None:
        self._base = scope
        self.operations = widgets.Text(value=", ".join(scope.operations), description="Operations")
        self.tables = widgets.Text(value=", ".join(scope.tables), description="Writes")
        self.reads = widgets.Text(value=", ".join(scope.reads), description="Only reads")
        self.max_rows = widgets.IntText(value=scope.max_rows or 0, description="Max rows")
        self.minutes = widgets.BoundedIntText(
            value=max(1, round(scope.ttl_s / 60)), min=1, max=24 * 60, description="Minutes"
        )
        self.grant_button = _button("Grant", "info", lambda: on_grant(self.scope()))
        self.controls: list[widgets.DOMWidget] = [
            self.operations,
            self.tables,
            self.reads,
            self.max_rows,
            self.minutes,
            self.grant_button,
        ]
        heading = widgets.HTML(
            "<div class='pi-meta'>Or grant a scope instead: later statements "
            "inside it run without asking, each one audited. The operations "
            "apply to the tables it writes; tables it only reads stay "
            "read-only.</div>"
        )
        super().__init__(
            children=[
                heading,
                widgets.HBox([self.operations, self.tables, self.reads]),
                widgets.HBox([self.max_rows, self.minutes, self.grant_button]),
            ]
        )
        self.add_class("pi-grant")

    def scope(self) -> Grant:
        """The ``Grant`` as the form says now (max rows 0 means no limit)."""

        def words(text: str) -> tuple[str, ...]:
            return tuple(w.strip() for w in text.split(",") if w.strip())

        return replace(
            self._base,
            operations=tuple(w.upper() for w in words(self.operations.value)),
            tables=words(self.tables.value),
            reads=words(self.reads.value),
            max_rows=self.max_rows.value or None,
            ttl_s=float(self.minutes.value) * 60,
        )


class ChoicePrompt(Prompt):
    """Pick one of several options (``ctx.ui.select``)."""

    def __init__(self, *, title: str, options: Sequence[str], timeout: float | None) -> None:
        self.dropdown = widgets.Dropdown(options=list(options))
        self.ok_button = _button("OK", "primary", lambda: self.choose(self.dropdown.value))
        self.cancel_button = _button("Cancel", "", self.cancel)
        super().__init__(
            title=title,
            timeout=timeout,
            body=[self.dropdown],
            controls=[self.ok_button, self.cancel_button],
        )
        self._controls.append(self.dropdown)

    def choose(self, option: Any) -> bool:
        """Answer with ``option``."""
        return self._decide("answered", option)

    def cancel(self) -> bool:
        """Decline to answer."""
        return self._decide("cancelled")


class TextPrompt(Prompt):
    """Type a line of text (``ctx.ui.input``)."""

    def __init__(self, *, title: str, placeholder: str, timeout: float | None) -> None:
        self.text = widgets.Text(placeholder=placeholder)
        self.submit_button = _button("Submit", "primary", lambda: self.submit(self.text.value))
        self.cancel_button = _button("Cancel", "", self.cancel)
        super().__init__(
            title=title,
            timeout=timeout,
            body=[self.text],
            controls=[self.submit_button, self.cancel_button],
        )
        self._controls.append(self.text)

    def submit(self, value: str) -> bool:
        """Answer with ``value``."""
        return self._decide("answered", value)

    def cancel(self) -> bool:
        """Decline to answer."""
        return self._decide("cancelled")
