"""Asking an MCP client's user to approve a call: the UI object the MCP server's session uses.

Every gate asks ``ui.request_approval(request)`` (through :func:`pi_notebook.approvals.ask`);
an extension's own yes/no question comes as ``ui.confirm(title, message)`` and is put to the
client as it is asked. :class:`McpApprovalUI` answers for the MCP request being served, which
:func:`serving` makes current:

* ``elicit`` (protocol revisions up to 2025-11-25, what desktop clients negotiate today): the
  question goes to the client as an ``elicitation/create`` request in the middle of the call,
  and the answer decides the call.
* ``input_required`` (2026-07-28, the SDK's default): a server may not send requests
  mid-call. The first round records the question and answers "rejected", so nothing runs;
  the server then returns an ``InputRequiredResult`` carrying the question and a one-shot
  nonce. When the client retries with the person's answer, that answer applies to exactly
  one new call, and only if its statement hashes the same (and its preview counts the same
  rows) as the one shown. A replayed retry finds its nonce spent and is asked again.
* ``unavailable``: the client did not declare elicitation; approvals are refused, and the
  server tells the client why.

Fail closed everywhere: no current request, a missing answer, a declined, cancelled or
garbled answer, or an exception all mean "rejected".

What does not belong here: deciding what needs approval (the gates) or the MCP wire handling
(:mod:`pi_notebook.mcp.server`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Generator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from mcp.types import ElicitResult

from pi_notebook.ai.abort import AbortSignal
from pi_notebook.approvals import ApprovalOutcome, ApprovalRequest, Decision, WritePreview
from pi_notebook.approvals.hashing import args_hash

__all__ = [
    "APPROVAL_SCHEMA",
    "Leg",
    "McpApprovalUI",
    "PendingApprovals",
    "PriorAnswer",
    "Question",
    "RequestApproval",
    "approval_message",
    "decision_of",
    "serving",
]

log = logging.getLogger(__name__)

Mode = Literal["elicit", "input_required", "unavailable"]
Leg: TypeAlias = Decision | Literal["asked", "failed"]
"""What one question of a request came to: a decision (``approved``, ``rejected``,
``refused``), ``asked`` (deferred to the client's retry) or ``failed`` (the question failed)."""

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Run this statement once",
            "description": "Approve exactly the statement shown, for this one call.",
            "default": False,
        }
    },
    "required": ["approve"],
}
"""The form a client shows: one boolean. Only ``accept`` with ``approve: true`` approves."""

_SAMPLE_ROWS = 5


@dataclass(frozen=True, kw_only=True)
class Question:
    """What one approval asks: the statement (or arguments, or message) shown, bound to
    ``args_hash``; ``tool_name`` is ``None`` for an extension's own ``confirm``."""

    title: str
    tool_name: str | None
    statement: str
    args_hash: str
    reasons: tuple[str, ...] = ()
    preview: WritePreview | None = None
    args: dict[str, Any] = field(default_factory=dict[str, Any], compare=False)
    """The arguments asked about (``{}`` for a ``confirm``)."""

    @property
    def affected_rows(self) -> int | None:
        return self.preview.affected_rows if self.preview is not None else None


@dataclass(kw_only=True)
class PriorAnswer:
    """The person's answer to a question asked in an earlier round (2026-07-28), usable once."""

    args_hash: str
    affected_rows: int | None
    approved: bool
    asked_in: str | None = None
    used: bool = False


@dataclass(kw_only=True)
class RequestApproval:
    """The approval state of the MCP request being served.

    Attributes:
        client: the client's name (from ``clientInfo``), shown in questions and recorded.
        mode: how a question reaches the person (see the module docstring).
        elicit: sends ``elicitation/create`` for this request (``elicit`` mode).
        answer: an earlier round's answer (``input_required`` mode).
        asked: the question deferred to the client's retry (``input_required`` mode).
        refused: a question was refused because the client cannot be asked.
        decisions: what each question of the request came to, in order.
    """

    client: str
    mode: Mode
    elicit: Callable[[str, dict[str, Any]], Awaitable[ElicitResult]] | None = None
    answer: PriorAnswer | None = None
    asked: Question | None = None
    refused: bool = False
    decisions: list[Leg] = field(default_factory=list[Leg])


_current: ContextVar[RequestApproval | None] = ContextVar("pi_notebook_mcp_request", default=None)


@contextmanager
def serving(approval: RequestApproval) -> Generator[RequestApproval]:
    """Make ``approval`` the state questions of this task (and tasks it starts) go to."""
    token = _current.set(approval)
    try:
        yield approval
    finally:
        _current.reset(token)


def decision_of(response: Any) -> bool:
    """True only for ``accept`` with ``{"approve": true}``; anything else is a denial."""
    if not isinstance(response, ElicitResult) or response.action != "accept":
        return False
    return bool(response.content) and (response.content or {}).get("approve") is True


def _table(sample: Any) -> str:
    try:
        head = sample.head(_SAMPLE_ROWS)
        return head.to_string(index=False, max_colwidth=40)
    except Exception:  # a preview that cannot be shown is left out, never fatal
        return ""


def approval_message(question: Question, client: str) -> str:
    """The text a client shows: who asks, the exact statement, why, the preview, the binding."""
    what = f"this {question.tool_name} call" if question.tool_name else "this call"
    lines = [
        f"{question.title}: {client} asks to run {what}.",
        "",
        *(f"    {line}" for line in question.statement.splitlines() or [""]),
        "",
    ]
    if question.reasons:
        lines.append("Why it needs approval: " + "; ".join(question.reasons) + ".")
    preview = question.preview
    if preview is not None:
        if preview.affected_rows is not None:
            how = f" ({preview.method})" if preview.method else ""
            lines.append(f"Preview: {preview.affected_rows} row(s) would change{how}.")
        if preview.note:
            lines.append(f"Note: {preview.note}")
        if preview.plan:
            lines.append("Plan: " + " ".join(preview.plan.split())[:500])
        if preview.sample is not None:
            table = _table(preview.sample)
            if table:
                lines += ["Rows it would touch (first few):", table]
    lines.append(
        f"Approving runs exactly this, once (approval hash {question.args_hash[:12]}…); "
        "any change needs a new approval."
    )
    return "\n".join(lines)


@dataclass
class _Pending:
    question: Question
    key: str
    asked_in: str | None
    expires_at: float


Expired = Callable[[str | None, Question], None]
"""Told of a question nobody answered in time: the call that asked it, and the question."""


class PendingApprovals:
    """Questions sent in an ``InputRequiredResult``, waiting for the client's retry.

    Each is keyed by a random nonce that travels in the (sealed) ``requestState`` and is
    consumed by the first retry that carries it, so a replayed retry finds nothing. A question
    whose time ran out unanswered is handed to ``on_expired`` (the server audits it as
    ``expired``) when the store next looks, or at :meth:`close`.
    """

    def __init__(
        self,
        ttl_s: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_expired: Expired | None = None,
    ) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._on_expired = on_expired
        self._pending: dict[str, _Pending] = {}

    def add(self, question: Question, key: str, *, asked_in: str | None = None) -> str:
        """Remember ``question`` (asked by the call ``asked_in``); returns its nonce."""
        self._expire()
        nonce = secrets.token_urlsafe(18)
        self._pending[nonce] = _Pending(question, key, asked_in, self._clock() + self.ttl_s)
        return nonce

    def consume(self, nonce: str, responses: dict[str, Any]) -> PriorAnswer | None:
        """The answer for ``nonce`` (gone afterwards), or ``None`` if it is unknown, spent or
        expired. A missing or garbled response is a denial, not a retry."""
        self._expire()
        entry = self._pending.pop(nonce, None)
        if entry is None:
            return None
        return PriorAnswer(
            args_hash=entry.question.args_hash,
            affected_rows=entry.question.affected_rows,
            approved=decision_of(responses.get(entry.key)),
            asked_in=entry.asked_in,
        )

    def __len__(self) -> int:
        self._expire()
        return len(self._pending)

    def close(self) -> None:
        """The server is stopping: every question still waiting ends unanswered."""
        self._expire(everything=True)

    def _expire(self, *, everything: bool = False) -> None:
        now = self._clock()
        gone = [n for n, p in self._pending.items() if everything or p.expires_at <= now]
        for nonce in gone:
            entry = self._pending.pop(nonce)
            if self._on_expired is not None:
                try:
                    self._on_expired(entry.asked_in, entry.question)
                except Exception:  # recording is best effort; the question is gone either way
                    log.exception("mcp: recording an unanswered question failed")


class McpApprovalUI:
    """The UI of the MCP server's session: every question goes to the current MCP client."""

    async def request_approval(self, request: ApprovalRequest) -> ApprovalOutcome:
        """Ask the current client about ``request`` (see the module docstring)."""
        statement = request.call_view().code  # the code its tool shows, else the arguments
        question = Question(
            title=request.title,
            tool_name=request.tool_name,
            statement=statement if statement is not None else _arguments_text(request.args),
            args_hash=request.args_hash,
            reasons=tuple(request.reasons),
            preview=request.preview,
            args=dict(request.args),
        )
        current = _current.get()
        approved = await self._decide(question, request.timeout_s)
        if current is not None and current.asked is question:
            # Asked in this call's result (protocol 2026-07-28): no decision yet, nothing runs;
            # the client's retry is a new call, decided on its own.
            return ApprovalOutcome("deferred")
        approver = current.client if current is not None else None
        return ApprovalOutcome("approved" if approved else "rejected", approver=approver)

    async def confirm(
        self,
        title: str,
        message: str,
        *,
        signal: AbortSignal | None = None,
        timeout: float | None = None,
    ) -> bool:
        """An extension's own question: ``message`` is shown as it is, and a retry's answer
        (``input_required``) binds to this title and message."""
        question = Question(
            title=title,
            tool_name=None,
            statement=message,
            args_hash=args_hash({"title": title, "message": message}),
        )
        return await self._decide(question, timeout)

    async def select(self, title: str, options: Sequence[str], **_: Any) -> str | None:
        return None  # an MCP client is asked yes/no questions only

    async def input(self, title: str, placeholder: str = "", **_: Any) -> str | None:
        return None

    def notify(self, message: str, level: str = "info") -> None:
        """Nothing reaches the client outside a call; notes go to the server's log."""
        log.info("%s: %s", level, message)

    async def _decide(self, question: Question, timeout: float | None) -> bool:
        current = _current.get()
        if current is None:  # not serving a request: nobody to ask
            return False
        if current.mode == "unavailable":
            current.refused = True
            current.decisions.append("refused")
            return False
        if current.mode == "input_required":
            answer = current.answer
            if (
                answer is not None
                and not answer.used
                and answer.args_hash == question.args_hash
                and answer.affected_rows == question.affected_rows
            ):
                answer.used = True
                current.decisions.append("approved" if answer.approved else "rejected")
                return answer.approved
            current.asked = question  # asked in the result; this round runs nothing
            current.decisions.append("asked")
            return False
        assert current.elicit is not None
        try:
            ask = current.elicit(approval_message(question, current.client), APPROVAL_SCHEMA)
            response = await (asyncio.wait_for(ask, timeout) if timeout else ask)
        except Exception:  # a failed or late question is a denial
            current.decisions.append("failed")
            return False
        approved = decision_of(response)
        current.decisions.append("approved" if approved else "rejected")
        return approved


def _arguments_text(args: dict[str, Any]) -> str:
    return json.dumps(args, indent=2, sort_keys=True, default=str)
