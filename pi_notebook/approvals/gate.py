"""The one approval gate: ask a person about one call and get an exact decision.

:func:`ask` is the only way a gate asks. It puts an
:class:`~pi_notebook.approvals.ApprovalRequest` to the call's UI (``ctx.ui``, bound to the
call): through ``ui.request_approval(request)`` when the UI defines it as an ``async def``
method, else -- and only here -- through the chapter's
``ui.confirm(title, message, signal=, timeout=)``, whose ``True`` / ``False`` is read as
``approved`` / ``rejected``. The decision is exact:

- ``approved`` / ``rejected``: what the person answered, whenever they answered it;
- ``expired``: the gate's own deadline (``request.timeout_s``) passed with no answer (the UI
  call is cancelled; "expired" is never rebuilt from elapsed time);
- ``aborted``: the run's signal fired while asking (or before);
- ``no_ui``: the session has no UI, so nobody can be asked.

A UI that raises, or answers anything but an :class:`ApprovalOutcome` (``True`` / ``False``
from ``confirm``), is a denial (``rejected``, with the problem stated). What does not belong
here: deciding what needs approval, recording the decision (the caller records it durably
before anything runs) and the capability that lets the call run.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol, cast

from pi_notebook.ai.abort import AbortSignal
from pi_notebook.approvals.hashing import canonical_json
from pi_notebook.approvals.protocol import ApprovalOutcome, ApprovalRequest, Decision, Grant
from pi_notebook.identity import requester

__all__ = [
    "DEFERRED_REASON",
    "NO_UI_REASON",
    "REJECTED_REASON",
    "AskContext",
    "GateAnswer",
    "approval_method",
    "ask",
    "expired_reason",
]

REJECTED_REASON = "Rejected by user."
DEFERRED_REASON = (
    "Not run yet: the question went to the person with this result; their answer comes with "
    "a new call of exactly these arguments."
)
NO_UI_REASON = "This call requires interactive approval."
ABORTED_REASON = "Not approved: the run was aborted while waiting for approval."
_clock = time.monotonic  # measures waited_ms only; tests replace it (decisions never use it)
# How long a cancelled UI call gets to clean up (its prompt disables its buttons).
_CANCEL_GRACE_S = 1.0


def expired_reason(timeout_s: float | None) -> str:
    """The block reason of an expired request."""
    return f"Not approved: no decision within {timeout_s:g} s (the request expired)."


class AskContext(Protocol):
    """What :func:`ask` needs of the call's context (an ``ExtensionContext`` has it)."""

    @property
    def has_ui(self) -> bool: ...
    @property
    def ui(self) -> Any: ...
    @property
    def signal(self) -> AbortSignal | None: ...


@dataclass(frozen=True, kw_only=True)
class GateAnswer:
    """What :func:`ask` found out.

    Attributes:
        decision: ``approved``, ``rejected``, ``expired``, ``aborted`` or ``no_ui`` (see the
            module docstring).
        reason: the block reason for the model ("" when approved).
        outcome: the person's valid answer (``approved`` or ``rejected``), else ``None``.
        via: how the person was asked.
        waited_ms: time from asking to the decision.
        problem: why the UI's answer was not accepted, when it raised or was malformed.
    """

    decision: Decision
    reason: str
    outcome: ApprovalOutcome | None = None
    via: Literal["request_approval", "confirm", "none"] = "none"
    waited_ms: float = 0.0
    problem: str | None = None

    @property
    def approved(self) -> bool:
        return self.decision == "approved"


def approval_method(ui: Any) -> Callable[[ApprovalRequest], Awaitable[Any]] | None:
    """``ui.request_approval`` if the UI defines it as an ``async def`` method, else ``None``.

    Looked up statically, so a UI whose ``__getattr__`` answers every name (a test double)
    is not taken for one that renders requests.
    """
    if ui is None:
        return None
    found: Any = inspect.getattr_static(ui, "request_approval", None)
    if isinstance(found, staticmethod | classmethod):
        found = cast(Any, found).__func__
    if not inspect.iscoroutinefunction(found):
        return None
    return cast(Callable[[ApprovalRequest], Awaitable[Any]], ui.request_approval)


def default_message(request: ApprovalRequest) -> str:
    """The ``confirm`` message for a request whose caller gave none: why, then the args."""
    reasons = "; ".join(request.reasons) or "it needs approval"
    try:
        args = canonical_json(request.args)
    except (TypeError, ValueError):
        args = repr(request.args)
    return f"{request.tool_name} needs approval because: {reasons}\n\n{args}"


async def ask(
    request: ApprovalRequest,
    ctx: AskContext,
    *,
    signal: AbortSignal | None = None,
    message: str | None = None,
    no_ui_reason: str = NO_UI_REASON,
) -> GateAnswer:
    """Ask the person about ``request`` through ``ctx.ui``; never raises (but for our own
    cancellation, which cancels the UI call too).

    Args:
        request: the question; ``request.timeout_s`` is the gate's deadline.
        ctx: the call's extension context (``has_ui``, ``ui``, ``signal``); its ``ui`` is bound
            to the call, so a confirm-only UI's prompt lands on that call too.
        signal: the run's abort signal (default ``ctx.signal``).
        message: the ``confirm`` message for a confirm-only UI (default: reasons and args;
            the database gate gives the statement, as in the chapter).
        no_ui_reason: the block reason when the session has no UI.
    """
    signal = signal if signal is not None else ctx.signal
    if not ctx.has_ui:
        return GateAnswer(decision="no_ui", reason=no_ui_reason)
    if signal is not None and signal.aborted:
        return GateAnswer(decision="aborted", reason=ABORTED_REASON)
    ui = ctx.ui
    typed = approval_method(ui) is not None
    via: Literal["request_approval", "confirm"] = "request_approval" if typed else "confirm"
    started = _clock()

    def answer(decision: Decision, reason: str, **more: Any) -> GateAnswer:
        waited = round((_clock() - started) * 1000, 3)
        return GateAnswer(decision=decision, reason=reason, via=via, waited_ms=waited, **more)

    try:
        task = _call_ui(ui, typed, request, message, signal)
    except Exception as exc:
        return answer("rejected", _failed(exc), problem=_describe(exc))
    state, value = await _race(task, signal, request.timeout_s)
    if state == "aborted" or (signal is not None and signal.aborted):
        return answer("aborted", ABORTED_REASON)
    if state == "expired":
        return answer("expired", expired_reason(request.timeout_s))
    if state == "error":
        return answer("rejected", _failed(value), problem=_describe(value))
    outcome, problem = _validated(value, via)
    if outcome is None:
        return answer("rejected", f"Not approved: {problem}.", problem=problem)
    if outcome.decision == "approved":
        return answer("approved", "", outcome=outcome)
    if outcome.decision == "deferred":
        return answer("deferred", DEFERRED_REASON, outcome=outcome)
    return answer("rejected", REJECTED_REASON, outcome=outcome)


def _call_ui(
    ui: Any,
    typed: bool,
    request: ApprovalRequest,
    message: str | None,
    signal: AbortSignal | None,
) -> asyncio.Future[Any]:
    """Start asking ``ui``: its ``request_approval``, or (the one place a confirm-only UI is
    adapted: True / False read in ``_validated``) its ``confirm`` with the request's title
    and ``message``."""
    if typed:
        pending: Any = ui.request_approval(request)
    else:
        pending = ui.confirm(
            request.title,
            message if message is not None else default_message(request),
            signal=signal,
            timeout=request.timeout_s,
        )
    return asyncio.ensure_future(pending)


async def _race(
    task: asyncio.Future[Any], signal: AbortSignal | None, timeout_s: float | None
) -> tuple[Literal["answered", "expired", "aborted", "error"], Any]:
    abort_wait: asyncio.Future[None] | None = None
    waiters: set[asyncio.Future[Any]] = {task}
    if signal is not None:
        abort_wait = asyncio.ensure_future(signal.wait())
        waiters.add(abort_wait)
    try:
        # The deadline timer is scheduled before the UI call first runs, so a UI whose own
        # timer has the same length always fires after it: the gate decides "expired".
        done, _ = await asyncio.wait(
            waiters, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        if abort_wait is not None:
            abort_wait.cancel()
        if not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=_CANCEL_GRACE_S)
    if task in done and not task.cancelled():
        exc = task.exception()
        return ("error", exc) if exc is not None else ("answered", task.result())
    if abort_wait is not None and abort_wait in done:
        return "aborted", None
    if task in done:  # the UI cancelled its own call: no answer
        return "error", asyncio.CancelledError("the approval prompt was cancelled")
    return "expired", None


def _validated(value: Any, via: str) -> tuple[ApprovalOutcome | None, str]:
    # Whoever answered without naming themselves is the person the call acts for: at the
    # keyboard of this kernel, or the verified subject of a served request.
    if via == "confirm":
        if value is True:
            return ApprovalOutcome("approved", approver=requester()), ""
        if value is False:
            return ApprovalOutcome("rejected", approver=requester()), ""
        return None, f"confirm() answered {type(value).__name__}, not True or False"
    if not isinstance(value, ApprovalOutcome):
        return None, f"the approval UI answered {type(value).__name__}, not an ApprovalOutcome"
    if value.decision not in ("approved", "rejected", "deferred"):
        return None, (
            f"the approval UI answered {value.decision!r}; only approved, rejected or "
            "deferred count"
        )
    edited = value.edited_args
    raw_edit: Any = edited  # a UI may answer with anything: check its shape at run time
    if raw_edit is not None and not (
        isinstance(raw_edit, dict)
        and all(isinstance(k, str) for k in cast(dict[Any, Any], raw_edit))
    ):
        return None, "the edited arguments are not a dict with string keys"
    if value.grant is not None and not isinstance(value.grant, Grant):  # pyright: ignore[reportUnnecessaryIsInstance]
        return None, "the grant is not a Grant"
    if value.approver is not None and not isinstance(value.approver, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        return None, "the approver is not a string"
    if value.approver is None:
        return replace(value, approver=requester()), ""
    return value, ""


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


def _failed(exc: BaseException) -> str:
    return f"Not approved: the approval prompt failed ({_describe(exc)})."
