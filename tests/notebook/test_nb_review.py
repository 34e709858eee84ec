"""``%pi_review``: a reviewer's notebook shows the open requests of the configured review store
as cards and approves or rejects one as its user with a click (or, in text, with
``--approve`` / ``--reject``); refusals are one line on the card, or one-line UsageErrors."""

from __future__ import annotations

import asyncio
import json
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
    request = ApprovalRequest(
        tool_call_id=call_id,
        tool_name="query_database",
        title="Database write",
        args={"sql": SQL},
        args_hash="a" * 64,
        reasons=("it writes",),
    )
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
    frame: Any = shell.run_line_magic("pi_review", "--list")
    assert list(frame.request_id) == [posted.request_id]
    assert (frame.requester[0], frame.args[0], frame.reviewers[0]) == ("ana", SQL, "bo")
    shell.run_line_magic("pi_review", f"--approve {posted.request_id[:8]} --note 'fine'")
    assert "Approved review request" in capsys.readouterr().out
    with ReviewQueue(store) as queue:
        decided = queue.get(posted.request_id)
    assert decided is not None and (decided.state, decided.reviewer, decided.note) == (
        "approved",
        "bo",
        "fine",
    )
    after: Any = shell.run_line_magic("pi_review", "--list")
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
    with pytest.raises(UsageError, match="No review store"):
        loaded.run_line_magic("pi_review", "--list")


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
    [card] = run.view.cards  # the call's own card says it waits, and for whom
    assert run.state.cards[card.tool_call_id].status == "awaiting approval"
    assert "Waiting for a review by bo" in card.prompt.value
    decide = (
        "from pi_notebook.approvals.review import ReviewQueue; import sys; "
        "ReviewQueue(sys.argv[1]).decide(sys.argv[2], 'approved', 'bo')"
    )
    env = {**os.environ, "PI_NOTEBOOK_USER": "bo", "PYTHONPATH": str(ROOT)}  # bo's kernel
    done = await asyncio.create_subprocess_exec(
        sys.executable, "-c", decide, store, request.request_id, env=env
    )
    assert await done.wait() == 0
    state = await run.wait(timeout=30)
    assert any("approved by bo" in n for n in state.notices), state.notices
    assert "Approved by bo" in card.prompt.value
    url = current().database_url.removeprefix("sqlite:///")
    with sqlite3.connect(url) as conn:
        city = conn.execute("SELECT city FROM customers WHERE customer_id = 3").fetchone()[0]
    assert city == "Reviewed"
    row = approvals_dataframe(current().audit).iloc[-1]
    assert (row.decision, row.requester, row.approver) == ("approved", "ana", "bo")


# -- the cards: %pi_review inline --------------------------------------------------------------

ACTOR = ROOT / "tests" / "approvals" / "review_actor.py"


def _card_html(card: Any) -> str:
    """Every HTML piece a card shows, joined (what the reviewer reads)."""
    from ipywidgets import HTML

    return "".join(c.value for c in card.children if isinstance(c, HTML))


def _buttons(card: Any) -> list[str]:
    from ipywidgets import Button, HBox

    boxes = [c for c in card.children if isinstance(c, HBox)]
    return [b.description for box in boxes for b in box.children if isinstance(b, Button)]


async def test_pi_review_cards_approve_a_write_another_process_waits_for(
    reviewer: tuple[InteractiveShell, str], tmp_path: Path
) -> None:
    """ana's process asks for a write that waits; bo's notebook shows it as a card (who,
    statement, reasons, preview, expiry) and bo clicks Approve: the write runs in ana's
    process, the card says who decided, and its buttons are gone."""
    import sqlite3

    from pi_notebook.notebook.review_board import ReviewBoard

    shell, store = reviewer
    data = tmp_path / "data.sqlite"
    with sqlite3.connect(data) as conn:
        conn.execute("CREATE TABLE items (id INTEGER, name TEXT)")
        conn.execute("INSERT INTO items VALUES (1, 'a'), (2, 'b')")
    update = "UPDATE items SET name = 'z' WHERE id = 1"
    env = {**os.environ, "PI_NOTEBOOK_USER": "ana", "PYTHONPATH": str(ROOT)}
    env.pop("JUPYTERHUB_USER", None)
    ana = await asyncio.create_subprocess_exec(
        sys.executable,
        str(ACTOR),
        f"sqlite:///{data}",
        store,
        update,
        "60",
        "bo",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    with ReviewQueue(store) as queue:
        for _ in range(1500):
            if queue.pending() or ana.returncode is not None:
                break
            await asyncio.sleep(0.02)
        assert queue.pending(), "ana's request was never posted"
    board: Any = shell.run_line_magic("pi_review", "")
    assert isinstance(board, ReviewBoard) and len(board.cards) == 1
    assert "1 open review request" in board.heading.value and "<b>bo</b>" in board.heading.value
    card = board.cards[0]
    shown = _card_html(card)
    assert "ana asks for a review: query_database" in shown
    assert "<pre class='pi-sql'>UPDATE items SET name = &#x27;z&#x27; WHERE id = 1</pre>" in shown
    assert "Needs approval because:" in shown and "Would change 1 row" in shown
    assert "reviewers: bo" in shown and "expires at" in shown
    assert {"pi-prompt", "pi-approval"} <= set(card._dom_classes)  # the approval prompt's look
    assert _buttons(card) == ["Approve", "Reject"]
    assert "ana" in board.text() and update in board.text()  # the plain-text form
    bundle = board._repr_mimebundle_()  # what nbconvert and plain-text front ends show
    assert bundle is not None and bundle["text/plain"] == board.text()
    card.approve_button.click()
    assert "Approved by bo" in card.status.value
    assert _buttons(card) == []  # decided: the buttons are gone
    out, err = await asyncio.wait_for(ana.communicate(), timeout=60)
    assert ana.returncode == 0, err.decode()
    result = json.loads(out.decode().strip().splitlines()[-1])
    people = (result["requester"], result["approver"])
    assert (result["decision"], people) == ("approved", ("ana", "bo"))
    with sqlite3.connect(data) as conn:
        assert conn.execute("SELECT name FROM items WHERE id = 1").fetchone()[0] == "z"
    assert "approved by bo" in board.text()
    empty: Any = shell.run_line_magic("pi_review", "")
    assert empty.cards == [] and "No open review requests" in empty.heading.value
    assert empty.text() == "No open review requests in this store."


async def test_pi_review_cards_refuse_the_requester_and_outsiders_and_keep_the_request_open(
    reviewer: tuple[InteractiveShell, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    shell, store = reviewer
    posted = _post(store, "c5")
    monkeypatch.setenv("PI_NOTEBOOK_USER", "ana")  # the requester's own notebook
    board: Any = shell.run_line_magic("pi_review", "")
    card = board.card(posted.request_id[:8])
    card.approve_button.click()
    assert "cannot review it" in card.status.value and "stays open" in card.status.value
    assert _buttons(card) == ["Approve", "Reject"]  # still open: still decidable
    monkeypatch.setenv("PI_NOTEBOOK_USER", "cy")  # not on its list
    card.reject_button.click()
    assert "not a reviewer of this request" in card.status.value
    with ReviewQueue(store) as queue:
        still = queue.get(posted.request_id)
        assert still is not None and still.state == "open"
        refusals: Any = queue.audit.to_dataframe(kind="review")
        events = [p["event"] for p in refusals.payload if p["request_id"] == posted.request_id]
        assert events.count("refused") == 2
    monkeypatch.setenv("PI_NOTEBOOK_USER", "bo")
    card.note.value = "wrong customer"
    card.reject_button.click()
    assert "Rejected by bo (wrong customer)" in card.status.value and _buttons(card) == []
    assert card.approve() is False  # a late click changes nothing
    with ReviewQueue(store) as queue:
        decided = queue.get(posted.request_id)
    assert decided is not None and (decided.state, decided.reviewer, decided.note) == (
        "rejected",
        "bo",
        "wrong customer",
    )


async def test_pi_review_card_of_a_request_decided_elsewhere_says_so(
    reviewer: tuple[InteractiveShell, str],
) -> None:
    shell, store = reviewer
    posted = _post(store, "c6")
    board: Any = shell.run_line_magic("pi_review", "")
    with ReviewQueue(store) as queue:  # another reviewer's notebook, first
        queue.decide(posted.request_id, "approved", "bo")
    card = board.card(posted.request_id)
    card.reject_button.click()
    assert "already approved by bo" in card.status.value and _buttons(card) == []
    assert card.decided is False


async def test_a_pi_cell_write_nobody_reviews_expires_and_its_card_says_so(
    loaded: InteractiveShell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    from pi_notebook.notebook import current

    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    monkeypatch.setenv("PI_NOTEBOOK_USER", "ana")
    store = f"sqlite:///{tmp_path}/team.sqlite"
    settings = f"{{'url': {store!r}, 'reviewers': ['bo'], 'timeout_s': 2, 'poll_s': 0.05}}"
    loaded.run_line_magic("config", f"PiNotebook.review = {settings}")
    loaded.run_cell_magic("pi", "", "UPDATE customers SET city = 'Unseen' WHERE customer_id = 4")
    run = current().last_run
    assert run is not None
    state = await run.wait(timeout=30)
    [card] = run.view.cards
    assert "No review decision in time" in card.prompt.value
    assert state.cards[card.tool_call_id].status == "blocked"
    url = current().database_url.removeprefix("sqlite:///")
    with sqlite3.connect(url) as conn:
        city = conn.execute("SELECT city FROM customers WHERE customer_id = 4").fetchone()[0]
    assert city != "Unseen"
