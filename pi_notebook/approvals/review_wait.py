"""Waiting for a reviewer: the approvals UI a gate asks when a write needs four eyes.

:class:`ReviewUI` is an approvals UI like the notebook's: the one gate (``ask()``) calls its
``request_approval(request)``, which posts the request to the review store and polls the store
(off the event loop, every ``poll_s`` seconds) until a reviewer decides; it answers
``ApprovalOutcome(decision, approver=reviewer)``, so the capability and hash checks of a local
approval apply unchanged. Before the gate's deadline it closes the request as ``expired`` in
the store (an atomic update, so no reviewer can decide it afterwards) and waits for the gate
to end the call ``expired``; when the gate cancels it (deadline or abort) an open request is
closed too. If the store cannot be reached the answer is an error, which the gate turns into a
denial whose reason says why: the write does not run (fail closed).

The person at the requester's keyboard is told whom the request waits for, and who decided,
through the local UI's ``notify``, and on the call's card when the local UI has
``show_review(request, state, message)`` (the notebook's does; ``state`` is ``waiting``, then
``approved``, ``rejected`` or ``expired``). What does not belong here: the store (:mod:`.review`).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from pi_notebook.approvals.protocol import ApprovalOutcome, ApprovalRequest
from pi_notebook.approvals.review import ReviewQueue, ReviewRequest, deadline
from pi_notebook.errors import AuditError, ConfigurationError, PiNotebookError
from pi_notebook.identity import requester
from pi_notebook.secrets import safe_url, scrub

__all__ = ["ReviewContext", "ReviewSettings", "ReviewUI", "ReviewUnavailable", "ReviewWaiter"]

DEFAULT_POLL_S = 1.0
_KEYS = {"url", "reviewers", "timeout_s", "poll_s"}


class ReviewUnavailable(PiNotebookError):
    """The review store could not be reached or written: the write does not run."""


@dataclass(frozen=True, kw_only=True)
class ReviewSettings:
    """Where writes wait for review, and for whom.

    Attributes:
        url: the review store's SQLAlchemy URL (the team's audit database).
        reviewers: who may decide (never the requester).
        timeout_s: seconds a request waits for a decision (``None``: the extension's approval
            timeout).
        poll_s: seconds between looks at the store.
    """

    url: str
    reviewers: tuple[str, ...]
    timeout_s: float | None = None
    poll_s: float = DEFAULT_POLL_S

    @classmethod
    def of(cls, value: ReviewSettings | Mapping[str, Any]) -> ReviewSettings:
        """Settings from ``{"url": ..., "reviewers": [...], "timeout_s": ..., "poll_s": ...}``.

        Raises:
            ConfigurationError: a key is unknown, the URL is missing, or no reviewer is named.
        """
        if isinstance(value, ReviewSettings):
            return value
        unknown = sorted(set(value) - _KEYS)
        if unknown:
            raise ConfigurationError(
                f"review: unknown setting(s) {', '.join(unknown)}; use {', '.join(sorted(_KEYS))}"
            )
        url = value.get("url")
        reviewers: Any = value.get("reviewers")
        if not isinstance(url, str) or not url:
            raise ConfigurationError("review: give the store's SQLAlchemy URL as url")
        if isinstance(reviewers, str) or not isinstance(reviewers, list | tuple) or not reviewers:
            raise ConfigurationError("review: give reviewers as a list of user names")
        names = tuple(str(r) for r in cast(list[Any] | tuple[Any, ...], reviewers))
        timeout = value.get("timeout_s")
        poll = value.get("poll_s", DEFAULT_POLL_S)
        if timeout is not None and (not isinstance(timeout, int | float) or timeout <= 0):
            raise ConfigurationError("review: timeout_s is a positive number of seconds")
        if not isinstance(poll, int | float) or poll <= 0:
            raise ConfigurationError("review: poll_s is a positive number of seconds")
        return cls(
            url=url,
            reviewers=names,
            timeout_s=float(timeout) if timeout is not None else None,
            poll_s=float(poll),
        )

    def waits_for(self, asker: str) -> str:
        """Whom a request by ``asker`` waits for, in words."""
        names = [r for r in self.reviewers if r != asker]
        return " or ".join(names) if names else "nobody (no reviewer besides you)"


class ReviewWaiter:
    """The review store of one extension, opened on first use and kept for its later calls."""

    def __init__(self, settings: ReviewSettings) -> None:
        self.settings = settings
        self._queue: ReviewQueue | None = None
        self._lock = threading.Lock()

    def queue(self) -> ReviewQueue:
        """The store's queue (blocks: call it off the event loop).

        Raises:
            ReviewUnavailable: the store cannot be reached.
        """
        with self._lock:
            if self._queue is None:
                try:
                    self._queue = ReviewQueue(self.settings.url)
                except Exception as exc:
                    raise ReviewUnavailable(self.unreachable(exc)) from None
            return self._queue

    def unreachable(self, exc: BaseException) -> str:
        """Why a write does not run when the store failed with ``exc``, without secrets."""
        text = str(exc).strip()
        first = scrub(text.splitlines()[0] if text else "", self.settings.url)[:200]
        if isinstance(exc, ConfigurationError | AuditError):
            return f"the review could not be posted ({first}); nothing ran"
        return (
            f"the review store {safe_url(self.settings.url)} cannot be reached "
            f"({type(exc).__name__}: {first}); nothing ran"
        )

    def context(self, ctx: Any) -> ReviewContext:
        """``ctx`` with this store as its approvals UI (notices go to ``ctx.ui``)."""
        signal = getattr(ctx, "signal", None)
        local = getattr(ctx, "ui", None) if getattr(ctx, "has_ui", False) else None
        return ReviewContext(ctx, ReviewUI(self, local, signal))

    def close(self) -> None:
        with self._lock:
            if self._queue is not None:
                self._queue.close()
                self._queue = None


class ReviewUI:
    """An approvals UI whose answer is a reviewer's decision in the review store."""

    def __init__(self, waiter: ReviewWaiter, local_ui: Any = None, signal: Any = None) -> None:
        self.waiter = waiter
        self.local_ui = local_ui
        self.signal = signal

    def _notify(self, message: str, level: str = "info") -> None:
        notify = getattr(self.local_ui, "notify", None)
        if callable(notify):
            try:
                notify(message, level)
            except Exception:  # a notice that cannot be shown changes no decision
                pass

    def _show(self, request: ApprovalRequest, state: str, message: str) -> None:
        show = getattr(self.local_ui, "show_review", None)
        if callable(show):
            try:
                show(request, state, message)
            except Exception:  # a card that cannot be drawn changes no decision
                pass

    async def request_approval(self, request: ApprovalRequest) -> ApprovalOutcome:
        """Post ``request`` for review and wait for a reviewer's decision.

        Raises:
            ReviewUnavailable: the store cannot be reached or written (the gate denies).
        """
        settings = self.waiter.settings
        timeout = request.timeout_s if request.timeout_s is not None else settings.timeout_s
        if timeout is None:
            raise ReviewUnavailable("a review needs a deadline (timeout_s); nothing ran")
        # The store's deadline comes a little before the gate's, so the store closes the
        # request (atomically) before the gate gives up: no decision lands after it.
        margin = min(1.0, timeout * 0.1)
        own_deadline = time.monotonic() + timeout - margin
        queue, posted = await self._post(request, timeout - margin)
        waiting = _Waiting()
        try:
            return await self._decision(request, queue, posted, own_deadline, waiting)
        except BaseException as exc:
            # The gate's deadline, the run's abort, or the store failing while we wait: nobody
            # may decide the request now (if the store is down, its deadline closes it).
            if not waiting.closed:
                aborted = self.signal is not None and self.signal.aborted
                expired = isinstance(exc, asyncio.CancelledError) and not aborted
                close = queue.expire if expired else queue.withdraw
                try:
                    await asyncio.shield(asyncio.to_thread(close, posted.request_id))
                except BaseException:  # best effort: the deadline closes it anyway
                    pass
            raise

    async def _post(
        self, request: ApprovalRequest, timeout_s: float
    ) -> tuple[ReviewQueue, ReviewRequest]:
        """Post ``request`` to the store, decidable for ``timeout_s``, and say who it waits
        for (on the call's card and as a notice)."""
        settings, waiter = self.waiter.settings, self.waiter
        asker = requester()
        try:
            queue = await asyncio.to_thread(waiter.queue)
            posted = await asyncio.to_thread(
                queue.post, request, asker, settings.reviewers, deadline(timeout_s)
            )
        except ReviewUnavailable:
            raise
        except Exception as exc:
            raise ReviewUnavailable(waiter.unreachable(exc)) from None
        until = posted.expires_at.strftime("%H:%M:%S UTC")
        self._show(
            request,
            "waiting",
            f"Waiting for a review by {settings.waits_for(asker)} (until {until}).",
        )
        self._notify(
            f"Waiting for a review by {settings.waits_for(asker)} (request "
            f"{posted.request_id}, until {until}); you cannot approve your own request."
        )
        return queue, posted

    async def _decision(
        self,
        request: ApprovalRequest,
        queue: ReviewQueue,
        posted: ReviewRequest,
        own_deadline: float,
        waiting: _Waiting,
    ) -> ApprovalOutcome:
        """Poll the store until a reviewer decides; at ``own_deadline`` close the request as
        expired (then wait for the gate to end the call). ``waiting.closed`` tells whether
        the store has closed the request."""
        waiter, settings = self.waiter, self.waiter.settings
        while True:
            try:
                found = await asyncio.to_thread(queue.get, posted.request_id)
            except Exception as exc:
                raise ReviewUnavailable(waiter.unreachable(exc)) from None
            if found is not None and found.state in ("approved", "rejected"):
                waiting.closed = True
                edited = " as edited" if found.edited_args is not None else ""
                mark = "✔ Approved" if found.state == "approved" else "✘ Rejected"
                self._show(request, found.state, f"{mark}{edited} by {found.reviewer}.")
                self._notify(
                    f"Review {posted.request_id}: {found.state}{edited} by "
                    f"{found.reviewer}" + (f" ({found.note})" if found.note else "") + "."
                )
                return ApprovalOutcome(
                    found.state, approver=found.reviewer, edited_args=found.edited_args
                )
            if found is None or found.state != "open":
                waiting.closed = True
                raise ReviewUnavailable(
                    f"review request {posted.request_id} is no longer "
                    "open and was not decided; nothing ran"
                )
            left = own_deadline - time.monotonic()
            if left <= 0:
                if await asyncio.to_thread(queue.expire, posted.request_id):
                    waiting.closed = True
                    self._show(request, "expired", "No review decision in time: expired.")
                    self._notify(
                        f"Review {posted.request_id}: no decision in time; expired.", "warning"
                    )
                    await asyncio.Event().wait()  # the gate ends the call "expired"
                continue  # decided just before: read the decision
            await asyncio.sleep(min(settings.poll_s, left))


@dataclass
class _Waiting:
    """Whether the store has closed a request being waited for (decided, gone, expired)."""

    closed: bool = False


class ReviewContext:
    """A call's context whose approvals UI is the review store (everything else: the call's)."""

    def __init__(self, inner: Any, ui: ReviewUI) -> None:
        self._inner = inner
        self._ui = ui

    @property
    def has_ui(self) -> bool:
        return True

    @property
    def ui(self) -> ReviewUI:
        return self._ui

    @property
    def signal(self) -> Any:
        return getattr(self._inner, "signal", None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
