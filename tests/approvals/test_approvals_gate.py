"""The one approval gate: which UI method it uses, and exact decisions."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

import pi_notebook.approvals.gate as gate_module
from pi_notebook.ai.abort import AbortController
from pi_notebook.approvals import ApprovalOutcome, ApprovalRequest, Grant, approval_method, ask
from pi_notebook.testing import ScriptedApprovalUI


def request(timeout_s: float | None = 30.0) -> ApprovalRequest:
    return ApprovalRequest(
        tool_call_id="c1",
        tool_name="write_note",
        title="Write a note",
        args={"text": "x"},
        args_hash="h" * 64,
        reasons=("it writes",),
        editable=True,
        timeout_s=timeout_s,
    )


def ctx(ui: Any, signal: Any = None) -> Any:
    return SimpleNamespace(has_ui=ui is not None, ui=ui, signal=signal)


class ConfirmUI:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.asked: list[tuple[str, str, Any, float | None]] = []

    async def confirm(
        self, title: str, message: str, *, signal: Any = None, timeout: float | None = None
    ) -> Any:
        self.asked.append((title, message, signal, timeout))
        return self.answer


class AnythingUI(ConfirmUI):
    """Answers every attribute (as the acceptance tests' UI does): no request_approval."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *a, **k: None


async def test_request_approval_is_used_when_the_ui_defines_it() -> None:
    ui = ScriptedApprovalUI("approved")
    answer = await ask(request(), ctx(ui))
    assert (answer.decision, answer.via, ui.confirms) == ("approved", "request_approval", [])
    assert ui.requests == [request()]


async def test_s24_c36_confirm_is_the_fallback_with_title_message_signal_timeout() -> None:
    signal = AbortController().signal
    ui = AnythingUI(True)
    assert approval_method(ui) is None  # a __getattr__ answering every name is not an async def
    answer = await ask(request(), ctx(ui, signal), message="DELETE FROM t")
    assert (answer.decision, answer.via) == ("approved", "confirm")
    assert ui.asked == [("Write a note", "DELETE FROM t", signal, 30.0)]
    rejected = await ask(request(), ctx(ConfirmUI(False)))
    assert (rejected.decision, rejected.reason) == ("rejected", "Rejected by user.")


async def test_no_ui_is_blocked_without_asking() -> None:
    answer = await ask(request(), ctx(None), no_ui_reason="Needs a person.")
    assert (answer.decision, answer.reason) == ("no_ui", "Needs a person.")


async def test_a_late_reject_is_rejected_not_expired(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reject clicked at 29.5 s of 30: the decision is the person's, however late."""
    now = [1000.0]
    monkeypatch.setattr(gate_module, "_clock", lambda: now[0])

    def late_reject(_req: ApprovalRequest) -> ApprovalOutcome:
        now[0] += 29.5  # the clock says 29.5 s passed; the gate's deadline has not fired
        return ApprovalOutcome("rejected")

    answer = await ask(request(30.0), ctx(ScriptedApprovalUI(late_reject)))
    assert (answer.decision, answer.reason) == ("rejected", "Rejected by user.")
    assert answer.waited_ms == pytest.approx(29_500)


async def test_the_gates_deadline_makes_expired_and_cancels_the_prompt() -> None:
    cancelled = asyncio.Event()

    async def never(_req: ApprovalRequest) -> ApprovalOutcome:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        raise AssertionError("unreachable")

    answer = await ask(request(0.05), ctx(ScriptedApprovalUI(never)))
    assert answer.decision == "expired" and "no decision within 0.05 s" in answer.reason
    assert cancelled.is_set()


async def test_a_confirm_only_ui_that_never_answers_expires() -> None:
    """A UI whose own timer would answer False after the deadline: the gate decides first."""

    class SlowConfirm:
        async def confirm(
            self, title: str, message: str, *, signal: Any = None, timeout: float | None = None
        ) -> bool:
            await asyncio.sleep((timeout or 0) + 5)
            return False

    answer = await ask(request(0.05), ctx(SlowConfirm()))
    assert answer.decision == "expired"


async def test_abort_while_asking_is_aborted() -> None:
    controller = AbortController()
    asked = asyncio.Event()

    async def wait_forever(_req: ApprovalRequest) -> ApprovalOutcome:
        asked.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    pending = asyncio.ensure_future(
        ask(request(), ctx(ScriptedApprovalUI(wait_forever), controller.signal))
    )
    await asked.wait()
    controller.abort()
    answer = await pending
    assert answer.decision == "aborted" and "aborted" in answer.reason
    already = await ask(request(), ctx(ScriptedApprovalUI("approved"), controller.signal))
    assert already.decision == "aborted"  # an aborted run is never asked


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("yes", "answered str"),
        (ApprovalOutcome("expired"), "only approved, rejected or deferred"),
        (ApprovalOutcome("approved", edited_args=["sql"]), "edited arguments"),  # type: ignore[arg-type]
        (ApprovalOutcome("approved", grant={"tables": ["*"]}), "not a Grant"),  # type: ignore[arg-type]
    ],
)
async def test_a_malformed_answer_is_a_denial(answer: Any, problem: str) -> None:
    result = await ask(request(), ctx(ScriptedApprovalUI(lambda _r: answer)))
    assert result.decision == "rejected" and not result.approved
    assert result.problem is not None and problem in result.problem


async def test_a_raising_ui_or_a_non_bool_confirm_is_a_denial() -> None:
    def boom(_req: ApprovalRequest) -> ApprovalOutcome:
        raise RuntimeError("widget gone")

    raised = await ask(request(), ctx(ScriptedApprovalUI(boom)))
    assert raised.decision == "rejected" and "RuntimeError: widget gone" in raised.reason
    odd = await ask(request(), ctx(ConfirmUI(1)))
    assert odd.decision == "rejected" and "not True or False" in (odd.problem or "")


async def test_an_approved_outcome_keeps_its_edit_grant_and_approver() -> None:
    grant = Grant(operations=("INSERT",), tables=("staging_*",), max_rows=5, ttl_s=60)
    outcome = ApprovalOutcome("approved", edited_args={"text": "y"}, grant=grant, approver="ana")
    answer = await ask(request(), ctx(ScriptedApprovalUI(lambda _r: outcome)))
    assert answer.approved and answer.outcome is outcome


def test_one_decision_type_keeps_the_audited_strings() -> None:
    from pi_notebook.approvals import DECISIONS, ApprovalEntry, is_decision

    assert DECISIONS == (
        "approved",
        "rejected",
        "expired",
        "aborted",
        "no_ui",
        "refused",
        "granted",
        "deferred",
    )
    assert is_decision("no_ui") and not is_decision("asked") and not is_decision(None)
    entry = ApprovalEntry(decision="expired", args_hash="h", args={})
    assert entry.payload()["decision"] == "expired"
    with pytest.raises(ValueError, match="unknown approval decision"):
        ApprovalEntry(decision="maybe", args_hash="h", args={})  # type: ignore[arg-type]
