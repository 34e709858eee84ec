"""Four-eyes review: a write asked for in one process is decided by another person in another.

The requester runs in a subprocess as ``ana`` (``review_actor.py``): its write waits in the
review store (the shared audit database: one SQLite file, or PostgreSQL). This test process is
the reviewer (``PI_NOTEBOOK_USER`` = ``bo``, or whoever the case needs). Rows in the data
database and records in the shared audit prove each outcome.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest
import sqlalchemy as sa

from pi_notebook import create_agent_session
from pi_notebook.approvals import ApprovalRequest, approvals_dataframe
from pi_notebook.approvals.review import ReviewQueue, ReviewRequest
from pi_notebook.audit import AuditLog
from pi_notebook.database import database_extension
from pi_notebook.errors import ConfigurationError, PiNotebookError, ReviewRefused, StateError
from pi_notebook.testing import ScriptedModel, text, tool_call

ACTOR = Path(__file__).with_name("review_actor.py")
ROOT = Path(__file__).resolve().parents[2]
UPDATE = "UPDATE items SET name = 'z' WHERE id = 1"


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The review store (and shared audit): one SQLite file, or a PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/team.sqlite"
        return
    url = str(request.getfixturevalue("pg_url"))
    yield url
    engine = sa.create_engine(url)
    with engine.begin() as conn:  # each test starts from an empty store
        conn.exec_driver_sql("DROP TABLE IF EXISTS pi_review_requests")
    engine.dispose()


@pytest.fixture
def data(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/data.sqlite"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE items (id INTEGER, name TEXT)")
        conn.exec_driver_sql("INSERT INTO items VALUES (1, 'a'), (2, 'b')")
    engine.dispose()
    return url


def _name(data: str) -> str:
    engine = sa.create_engine(data)
    with engine.connect() as conn:
        value = conn.exec_driver_sql("SELECT name FROM items WHERE id = 1").scalar()
    engine.dispose()
    return str(value)


def _as(monkeypatch: pytest.MonkeyPatch, user: str) -> None:
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    monkeypatch.setenv("PI_NOTEBOOK_USER", user)


class Requester:
    """``ana``'s process asking for one write that waits for review."""

    def __init__(
        self, data: str, store: str, *, timeout_s: float = 20.0, reviewers: str = "bo,cy"
    ) -> None:
        env = {**os.environ, "PI_NOTEBOOK_USER": "ana", "PYTHONPATH": str(ROOT)}
        env.pop("JUPYTERHUB_USER", None)
        self.proc = subprocess.Popen(
            [sys.executable, str(ACTOR), data, store, UPDATE, str(timeout_s), reviewers],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def posted(self, queue: ReviewQueue, within_s: float = 30.0) -> ReviewRequest:
        end = time.monotonic() + within_s
        while time.monotonic() < end:
            found = queue.pending()
            if found:
                return found[0]
            assert self.proc.poll() is None, self.proc.communicate()
            time.sleep(0.05)
        raise AssertionError("the request was never posted")

    def result(self) -> dict[str, Any]:
        out, err = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0, err
        return json.loads(out.strip().splitlines()[-1])


def _reviews(store: str, request_id: str) -> list[dict[str, Any]]:
    """The shared audit's records of one review request (payload plus the writing user)."""
    log = AuditLog(store)
    frame: Any = log.to_dataframe(kind="review")
    log.close()
    rows = [{**row["payload"], "user": row["user"]} for row in frame.to_dict("records")]
    return [row for row in rows if row["request_id"] == request_id]


def test_approved_by_a_reviewer_runs_and_both_sides_are_audited(
    store: str, data: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _as(monkeypatch, "bo")
    asker = Requester(data, store)
    with ReviewQueue(store) as queue:
        request = asker.posted(queue)
        assert (request.requester, request.tool_name, request.args) == (
            "ana",
            "query_database",
            {"sql": UPDATE},
        )
        assert request.reviewers == ("bo", "cy") and request.reasons
        assert request.preview is not None and request.preview["affected_rows"] == 1
        assert request.created_at.tzinfo is not None and request.expires_at > request.created_at
        assert _name(data) == "a"  # nothing runs while it waits
        decided = queue.decide(request.request_id, "approved", "bo", note="looks right")
        assert (decided.state, decided.reviewer) == ("approved", "bo")
    result = asker.result()
    people = (result["requester"], result["approver"])
    assert (result["decision"], people) == ("approved", ("ana", "bo"))
    assert _name(data) == "z"  # the row changed
    records = _reviews(store, request.request_id)
    posted = next(r for r in records if r["event"] == "posted")
    decision = next(r for r in records if r["event"] == "decision")
    assert (posted["user"], posted["requester"], posted["approver"]) == ("ana", "ana", None)
    assert (decision["user"], decision["requester"], decision["approver"]) == ("bo", "ana", "bo")
    log = AuditLog(store)
    frame = approvals_dataframe(log)
    mine = frame[frame.timestamp >= request.created_at]  # this test's, in a shared store
    approval = mine.iloc[-1]  # the requester's own approval record
    assert (approval.requester, approval.approver, approval.user) == ("ana", "bo", "ana")
    assert log.verify().ok  # the hash chain holds over both sides' records
    log.close()


def test_rejected_by_a_reviewer_nothing_runs(
    store: str, data: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _as(monkeypatch, "cy")
    asker = Requester(data, store)
    with ReviewQueue(store) as queue:
        request = asker.posted(queue)
        queue.decide(request.request_id, "rejected", "cy", note="wrong table")
        with pytest.raises(StateError, match="already rejected by cy"):
            queue.decide(request.request_id, "approved", "cy")
    result = asker.result()
    assert (result["decision"], result["approver"]) == ("rejected", "cy")
    assert _name(data) == "a"


def test_self_approval_and_outsiders_are_refused_and_audited(
    store: str, data: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    asker = Requester(data, store)
    _as(monkeypatch, "ana")  # the requester, in another notebook
    with ReviewQueue(store) as queue:
        request = asker.posted(queue)
        with pytest.raises(ReviewRefused, match="cannot review it") as own:
            queue.decide(request.request_id, "approved", "ana")
        assert isinstance(own.value, PermissionError) and isinstance(own.value, PiNotebookError)
    _as(monkeypatch, "dan")  # not on the list
    with ReviewQueue(store) as queue:
        with pytest.raises(ReviewRefused, match="not a reviewer"):
            queue.decide(request.request_id, "approved", "dan")
        with pytest.raises(ReviewRefused, match="not the user of this process"):
            queue.decide(request.request_id, "approved", "bo")  # dan claiming to be bo
        assert [r.request_id for r in queue.pending()] == [request.request_id]  # still open
        assert _name(data) == "a"
    _as(monkeypatch, "bo")
    with ReviewQueue(store) as queue:
        queue.decide(request.request_id, "rejected", "bo")
    assert asker.result()["decision"] == "rejected"
    refused = [r for r in _reviews(store, request.request_id) if r["event"] == "refused"]
    assert sorted((r["user"], r["reviewer"]) for r in refused) == [
        ("ana", "ana"),
        ("dan", "bo"),
        ("dan", "dan"),
    ]
    assert all(r["approver"] is None and r["requester"] == "ana" for r in refused)


def test_no_decision_by_the_deadline_expires_and_nothing_runs(
    store: str, data: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _as(monkeypatch, "bo")
    asker = Requester(data, store, timeout_s=2.0)
    with ReviewQueue(store) as queue:
        request = asker.posted(queue)
        result = asker.result()
        assert (result["decision"], result["approver"]) == ("expired", None)
        assert "expired" in result["reason"]
        assert queue.pending() == []
        assert queue.get(request.request_id).state == "expired"  # type: ignore[union-attr]
        with pytest.raises(StateError, match="expired"):
            queue.decide(request.request_id, "approved", "bo")
    assert _name(data) == "a"
    assert "expired" in [r["event"] for r in _reviews(store, request.request_id)]


def _request(call_id: str = "c1") -> ApprovalRequest:
    return ApprovalRequest(
        tool_call_id=call_id,
        tool_name="query_database",
        title="Database write",
        args={"sql": UPDATE},
        args_hash="h" * 64,
        reasons=("it writes",),
    )


def test_two_reviewers_racing_cannot_both_decide(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _as(monkeypatch, "bo")
    store = f"sqlite:///{tmp_path}/team.sqlite"
    with ReviewQueue(store) as queue:
        for round_ in range(5):
            posted = queue.post(
                _request(f"c{round_}"), "ana", ["bo"], datetime.now(UTC) + timedelta(minutes=5)
            )

            def decide(decision: str, request_id: str = posted.request_id) -> str:
                try:
                    return queue.decide(request_id, decision, "bo").state
                except StateError:
                    return "lost"

            with ThreadPoolExecutor(2) as pool:
                outcomes = sorted(pool.map(decide, ["approved", "rejected"]))
            assert outcomes.count("lost") == 1, outcomes
            assert queue.get(posted.request_id).state in outcomes  # type: ignore[union-attr]


def test_post_needs_a_reviewer_besides_the_requester(tmp_path: Path) -> None:
    with ReviewQueue(f"sqlite:///{tmp_path}/team.sqlite") as queue:
        with pytest.raises(ConfigurationError, match="besides the requester"):
            queue.post(_request(), "ana", ["ana"], datetime.now(UTC) + timedelta(minutes=1))
        assert queue.pending() == []


async def test_an_unreachable_store_blocks_the_write_and_says_why(
    tmp_path: Path, data: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _as(monkeypatch, "ana")
    log = AuditLog(f"sqlite:///{tmp_path}/audit.sqlite")
    unreachable = "postgresql+psycopg://nobody:s3cret@127.0.0.1:1/none"
    review = {"url": unreachable, "reviewers": ["bo"], "timeout_s": 10}
    steps = [[tool_call("query_database", {"sql": UPDATE}, id="w1")], text("done")]
    session = create_agent_session(
        model=ScriptedModel(steps),
        extensions=[database_extension(url=data, review=review)],
        audit=log,
    )
    await session.prompt("go")
    await session.close()
    row = approvals_dataframe(log).iloc[-1]
    log.close()
    assert row.decision == "rejected"
    assert "review store" in row.reason and "cannot be reached" in row.reason
    assert "s3cret" not in row.reason
    assert _name(data) == "a"


def test_review_settings_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="reviewers"):
        database_extension(review={"url": "sqlite://", "reviewers": "bo"})
    with pytest.raises(ConfigurationError, match="unknown"):
        database_extension(review={"url": "sqlite://", "reviewers": ["bo"], "who": 1})


class Watching:
    """The requester's own UI: it shows notices and must never be asked to approve."""

    def __init__(self) -> None:
        self.notices: list[str] = []

    def notify(self, message: str, level: str = "info") -> None:
        self.notices.append(message)

    async def request_approval(self, request: ApprovalRequest) -> Any:
        raise AssertionError("a reviewed write never asks the requester's own UI")


async def test_abort_while_waiting_withdraws_the_request_and_nothing_runs(
    tmp_path: Path, data: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _as(monkeypatch, "ana")
    store = f"sqlite:///{tmp_path}/team.sqlite"
    log = AuditLog(store)
    ui = Watching()
    review = {"url": store, "reviewers": ["bo", "cy"], "timeout_s": 30, "poll_s": 0.05}
    steps = [[tool_call("query_database", {"sql": UPDATE}, id="w1")], text("done")]
    session = create_agent_session(
        model=ScriptedModel(steps),
        audit=log,
        ui=cast(Any, ui),
        extensions=[database_extension(url=data, review=review)],
    )
    run = asyncio.ensure_future(session.prompt("go"))
    with ReviewQueue(store) as queue:
        for _ in range(400):
            if queue.pending() and ui.notices:
                break
            await asyncio.sleep(0.02)
        [request] = queue.pending()
        assert any("Waiting for a review by bo or cy" in n for n in ui.notices), ui.notices
        session.abort()
        await asyncio.wait_for(run, 10)
        assert queue.get(request.request_id).state == "withdrawn"  # type: ignore[union-attr]
    await session.close()
    row = approvals_dataframe(log).iloc[-1]
    log.close()
    assert (row.decision, row.requester) == ("aborted", "ana")
    assert _name(data) == "a"


async def test_a_requester_who_is_the_only_reviewer_cannot_approve_their_own_write(
    tmp_path: Path, data: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _as(monkeypatch, "ana")
    store = f"sqlite:///{tmp_path}/team.sqlite"
    log = AuditLog(store)
    review = {"url": store, "reviewers": ["ana"], "timeout_s": 10}
    steps = [[tool_call("query_database", {"sql": UPDATE}, id="w1")], text("done")]
    session = create_agent_session(
        model=ScriptedModel(steps),
        audit=log,
        extensions=[database_extension(url=data, review=review)],
    )
    await session.prompt("go")
    await session.close()
    row = approvals_dataframe(log).iloc[-1]
    log.close()
    assert row.decision == "rejected"
    assert "could not be posted" in row.reason and "besides the requester" in row.reason
    assert _name(data) == "a"


def test_a_reviewer_edit_with_another_effect_comes_back_as_a_new_preview(
    store: str, data: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _as(monkeypatch, "bo")
    edited = "UPDATE items SET name = 'z' WHERE id IN (1, 2)"
    asker = Requester(data, store)
    with ReviewQueue(store) as queue:
        first = asker.posted(queue)
        queue.decide(first.request_id, "approved", "bo", edited_args={"sql": edited})
        assert _name(data) == "a"  # an edit changing 2 rows, not 1 as shown: not run yet
        end = time.monotonic() + 30
        while not (again := [r for r in queue.pending() if r.request_id != first.request_id]):
            assert time.monotonic() < end and asker.proc.poll() is None
            time.sleep(0.05)
        [second] = again
        assert second.args == {"sql": edited} and second.preview is not None
        assert second.preview["affected_rows"] == 2 and "you edited" in second.reasons[0]
        queue.decide(second.request_id, "approved", "bo")
    result = asker.result()
    assert (result["decision"], result["requester"], result["approver"]) == (
        "approved",
        "ana",
        "bo",
    )
    engine = sa.create_engine(data)
    with engine.connect() as conn:
        names = conn.exec_driver_sql("SELECT name FROM items ORDER BY id").scalars().all()
    engine.dispose()
    assert names == ["z", "z"]  # the edit ran, as the reviewer saw it previewed
