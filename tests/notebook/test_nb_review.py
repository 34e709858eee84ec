"""``%pi_review``: a reviewer's notebook lists the open requests of the configured review store
and approves or rejects one as its user; refusals are one-line UsageErrors."""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from pi_notebook.approvals import ApprovalRequest
from pi_notebook.approvals.review import ReviewQueue, ReviewRequest

ROOT = Path(__file__).resolve().parents[2]
SQL = "UPDATE customers SET city = 'Oslo' WHERE customer_id = 1"


def _post(store: str, call_id: str) -> ReviewRequest:
    request = ApprovalRequest(tool_call_id=call_id, tool_name="query_database",
                              title="Database write", args={"sql": SQL}, args_hash="a" * 64,
                              reasons=("it writes",))  # fmt: skip
    with ReviewQueue(store) as queue:  # ana's side of the store
        return queue.post(request, "ana", ["bo"], datetime.now(UTC) + timedelta(minutes=5))


@pytest.fixture
def reviewer(
    loaded: InteractiveShell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[InteractiveShell, str]:
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    monkeypatch.setenv("PI_NOTEBOOK_USER", "bo")
    store = f"sqlite:///{tmp_path}/team.sqlite"
    loaded.run_line_magic(
        "config", f"PiNotebook.review = {{'url': {store!r}, 'reviewers': ['bo']}}"
    )
    return loaded, store


async def test_pi_review_lists_and_approves_by_prefix(
    reviewer: tuple[InteractiveShell, str], capsys: pytest.CaptureFixture[str]
) -> None:
    shell, store = reviewer
    posted = _post(store, "c1")
    frame: Any = shell.run_line_magic("pi_review", "")
    assert list(frame.request_id) == [posted.request_id]
    assert (frame.requester[0], frame.args[0], frame.reviewers[0]) == ("ana", SQL, "bo")
    shell.run_line_magic("pi_review", f"--approve {posted.request_id[:8]} --note 'fine'")
    assert "Approved review request" in capsys.readouterr().out
    with ReviewQueue(store) as queue:
        decided = queue.get(posted.request_id)
    assert decided is not None and (decided.state, decided.reviewer, decided.note) == (
        "approved", "bo", "fine")  # fmt: skip
    after: Any = shell.run_line_magic("pi_review", "")
    assert after.empty


async def test_pi_review_refusals_are_usage_errors(
    reviewer: tuple[InteractiveShell, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    shell, store = reviewer
    posted = _post(store, "c2")
    monkeypatch.setenv("PI_NOTEBOOK_USER", "ana")  # the requester, trying to approve
    with pytest.raises(UsageError, match="cannot review it"):
        shell.run_line_magic("pi_review", f"--approve {posted.request_id}")
    monkeypatch.setenv("PI_NOTEBOOK_USER", "bo")
    shell.run_line_magic("pi_review", f"--reject {posted.request_id}")
    with pytest.raises(UsageError, match="already rejected by bo"):
        shell.run_line_magic("pi_review", f"--approve {posted.request_id}")
    with pytest.raises(UsageError, match="No review request"):
        shell.run_line_magic("pi_review", "--approve nothing")
    with pytest.raises(UsageError, match="Usage"):
        shell.run_line_magic("pi_review", f"--approve {posted.request_id} --reject x")
    with pytest.raises(UsageError, match="--sql goes with --approve"):
        shell.run_line_magic("pi_review", f"--reject {posted.request_id} --sql 'SELECT 1'")


async def test_pi_review_approves_an_edit(reviewer: tuple[InteractiveShell, str]) -> None:
    shell, store = reviewer
    posted = _post(store, "c3")
    edit = "UPDATE customers SET city = 'Oslo' WHERE customer_id = 2"
    shell.run_line_magic("pi_review", f'--approve {posted.request_id} --sql "{edit}"')
    with ReviewQueue(store) as queue:
        decided = queue.get(posted.request_id)
    assert decided is not None and decided.edited_args == {"sql": edit}


async def test_pi_review_without_a_store_says_how_to_set_one(loaded: InteractiveShell) -> None:
    with pytest.raises(UsageError, match="No review store"):
        loaded.run_line_magic("pi_review", "")


async def test_a_pi_cell_write_waits_for_a_reviewer_and_says_so(
    loaded: InteractiveShell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    from pi_notebook.approvals import approvals_dataframe
    from pi_notebook.notebook import current

    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    monkeypatch.setenv("PI_NOTEBOOK_USER", "ana")
    store = f"sqlite:///{tmp_path}/team.sqlite"
    settings = f"{{'url': {store!r}, 'reviewers': ['bo'], 'timeout_s': 30, 'poll_s': 0.05}}"
    loaded.run_line_magic("config", f"PiNotebook.review = {settings}")
    loaded.run_cell_magic("pi", "", "UPDATE customers SET city = 'Reviewed' WHERE customer_id = 3")
    run = current().last_run
    assert run is not None
    with ReviewQueue(store) as queue:
        for _ in range(500):
            if queue.pending() and any(
                "Waiting for a review by bo" in n for n in run.state.notices
            ):
                break
            await asyncio.sleep(0.02)
        [request] = queue.pending()
    assert request.requester == "ana"
    decide = ("from pi_notebook.approvals.review import ReviewQueue; import sys; "
              "ReviewQueue(sys.argv[1]).decide(sys.argv[2], 'approved', 'bo')")  # fmt: skip
    env = {**os.environ, "PI_NOTEBOOK_USER": "bo", "PYTHONPATH": str(ROOT)}  # bo's kernel
    done = await asyncio.create_subprocess_exec(sys.executable, "-c", decide, store,
                                                request.request_id, env=env)  # fmt: skip
    assert await done.wait() == 0
    state = await run.wait(timeout=30)
    assert any("approved by bo" in n for n in state.notices), state.notices
    url = current().database_url.removeprefix("sqlite:///")
    with sqlite3.connect(url) as conn:
        city = conn.execute("SELECT city FROM customers WHERE customer_id = 3").fetchone()[0]
    assert city == "Reviewed"
    row = approvals_dataframe(current().audit).iloc[-1]
    assert (row.decision, row.requester, row.approver) == ("approved", "ana", "bo")
