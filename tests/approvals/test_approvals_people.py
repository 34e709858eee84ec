"""Who asked and who approved: ``requester`` and ``approver`` on every decision record.

The requester is whom the call acts for (the session's user, or the subject a served request
acts for); the approver is the person who decided: the UI's word, else the person at the
keyboard; a grant's approver for ``granted``; nobody when nobody decided.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pi_notebook import create_agent_session
from pi_notebook.approvals import ApprovalOutcome, Grant, approvals_dataframe
from pi_notebook.audit import AuditLog
from pi_notebook.database import database_extension
from pi_notebook.identity import acting_for
from pi_notebook.testing import ScriptedApprovalUI, ScriptedModel, text, tool_call


@pytest.fixture(autouse=True)
def ana_at_the_keyboard(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    monkeypatch.setenv("PI_NOTEBOOK_USER", "ana")


class ConfirmOnly:
    def __init__(self, answer: bool) -> None:
        self.answer = answer

    async def confirm(
        self, title: str, message: str, *, signal: Any = None, timeout: float | None = None
    ) -> bool:
        return self.answer


async def _decisions(tmp_path: Path, statements: list[str], ui: Any, **options: Any) -> Any:
    db = f"sqlite:///{tmp_path}/data.sqlite"
    import sqlalchemy as sa

    engine = sa.create_engine(db)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS items (id INTEGER, name TEXT)")
        conn.exec_driver_sql("INSERT INTO items VALUES (1, 'a'), (2, 'b')")
    engine.dispose()
    log = AuditLog(f"sqlite:///{tmp_path}/audit.sqlite")
    steps: list[Any] = [
        tool_call("query_database", {"sql": sql}, id=f"c{i}") for i, sql in enumerate(statements)
    ]
    session = create_agent_session(
        model=ScriptedModel([*[[step] for step in steps], text("done")]),
        extensions=[database_extension(url=db, **options)],
        audit=log,
        ui=ui,
    )
    await session.prompt("go")
    await session.close()
    frame = approvals_dataframe(log)
    log.close()
    return frame


async def test_confirm_only_ui_the_person_at_the_keyboard_approves(tmp_path: Path) -> None:
    frame = await _decisions(
        tmp_path, ["UPDATE items SET name = 'z' WHERE id = 1"], ConfirmOnly(True)
    )
    row = frame.iloc[-1]
    assert (row.decision, row.requester, row.approver) == ("approved", "ana", "ana")
    assert row.asked_because == "UPDATE changes data"  # why it was asked, filled when approved


async def test_rejection_names_who_rejected(tmp_path: Path) -> None:
    frame = await _decisions(tmp_path, ["DELETE FROM items"], ConfirmOnly(False))
    row = frame.iloc[-1]
    assert (row.decision, row.requester, row.approver) == ("rejected", "ana", "ana")


async def test_the_ui_names_the_approver(tmp_path: Path) -> None:
    ui = ScriptedApprovalUI(lambda request: ApprovalOutcome("approved", approver="bo"))
    frame = await _decisions(tmp_path, ["DELETE FROM items WHERE id = 2"], ui)
    row = frame.iloc[-1]
    assert (row.decision, row.requester, row.approver) == ("approved", "ana", "bo")


async def test_nobody_decided_no_approver(tmp_path: Path) -> None:
    frame = await _decisions(tmp_path, ["DELETE FROM items"], None)
    row = frame.iloc[-1]
    assert row.decision == "no_ui" and row.requester == "ana"
    assert row.approver is None or row.approver != row.approver  # None, or NaN in the frame


async def test_a_grant_use_names_the_grant_approver(tmp_path: Path) -> None:
    grant = Grant(operations=("UPDATE",), tables=("items",), max_rows=10, ttl_s=600)
    answers = iter([ApprovalOutcome("approved", grant=grant, approver="bo")])
    ui = ScriptedApprovalUI(lambda request: next(answers))
    frame = await _decisions(
        tmp_path,
        ["UPDATE items SET name = 'x' WHERE id = 1", "UPDATE items SET name = 'y' WHERE id = 2"],
        ui,
    )
    used = frame[frame.kind == "grant_use"].iloc[-1]
    assert (used.decision, used.requester, used.approver) == ("granted", "ana", "bo")


async def test_a_call_acting_for_someone_names_them(tmp_path: Path) -> None:
    with acting_for("carl"):
        frame = await _decisions(tmp_path, ["DELETE FROM items WHERE id = 1"], ConfirmOnly(True))
    row = frame.iloc[-1]
    assert (row.requester, row.approver) == ("carl", "carl")


@pytest.mark.parametrize("bad", ["", "a\nb", "x" * 300])
def test_acting_for_refuses_an_unusable_name(bad: str) -> None:
    with pytest.raises(ValueError, match="printable name"), acting_for(bad):
        pass


async def test_the_frame_reads_decision_and_people_first_ids_last(tmp_path: Path) -> None:
    from dataclasses import fields

    from pi_notebook.approvals.records import APPROVAL_COLUMNS, ApprovalRecord

    assert sorted(APPROVAL_COLUMNS) == sorted(f.name for f in fields(ApprovalRecord))
    frame = await _decisions(tmp_path, ["DELETE FROM items"], ConfirmOnly(False))
    columns = list(frame.columns)
    assert columns[:6] == ["timestamp", "decision", "sql", "affected_rows", "requester", "approver"]
    assert columns.index("tool_call_id") > columns.index("reason")
    assert columns[-1] == "audit_hash"
