"""The reviewer's side of a four-eyes review, inline: one card per open request, with Approve
and Reject.

``%pi_review`` shows a :class:`ReviewBoard` of the review store's open requests. Each
:class:`ReviewCard` reads like the approval prompt a person gets for their own write (the same
classes, so the same look): who asks, the statement as code, why it needs approval, the
measured preview and when the request expires. A click decides through
:meth:`~pi_notebook.approvals.review.ReviewQueue.decide` as
:func:`~pi_notebook.identity.current_user`:

- decided: the card says who decided and the buttons go;
- refused (your own request, or you are not on its list): the card says why in one line and
  the request stays open (the refusal is in the audit);
- no longer open (another reviewer decided first, the requester stopped waiting): the card
  says so and the buttons go;
- the store fails: the card says so and the request stays as it was.

The board's text form (what a plain-text front end or nbconvert shows) lists the same requests.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import ipywidgets as widgets

from ..approvals.protocol import WritePreview
from ..approvals.review import ReviewQueue, ReviewRequest
from ..errors import ReviewRefused, StateError
from ..identity import current_user
from .prompts import preview_html
from .record import RECORD_CSS

__all__ = ["NO_OPEN_REQUESTS", "ReviewBoard", "ReviewCard", "statement_of"]

NO_OPEN_REQUESTS = "No open review requests in this store."

_DECIDED = {"approved": "✔ Approved by", "rejected": "✘ Rejected by"}


def statement_of(request: ReviewRequest) -> str:
    """What the request would run: its SQL, else its arguments as JSON."""
    sql = request.args.get("sql")
    if isinstance(sql, str):
        return sql
    return json.dumps(request.args, indent=2, default=str, ensure_ascii=False)


def _preview(stored: dict[str, Any] | None) -> WritePreview | None:
    """The stored preview (plain JSON values) as the ``WritePreview`` the prompt renders."""
    if stored is None:
        return None
    sample: Any = None
    rows = stored.get("sample")
    if isinstance(rows, list) and rows:
        import pandas as pd  # pyright: ignore[reportMissingTypeStubs]

        sample = pd.DataFrame(rows)
    count = stored.get("affected_rows")
    return WritePreview(
        affected_rows=count if isinstance(count, int) else None,
        plan=stored.get("plan"),
        sample=sample,
        method=stored.get("method"),
        note=stored.get("note"),
    )


def _expiry(moment: datetime, now: datetime) -> str:
    left = max(0, round((moment - now).total_seconds()))
    when = moment.astimezone(UTC).strftime("%H:%M:%S UTC")
    if left >= 60:
        return f"expires at {when} (in {left // 60} min)"
    return f"expires at {when} (in {left} s)"


class ReviewCard(widgets.VBox):
    """One open request and a reviewer's Approve / Reject.

    Args:
        request: the request as read from the store.
        decide: ``decide(request_id, decision)``: the request as decided (raises as
            :meth:`ReviewQueue.decide` does).
    """

    def __init__(self, request: ReviewRequest, decide: Callable[[str, str], ReviewRequest]) -> None:
        self.request = request
        self._decide_in_store = decide
        self.decision: str | None = None
        self.decided_by: str | None = None
        self.approve_button = widgets.Button(description="Approve", button_style="success")
        self.reject_button = widgets.Button(description="Reject", button_style="danger")
        self.approve_button.on_click(lambda _b: self.approve())
        self.reject_button.on_click(lambda _b: self.reject())
        self.note = widgets.Text(
            placeholder="Note for the requester (optional)", layout=widgets.Layout(width="24em")
        )
        self.status = widgets.HTML("<i>Waiting for your decision.</i>")
        self.controls = widgets.HBox([self.approve_button, self.reject_button, self.note])
        title = f"{request.requester} asks for a review: {request.tool_name}"
        meta = (
            f"Request {request.request_id} · reviewers: {', '.join(request.reviewers)} · "
            f"{_expiry(request.expires_at, datetime.now(UTC))}"
        )
        body: list[widgets.Widget] = [
            widgets.HTML(f"<b>{html.escape(title)}</b>"),
            widgets.HTML(f"<div class='pi-meta'>{html.escape(meta)}</div>"),
            widgets.HTML(f"<pre class='pi-sql'>{html.escape(statement_of(request))}</pre>"),
        ]
        if request.reasons:
            body.append(
                widgets.HTML(
                    f"<div class='pi-reasons'>Needs approval because: "
                    f"{html.escape('; '.join(request.reasons))}</div>"
                )
            )
        preview = _preview(request.preview)
        if preview is not None:
            body.append(widgets.HTML(preview_html(preview)))
        super().__init__(
            children=[*body, self.controls, self.status],
            layout=widgets.Layout(padding="6px", margin="4px 0"),
        )
        self.add_class("pi-prompt")
        self.add_class("pi-approval")
        self.add_class("pi-review-card")

    @property
    def decided(self) -> bool:
        return self.decision is not None

    def approve(self) -> bool:
        """Approve (what the Approve button does): whether it was decided now."""
        return self._decide("approved")

    def reject(self) -> bool:
        """Reject (what the Reject button does): whether it was decided now."""
        return self._decide("rejected")

    def _decide(self, decision: str) -> bool:
        if self.decided:
            return False
        try:
            decided = self._decide_in_store(self.request.request_id, decision)
        except ReviewRefused as exc:  # four eyes: the request stays open, the buttons stay
            self._say(str(exc), "pi-bad")
            return False
        except StateError as exc:  # decided by someone else, expired or withdrawn
            self._close(f"{str(exc)[:1].upper()}{str(exc)[1:]}.", "pi-warn")
            return False
        except Exception as exc:  # the store failed: nothing was decided
            self._say(
                f"The decision was not recorded ({type(exc).__name__}); nothing was "
                "decided. Try again, or use %pi_review --list.",
                "pi-bad",
            )
            return False
        self.decision, self.decided_by = decided.state, decided.reviewer
        note = f" ({decided.note})" if decided.note else ""
        text = f"{_DECIDED.get(decided.state, decided.state)} {decided.reviewer}{note}."
        self._close(text, "pi-ok" if decided.state == "approved" else "pi-warn")
        return True

    def _say(self, text: str, tone: str) -> None:
        self.status.value = f"<b class='{tone}'>{html.escape(text)}</b>"

    def _close(self, text: str, tone: str) -> None:
        self._say(text, tone)
        self.controls.children = ()
        self.children = tuple(c for c in self.children if c is not self.controls)


class ReviewBoard(widgets.VBox):
    """The open requests of one review store, one :class:`ReviewCard` each (oldest first).

    Args:
        queue: the store.
        reviewer: who decides (``None``: :func:`current_user` at each click).
    """

    def __init__(self, queue: ReviewQueue, *, reviewer: str | None = None) -> None:
        self.queue = queue
        self._reviewer = reviewer
        self.cards = [ReviewCard(r, self._decide) for r in queue.pending()]
        me = reviewer or current_user()
        if self.cards:
            n = len(self.cards)
            head = (
                f"{n} open review request{'s' if n != 1 else ''}; you decide as "
                f"<b>{html.escape(me)}</b>."
            )
        else:
            head = NO_OPEN_REQUESTS
        self.heading = widgets.HTML(f"<div class='pi-head'>{head}</div>")
        super().__init__(children=[widgets.HTML(RECORD_CSS), self.heading, *self.cards])
        self.add_class("pi-rec")
        self.add_class("pi-review-board")

    def _decide(self, request_id: str, decision: str) -> ReviewRequest:
        note = next(
            (c.note.value.strip() for c in self.cards if c.request.request_id == request_id), ""
        )
        return self.queue.decide(
            request_id, decision, self._reviewer or current_user(), note=note or None
        )

    def card(self, request_id: str) -> ReviewCard:
        """The card of ``request_id`` (a unique prefix will do).

        Raises:
            KeyError: no card, or more than one, has that id.
        """
        found = [c for c in self.cards if c.request.request_id.startswith(request_id)]
        if len(found) != 1:
            raise KeyError(request_id)
        return found[0]

    def text(self) -> str:
        """The board as plain text: one paragraph per request, and how it was decided."""
        if not self.cards:
            return NO_OPEN_REQUESTS
        parts: list[str] = []
        for card in self.cards:
            r = card.request
            state = (
                f"{card.decision} by {card.decided_by}"
                if card.decided
                else _expiry(r.expires_at, datetime.now(UTC))
            )
            parts.append(
                f"{r.request_id} · {r.requester} · {r.tool_name} · {state}\n"
                f"  {statement_of(r)}\n  because: {'; '.join(r.reasons) or '-'}"
            )
        return "\n".join(parts)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        bundle: Any = super()._repr_mimebundle_(**kwargs)
        if isinstance(bundle, dict):
            bundle["text/plain"] = self.text()
        return bundle
