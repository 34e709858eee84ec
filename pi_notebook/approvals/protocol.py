"""The approval protocol: what a gate asks a person, and what the person answers.

A gate builds an :class:`ApprovalRequest` for one tool call (canonical arguments and their
hash, the reasons, a preview of the effect) and hands it to the UI's
``request_approval(request)``, which returns an :class:`ApprovalOutcome`. The request carries
everything the UI shows, so a UI never guesses which call is asking or why.

What does not belong here: deciding what needs approval, asking through a particular UI, the
capability the backend consumes, or storing the decision.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import (
    TYPE_CHECKING,
    Any,
    Literal,
    Protocol,
    TypeAlias,
    TypeGuard,
    get_args,
    runtime_checkable,
)

from ..agent.views import CallView, default_call_view

if TYPE_CHECKING:
    import pandas as pd  # pyright: ignore[reportMissingTypeStubs]

__all__ = [
    "DECISIONS",
    "ApprovalOutcome",
    "ApprovalRequest",
    "ApprovalUI",
    "Decision",
    "Grant",
    "WritePreview",
    "is_decision",
]

Decision: TypeAlias = Literal[
    "approved", "rejected", "expired", "aborted", "no_ui", "refused", "granted", "deferred"
]
"""The one decision about a call, as the gate answers it, the audit stores it and the UIs show it.

A person answers ``approved`` or ``rejected`` (the only answers a UI's
:class:`ApprovalOutcome` may carry that count); the gate itself decides ``expired`` (no answer
before the deadline), ``aborted`` (the run stopped while asking) and ``no_ui`` (nobody to
ask); ``refused`` means the person approved but what they approved may not run (an edit that
is refused, a grant that may not be created); ``granted`` means the call ran inside a scoped
grant without asking (audit kind ``grant_use``); ``deferred`` means the question went to
the person with the call's result and nothing ran: the answer comes with a new call (an MCP
client's retry, protocol 2026-07-28), which is decided on its own."""
DECISIONS: tuple[Decision, ...] = get_args(Decision)
"""Every :data:`Decision`, in the order above."""


def is_decision(value: object) -> TypeGuard[Decision]:
    """Whether ``value`` is one of the :data:`DECISIONS` (say, read back from the audit)."""
    return value in DECISIONS


@dataclass(frozen=True, kw_only=True)
class WritePreview:
    """What a write would do, measured before the person is asked.

    Attributes:
        affected_rows: rows the statement would change (``None`` if it cannot be known).
        plan: the engine's plan of the statement, as text.
        sample: a few of the rows it would touch.
        method: how ``affected_rows`` was measured, in words ("counted in a transaction
            that was rolled back", "counted with SELECT count(*)").
        note: anything the person should know about the preview itself.
    """

    affected_rows: int | None
    plan: str | None = None
    sample: pd.DataFrame | None = None
    method: str | None = None
    note: str | None = None


@dataclass(frozen=True, kw_only=True)
class Grant:
    """A scope of later calls that run without asking.

    Scoped over what the SQL does: statements whose operations are among ``operations``, whose
    every *written* table matches one of ``tables``, whose every table it only *reads*
    matches one of ``tables`` or ``reads``, that change at most ``max_rows`` rows, within
    ``ttl_s`` seconds of the grant. The operations apply to ``tables`` only: a table named in
    ``reads`` may be read by a statement inside the scope, never written.

    Attributes:
        operations: statement kinds, e.g. ``("INSERT",)``.
        tables: patterns of the tables the statements may write, e.g. ``("staging_*",)``
            (``*`` and ``?`` are wildcards that never cross a dot).
        max_rows: most rows one statement in the scope may change (``None``: no limit).
        ttl_s: seconds the grant lives.
        reads: patterns of tables the statements may read but never write, e.g.
            ``("orders",)`` for ``INSERT INTO staging_x SELECT … FROM orders``.
        tool_name: the tool the grant is for.
    """

    operations: tuple[str, ...]
    tables: tuple[str, ...]
    max_rows: int | None = None
    ttl_s: float = 1800.0
    reads: tuple[str, ...] = ()
    tool_name: str = "query_database"


@dataclass(frozen=True, kw_only=True)
class ApprovalRequest:
    """One question to a person about one tool call.

    Attributes:
        tool_call_id: the call asking; a UI shows the request on that call's card.
        tool_name: the tool being called.
        title: a short heading, e.g. "Database write".
        args: the canonical final arguments the approval will bind to.
        args_hash: SHA-256 of the canonical JSON of ``args``.
        reasons: why the call needs approval, one short sentence each.
        preview: what the call would do, when the tool can measure it.
        editable: the person may change the arguments before approving.
        timeout_s: seconds until an unanswered request expires (``None``: no limit).
        grant_scope: a scope the UI may offer to grant instead of this one approval (taken
            from the statement; the person may narrow or widen it), or ``None`` when this
            call cannot be covered by a grant.
        view: how the call reads, as its tool describes it (its code, language and other
            arguments); ``None``: a UI shows the arguments (see :meth:`call_view`).
    """

    tool_call_id: str
    tool_name: str
    title: str
    args: dict[str, Any]
    args_hash: str
    reasons: tuple[str, ...] = ()
    preview: WritePreview | None = None
    editable: bool = False
    timeout_s: float | None = None
    grant_scope: Grant | None = None
    view: CallView | None = None

    def call_view(self) -> CallView:
        """:attr:`view`, or the default: the title and the arguments."""
        return self.view if self.view is not None else default_call_view(self.title, self.args)


@dataclass(frozen=True)
class ApprovalOutcome:
    """A person's answer to an :class:`ApprovalRequest`.

    Attributes:
        decision: ``approved`` or ``rejected`` (see :data:`Decision`; a UI may say why it has
            no answer with ``expired`` or ``aborted``, which the gate counts as no approval).
        edited_args: arguments that replace the request's; they are checked and hashed again
            and the approval binds to them.
        grant: a scope of later calls that run without asking (instead of one approval).
        approver: who decided, when the UI knows.
    """

    decision: Decision
    _: KW_ONLY
    edited_args: dict[str, Any] | None = None
    grant: Grant | None = None
    approver: str | None = None


@runtime_checkable
class ApprovalUI(Protocol):
    """A UI that answers approval requests itself (the notebook, an MCP client bridge)."""

    async def request_approval(self, request: ApprovalRequest) -> ApprovalOutcome:
        """Show ``request`` and return the person's answer.

        May raise; the gate treats an exception, a malformed answer, the request's deadline
        passing (the gate cancels the call) or the run's abort as a denial.
        """
        ...
