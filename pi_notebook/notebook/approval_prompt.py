"""The approval prompt: Approve / Reject of a call, with its reasons, write preview, an
editable statement and a scope to grant instead.

Built from an :class:`~pi_notebook.approvals.ApprovalRequest`; its answer is an
:class:`~pi_notebook.approvals.ApprovalOutcome` (:meth:`ApprovalPrompt.outcome`).
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import ipywidgets as widgets

from ..approvals.protocol import ApprovalOutcome, ApprovalRequest, Grant, WritePreview
from .format import format_count, frame_html
from .prompt_widget import Prompt, button

__all__ = ["ApprovalPrompt", "GrantForm", "preview_html"]


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
        self.approve_button = button("Approve", "success", self.approve)
        self.reject_button = button("Reject", "danger", self.reject)
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
        body = _body(sql, self.editor, reason, request.preview if request is not None else None)
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


def _body(
    sql: str, editor: widgets.Textarea | None, reason: str, preview: WritePreview | None
) -> list[widgets.Widget]:
    """What an approval prompt shows above its buttons: the statement (in ``editor`` when it
    may be edited), why it needs approval, and the write's preview."""
    if editor is not None:
        statement: widgets.Widget = widgets.VBox(
            [
                widgets.HTML(
                    "<div class='pi-meta'>The statement (you may edit it before "
                    "approving; an edit is checked again):</div>"
                ),
                editor,
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
    if preview is not None:
        body.append(widgets.HTML(preview_html(preview)))
    return body


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
        self.grant_button = button("Grant", "info", lambda: on_grant(self.scope()))
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
