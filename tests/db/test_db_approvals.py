# ruff: noqa: F811 - the engine fixture ``db`` is imported from dbtest_support
"""One-shot capabilities (D4), the typed approval record (D3), and the database gate with a UI
that implements ``request_approval``: requests, edits, scoped grants, capabilities
that die with their call and decisions read from the audit (15.11)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from dbtest_support import Scratch, db  # noqa: F401

import pi_notebook.database
from pi_notebook import AgentSession, ExtensionAPI, create_agent_session
from pi_notebook.approvals import (
    ApprovalEntry,
    ApprovalOutcome,
    ApprovalRequest,
    CapabilityStore,
    Grant,
    approvals_dataframe,
)
from pi_notebook.sql.backend import query_args_hash, sqlglot_dialect
from pi_notebook.testing import ScriptedApprovalUI, ScriptedModel, text, tool_call


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_d4_capability_is_one_shot_and_bound_to_call_id() -> None:
    store = CapabilityStore()
    store.grant("call-1", "h1", 60)
    assert not store.consume("call-2", "h1").ok  # another call id
    check = store.consume("call-1", "h1")
    assert check.ok and check.approved_hash == "h1"
    again = store.consume("call-1", "h1")
    assert not again.ok and "already used" in again.reason
    with pytest.raises(ValueError):
        store.grant("call-1", "h1", 60)  # a used call id is never approved again


def test_d4_capability_expires() -> None:
    clock = Clock()
    store = CapabilityStore(clock=clock)
    store.grant("c", "h", 5)
    clock.now += 5
    check = store.consume("c", "h")
    assert not check.ok and "expired" in check.reason


def test_d4_mismatch_reports_both_hashes_and_burns_the_capability() -> None:
    store = CapabilityStore()
    store.grant("c", "approved", 60)
    check = store.consume("c", "final")
    assert (check.ok, check.approved_hash, check.final_hash) == (False, "approved", "final")
    assert not store.consume("c", "approved").ok


def test_d4_consume_is_atomic_under_contention() -> None:
    store = CapabilityStore()
    store.grant("c", "h", 60)
    results: list[bool] = []
    barrier = threading.Barrier(8)

    def worker() -> None:
        barrier.wait()
        results.append(store.consume("c", "h").ok)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(True) == 1


def test_revoke_burns_the_id_of_an_ended_call() -> None:
    """A capability dies with its call; the id can never be approved again."""
    store = CapabilityStore()
    store.grant("c", "h", 60)
    assert store.used("c") and store.revoke("c")
    assert not store.consume("c", "h").ok
    with pytest.raises(ValueError):
        store.grant("c", "h", 60)
    assert not store.revoke("never-granted") and not store.used("never-granted")


def test_d3_unknown_decision_is_refused() -> None:
    with pytest.raises(ValueError):
        ApprovalEntry(decision="maybe", args_hash="h", args={})  # type: ignore[arg-type]


# -- the database gate in a session, with a UI that implements request_approval ----------------


def _script(*sqls: str, prefix: str = "q") -> ScriptedModel:
    steps: list[Any] = [
        [tool_call("query_database", {"sql": s}, id=f"{prefix}{i}")] for i, s in enumerate(sqls)
    ]
    return ScriptedModel([*steps, text("done")])


@pytest.fixture
async def governed(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """``await governed(url, sqls, ui=...)`` runs one prompt; returns (session, extension)."""
    sessions: list[AgentSession] = []
    audit = f"sqlite:///{tmp_path / 'audit.sqlite'}"

    async def run(
        url: str,
        sqls: list[str],
        *,
        ui: Any = None,
        ext: Any = None,
        extra: Any = None,
        prefix: str = "q",
    ) -> tuple[AgentSession, Any]:
        ext = ext if ext is not None else pi_notebook.database.database_extension(url)
        session = create_agent_session(
            model=_script(*sqls, prefix=prefix),
            ui=ui,
            audit=audit,
            extensions=[ext, *([extra] if extra else [])],
        )
        sessions.append(session)
        await session.prompt("go")
        return session, ext

    yield run
    for s in sessions:
        await s.close()


def _results(session: AgentSession) -> list[Any]:
    return [m for m in session.messages if m.role == "toolResult"]


def _text(message: Any) -> str:
    return " ".join(getattr(p, "text", "") for p in message.content)


def _edit(sql: str) -> Callable[[ApprovalRequest], ApprovalOutcome]:
    return lambda _req: ApprovalOutcome("approved", edited_args={"sql": sql})


def _staging(db: Scratch) -> str:
    name = f"staging_{uuid.uuid4().hex[:8]}"
    db.execute(f"CREATE TABLE {name} (a INTEGER NOT NULL)")
    return name


async def test_s24_the_request_carries_the_call_its_reasons_and_a_grant_scope(
    db: Scratch, governed: Any
) -> None:
    table = _staging(db)
    ui = ScriptedApprovalUI("approved")
    sql = f"INSERT INTO {table} (a) VALUES (1)"
    session, _ = await governed(db.url, [sql], ui=ui)
    [req] = ui.requests
    dialect = sqlglot_dialect(sa.make_url(db.url))
    assert (req.tool_call_id, req.tool_name, req.title, req.args) == (
        "q0",
        "query_database",
        "Database write",
        {"sql": sql},
    )
    assert req.args_hash == query_args_hash(sql, dialect) and req.editable
    assert any("changes data" in r for r in req.reasons) and req.timeout_s == 30
    assert req.grant_scope is not None and req.grant_scope.operations == ("INSERT",)
    assert req.grant_scope.tables == (table,)
    assert ui.confirms == [] and db.count(table) == 1
    kinds = list(session.audit.to_dataframe()["kind"])
    assert kinds.index("approval") < kinds.index("final_args")


async def test_edit_a_write_into_a_read_runs_the_read_without_asking_again(
    db: Scratch, governed: Any
) -> None:
    table = db.table()
    db.execute(f"INSERT INTO {table} (a) VALUES (1)")
    read = f"SELECT count(*) AS n FROM {table}"
    ui = ScriptedApprovalUI(_edit(read))
    session, ext = await governed(db.url, [f"DELETE FROM {table}"], ui=ui)
    [result] = _results(session)
    assert not result.is_error and db.count(table) == 1  # the DELETE never ran
    assert int(result.details["dataframe"]["n"].iloc[0]) == 1
    assert "user edited the statement" in _text(result) and read in _text(result)
    assert result.details["edited"]["original_sql"] == f"DELETE FROM {table}"
    [record] = ext.approvals.records()
    assert record.decision == "approved" and record.sql == read
    assert record.original_args_hash == ui.requests[0].args_hash != record.args_hash
    assert len(ext.backend.capabilities) == 0 and len(ui.requests) == 1


async def test_edit_a_write_into_another_write_approves_the_edit(
    db: Scratch, governed: Any
) -> None:
    table = db.table()
    edited = f"INSERT INTO {table} (a) VALUES (2)"
    ui = ScriptedApprovalUI(_edit(edited))
    session, ext = await governed(db.url, [f"INSERT INTO {table} (a) VALUES (1)"], ui=ui)
    [result] = _results(session)
    assert not result.is_error, _text(result)
    assert db.scalar(f"SELECT max(a) FROM {table}") == 2 and db.count(table) == 1
    assert "approved as edited" in _text(result) and edited in _text(result)
    [record] = ext.approvals.records()
    [final] = session.audit.to_dataframe(kind="final_args")["payload"]
    assert final["args_hash"] == record.args_hash == result.details["args_hash"]
    assert record.original_args_hash == ui.requests[0].args_hash != record.args_hash


@pytest.mark.parametrize(
    ("edited", "text"),
    [
        ("INSERT INTO {t} (a) VALUES (2); DELETE FROM {t}", "Refused: the edited statement"),
        ({"sql": "INSERT INTO {t} (a) VALUES (2)", "limit": 5}, "arguments: not limit"),
    ],
)
async def test_an_edit_that_may_not_run_is_refused(
    db: Scratch, governed: Any, edited: Any, text: str
) -> None:
    table = db.table()
    args = (
        {k: v.format(t=table) if isinstance(v, str) else v for k, v in edited.items()}
        if isinstance(edited, dict)
        else {"sql": edited.format(t=table)}
    )
    ui = ScriptedApprovalUI(lambda _r: ApprovalOutcome("approved", edited_args=args))
    session, ext = await governed(db.url, [f"INSERT INTO {table} (a) VALUES (1)"], ui=ui)
    [result] = _results(session)
    assert result.is_error and text in _text(result) and db.count(table) == 0
    assert [r.decision for r in ext.approvals.records()] == ["refused"]


def _granting(grant: Grant) -> Callable[[ApprovalRequest], ApprovalOutcome]:
    """Grants ``grant`` with the first approval; later requests are approved one by one."""
    asked: list[str] = []

    def answer(req: ApprovalRequest) -> ApprovalOutcome:
        asked.append(req.tool_call_id)
        return ApprovalOutcome("approved", grant=grant if len(asked) == 1 else None, approver="ana")

    return answer


async def test_a_grant_covers_later_statements_inside_its_scope(db: Scratch, governed: Any) -> None:
    table, other = _staging(db), db.table()
    grant = Grant(operations=("INSERT",), tables=("staging_*",), ttl_s=600)
    ui = ScriptedApprovalUI(_granting(grant))
    sqls = [
        f"INSERT INTO {table} (a) VALUES (1)",
        f"INSERT INTO {table} (a) VALUES (2)",
        f"INSERT INTO {other} (a) VALUES (3)",
        f"DELETE FROM {table}",
    ]
    session, ext = await governed(db.url, sqls, ui=ui)
    # asked for the first (which granted), then for the miss by table and by operation
    assert [r.tool_call_id for r in ui.requests] == ["q0", "q2", "q3"]
    assert db.count(table) == 0 and db.count(other) == 1  # q3 deleted both staging rows
    [active] = ext.grants.list()
    assert active.uses == 1 and active.approver == "ana" and active.origin_call_id == "q0"
    uses = session.audit.to_dataframe(kind="grant_use")
    assert list(uses["tool_call_id"]) == ["q1"]
    assert uses["payload"].iloc[0]["grant"]["grant_id"] == active.grant_id
    decisions = {r.tool_call_id: r.decision for r in ext.approvals.records()}
    assert decisions == {"q0": "approved", "q1": "granted", "q2": "approved", "q3": "approved"}
    calls = session.audit.calls_dataframe()
    assert dict(zip(calls["tool_call_id"], calls["decision"], strict=True)) == decisions


async def test_a_grant_expires_and_can_be_revoked(tmp_path: Path, governed: Any) -> None:
    """Within one session: q0 grants, q1 runs inside it, then its time is up: q2 is asked
    (and grants again), q3 runs inside the new grant, which is then revoked: q4 is asked."""
    url = f"sqlite:///{tmp_path / 'g.sqlite'}"
    scratch = Scratch("sqlite", url)
    table = _staging(scratch)
    ext = pi_notebook.database.database_extension(url)
    grant = Grant(operations=("INSERT",), tables=(table,), ttl_s=60)
    ui = ScriptedApprovalUI(lambda _r: ApprovalOutcome("approved", grant=grant))
    revoked: list[str] = []

    def between_calls(pi: ExtensionAPI) -> None:
        store = ext.grants  # this session's store (the database extension ran first)

        def ended(event: Any, _ctx: Any) -> None:
            if event.tool_call_id == "q1":  # its time is up
                [active] = store.list()
                store.clock = lambda: active.expires_at
            elif event.tool_call_id == "q3":
                [active] = store.list()
                revoked.append(active.grant_id)
                assert store.revoke(active.grant_id) and not store.revoke(active.grant_id)

        pi.on("tool_execution_end", ended)

    insert = f"INSERT INTO {table} (a) VALUES (1)"
    session, _ = await governed(url, [insert] * 5, ui=ui, ext=ext, extra=between_calls)
    assert [r.tool_call_id for r in ui.requests] == ["q0", "q2", "q4"]
    assert scratch.count(table) == 5 and not any(m.is_error for m in _results(session))
    assert list(session.audit.to_dataframe(kind="grant_use")["tool_call_id"]) == ["q1", "q3"]
    [revoke] = session.audit.to_dataframe(kind="grant_revoke")["payload"]
    assert revoke["grant"]["grant_id"] == revoked[0] and revoke["reason"] == "revoked"
    assert revoke["grant"]["uses"] == 1 and revoke["grant"]["tables"] == [table]
    assert len(ext.grants.list()) == 1  # q4's grant, in force until the session closes
    await session.close()
    assert ext.grants.list() == []
    ended = session.audit.to_dataframe(kind="grant_revoke")["payload"]
    assert list(ended.map(lambda p: p["reason"])) == ["revoked", "session closed"]
    scratch.dispose()


async def test_closing_an_old_session_keeps_the_grants_of_a_newer_one(
    tmp_path: Path, governed: Any
) -> None:
    url = f"sqlite:///{tmp_path / 'n.sqlite'}"
    scratch = Scratch("sqlite", url)
    table = _staging(scratch)
    ext = pi_notebook.database.database_extension(url)
    grant = Grant(operations=("INSERT",), tables=(table,), ttl_s=600)
    ui = ScriptedApprovalUI(lambda _r: ApprovalOutcome("approved", grant=grant))
    insert = f"INSERT INTO {table} (a) VALUES (1)"
    old, _ = await governed(url, [insert], ui=ui, ext=ext, prefix="old")
    await governed(url, [insert], ui=ui, ext=ext, prefix="new")
    assert [r.tool_call_id for r in ui.requests] == ["old0", "new0"]  # a grant is per session
    [active] = ext.grants.list()
    assert active.origin_call_id == "new0"
    await old.close()
    assert ext.grants.list() == [active]  # the newer session's grant is still in force
    scratch.dispose()


async def test_grant_use_is_written_only_for_a_grant_still_in_force(
    tmp_path: Path, governed: Any
) -> None:
    url = f"sqlite:///{tmp_path / 'r.sqlite'}"
    scratch = Scratch("sqlite", url)
    table = _staging(scratch)
    ext = pi_notebook.database.database_extension(url)

    def revoked_meanwhile(_pi: ExtensionAPI) -> None:
        store = ext.grants
        active = store.create(Grant(operations=("INSERT",), tables=(table,), ttl_s=600))
        real_used = store.used

        def used(grant_id: str) -> Any:  # revoked between the match and its use
            store.revoke(active.grant_id)
            return real_used(grant_id)

        store.used = used  # type: ignore[method-assign]

    ui = ScriptedApprovalUI("rejected")
    session, _ = await governed(
        url, [f"INSERT INTO {table} (a) VALUES (1)"], ui=ui, ext=ext, extra=revoked_meanwhile
    )
    assert len(ui.requests) == 1 and scratch.count(table) == 0  # asked, and rejected
    assert session.audit.to_dataframe(kind="grant_use").empty
    assert [r.decision for r in ext.approvals.records()] == ["rejected"]
    scratch.dispose()


async def test_a_grant_that_would_cover_ddl_is_refused_and_nothing_runs(
    db: Scratch, governed: Any
) -> None:
    table = db.table()
    ui = ScriptedApprovalUI(_granting(Grant(operations=("INSERT", "DROP"), tables=("t_*",))))
    session, ext = await governed(db.url, [f"INSERT INTO {table} (a) VALUES (1)"], ui=ui)
    [result] = _results(session)
    assert result.is_error and "never DROP" in _text(result) and db.count(table) == 0
    assert ext.grants.list() == [] and ext.approvals.records()[0].decision == "refused"


def _block_the_first_call(pi: ExtensionAPI) -> None:
    blocked: list[str] = []

    def handler(event: Any, _ctx: Any) -> dict[str, Any] | None:
        if blocked:
            return None
        blocked.append(event.tool_call_id)
        return {"block": True, "reason": "policy says no"}

    pi.on("tool_call", handler)


async def test_an_approval_left_by_a_blocked_call_dies_with_it(db: Scratch, tmp_path: Path) -> None:
    """The gate approves q0, a later handler blocks it; the model then reuses the id q0."""
    table = db.table()
    insert = f"INSERT INTO {table} (a) VALUES (1)"
    call = [tool_call("query_database", {"sql": insert}, id="q0")]
    model = ScriptedModel([call, text("blocked"), call, text("done")])
    ui = ScriptedApprovalUI("approved")
    ext = pi_notebook.database.database_extension(db.url)
    session = create_agent_session(
        model=model,
        ui=ui,
        extensions=[ext, _block_the_first_call],
        audit=f"sqlite:///{tmp_path / 'audit.sqlite'}",
    )
    try:
        await session.prompt("go")
        assert _text(_results(session)[0]) == "policy says no" and len(ui.requests) == 1
        store = ext.backend.capabilities
        assert len(store) == 0 and store.used("q0")  # revoked at the call's end, id burnt
        await session.prompt("again")
        assert "already used" in _text(_results(session)[1]) and len(ui.requests) == 1
        assert not store.consume("q0", ui.requests[0].args_hash).ok and db.count(table) == 0
    finally:
        await session.close()


async def test_decisions_come_from_the_audit_with_its_redaction(
    tmp_path: Path, governed: Any
) -> None:
    url = f"sqlite:///{tmp_path / 'r.sqlite'}"
    scratch = Scratch("sqlite", url)
    scratch.execute("CREATE TABLE users (id INTEGER, password TEXT)")
    sql = "UPDATE users SET password = 'hunter2-secret' WHERE id = 1"
    session, ext = await governed(url, [sql], ui=ScriptedApprovalUI("approved"))
    frame = ext.approvals.to_dataframe()
    assert list(frame["decision"]) == ["approved"]
    assert "hunter2" not in " ".join(frame["sql"]) and "password = " in frame["sql"].iloc[0]
    same = approvals_dataframe(session.audit, session=session.audit.session_id)
    assert list(same["audit_hash"]) == list(frame["audit_hash"])
    scratch.dispose()


# -- write preview bound to the approval (with the backend's preview) --------------


def _three_rows(db: Scratch) -> str:
    table = db.table()
    db.execute(f"INSERT INTO {table} (a) VALUES (1), (2), (3)")
    return table


async def test_the_preview_counts_what_the_write_changes_and_leaves_data_untouched(
    db: Scratch, governed: Any
) -> None:
    table = _three_rows(db)
    seen: list[tuple[int | None, int]] = []

    def look(req: ApprovalRequest) -> ApprovalOutcome:
        assert req.preview is not None
        seen.append((req.preview.affected_rows, int(db.scalar(f"SELECT sum(a) FROM {table}"))))
        return ApprovalOutcome("approved")

    ui = ScriptedApprovalUI(look)
    session, ext = await governed(db.url, [f"UPDATE {table} SET a = a + 10 WHERE a <= 2"], ui=ui)
    assert seen == [(2, 6)]  # two rows counted; nothing changed while the person looked
    [result] = _results(session)
    assert not result.is_error and result.details["row_count"] == 2
    assert int(db.scalar(f"SELECT sum(a) FROM {table}")) == 26
    [record] = ext.approvals.records()
    assert record.affected_rows == 2 and record.decision == "approved"
    assert ui.requests[0].grant_scope is not None and ui.requests[0].grant_scope.max_rows == 2


async def test_rows_added_between_preview_and_execution_make_the_write_refuse(
    db: Scratch, governed: Any
) -> None:
    table = _three_rows(db)

    def add_a_row_then_approve(req: ApprovalRequest) -> ApprovalOutcome:
        assert req.preview is not None and req.preview.affected_rows == 3
        db.execute(f"INSERT INTO {table} (a) VALUES (4)")  # someone else writes meanwhile
        return ApprovalOutcome("approved")

    session, _ = await governed(
        db.url, [f"DELETE FROM {table}"], ui=ScriptedApprovalUI(add_a_row_then_approve)
    )
    [result] = _results(session)
    assert result.is_error and "nothing was changed" in _text(result)
    assert db.count(table) == 4  # the DELETE was rolled back


async def test_an_edited_write_is_previewed_again_and_bound_to_its_count(
    db: Scratch, governed: Any
) -> None:
    table = _three_rows(db)
    edited = f"DELETE FROM {table} WHERE a = 3"
    session, ext = await governed(
        db.url, [f"DELETE FROM {table}"], ui=ScriptedApprovalUI(_edit(edited))
    )
    [result] = _results(session)
    assert not result.is_error and result.details["row_count"] == 1 and db.count(table) == 2
    [record] = ext.approvals.records()
    assert (record.sql, record.affected_rows) == (edited, 1)


async def test_an_edit_that_changes_the_count_is_asked_again_with_its_own_preview(
    db: Scratch, governed: Any
) -> None:
    """Audit 12.3: the person approved the text of an edit, not its unseen count."""
    table = _three_rows(db)
    narrow, wide = f"DELETE FROM {table} WHERE a = 1", f"DELETE FROM {table}"

    def widen_then(decision: str) -> Callable[[ApprovalRequest], ApprovalOutcome]:
        def answer(req: ApprovalRequest) -> ApprovalOutcome:
            if req.args["sql"] == narrow:
                return ApprovalOutcome("approved", edited_args={"sql": wide})
            return ApprovalOutcome(decision)  # type: ignore[arg-type]

        return answer

    ui = ScriptedApprovalUI(widen_then("rejected"))
    session, ext = await governed(db.url, [narrow], ui=ui)
    first, again = ui.requests
    assert first.preview is not None and first.preview.affected_rows == 1
    assert again.args == {"sql": wide} and again.preview is not None
    assert again.preview.affected_rows == 3 and "you edited the statement" in again.reasons[0]
    assert again.args_hash == query_args_hash(wide, sqlglot_dialect(sa.make_url(db.url)))
    assert db.count(table) == 3 and _results(session)[0].is_error
    [record] = ext.approvals.records()
    assert (record.decision, record.sql, record.original_args_hash) == (
        "rejected",
        wide,
        first.args_hash,
    )
    ui = ScriptedApprovalUI(widen_then("approved"))
    session, ext = await governed(db.url, [narrow], ui=ui, prefix="w")
    assert len(ui.requests) == 2 and db.count(table) == 0
    record = ext.approvals.records()[-1]  # the audit store is shared with the first session
    assert (record.decision, record.sql, record.affected_rows) == ("approved", wide, 3)


async def test_an_edit_with_the_count_shown_is_not_asked_again(db: Scratch, governed: Any) -> None:
    table = _three_rows(db)
    ui = ScriptedApprovalUI(_edit(f"DELETE FROM {table} WHERE a = 2"))
    session, _ = await governed(db.url, [f"DELETE FROM {table} WHERE a = 1"], ui=ui)
    assert len(ui.requests) == 1 and not _results(session)[0].is_error
    assert db.count(table) == 2 and int(db.scalar(f"SELECT sum(a) FROM {table}")) == 4


async def test_a_grant_misses_by_row_count(db: Scratch, governed: Any) -> None:
    table = _staging(db)
    db.execute(f"INSERT INTO {table} (a) VALUES (1), (2), (3)")
    grant = Grant(operations=("UPDATE",), tables=("staging_*",), max_rows=2, ttl_s=600)
    ui = ScriptedApprovalUI(_granting(grant))
    sqls = [
        f"UPDATE {table} SET a = a WHERE a = 1",  # asked; grants
        f"UPDATE {table} SET a = a + 10 WHERE a <= 2",  # 2 rows: inside the grant
        f"UPDATE {table} SET a = a + 100",
    ]  # 3 rows: outside by row count, asked
    session, ext = await governed(db.url, sqls, ui=ui)
    assert [r.tool_call_id for r in ui.requests] == ["q0", "q2"]
    assert ui.requests[1].preview is not None and ui.requests[1].preview.affected_rows == 3
    assert not any(m.is_error for m in _results(session))
    assert int(db.scalar(f"SELECT sum(a) FROM {table}")) == 326
    [active] = ext.grants.list()
    assert active.uses == 1


async def test_an_approval_the_audit_cannot_record_runs_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'u.sqlite'}"
    scratch = Scratch("sqlite", url)
    table = scratch.table()
    ext = pi_notebook.database.database_extension(url)
    model = _script(f"INSERT INTO {table} (a) VALUES (1)")
    session = create_agent_session(
        model=model,
        ui=ScriptedApprovalUI("approved"),
        extensions=[ext],
        audit=f"sqlite:///{tmp_path / 'audit.sqlite'}",
    )
    audit = session.audit
    assert audit is not None
    real = audit.record

    def failing(kind: Any, *args: Any, **kw: Any) -> Any:
        if kind == "approval":
            raise OSError("read-only file system")
        return real(kind, *args, **kw)

    real_commit = audit.commit

    async def failing_commit(kind: Any, *args: Any, **kw: Any) -> Any:  # the async path
        if getattr(kind, "kind", kind) == "approval":  # the gate commits a typed record
            raise OSError("read-only file system")
        return await real_commit(kind, *args, **kw)

    audit.record = failing  # type: ignore[method-assign]
    audit.commit = failing_commit  # type: ignore[method-assign]
    try:
        await session.prompt("go")
        [result] = _results(session)
        assert result.is_error and "audit store is unavailable" in _text(result)
        assert scratch.count(table) == 0 and len(ext.backend.capabilities) == 0
    finally:
        await session.close()
        scratch.dispose()


# -- grants keep written tables apart from tables only read ---------------


async def test_the_suggested_grant_never_lets_a_table_it_only_reads_be_written(
    db: Scratch, governed: Any
) -> None:
    staging, accounts = _staging(db), _three_rows(db)
    asked: list[ApprovalRequest] = []

    def answer(req: ApprovalRequest) -> ApprovalOutcome:
        asked.append(req)  # the first: what the prefilled Grant button does; later: rejected
        if len(asked) == 1:
            return ApprovalOutcome("approved", grant=req.grant_scope)
        return ApprovalOutcome("rejected")

    sqls = [
        f"INSERT INTO {staging} (a) SELECT a FROM {accounts}",
        f"INSERT INTO {accounts} (a) VALUES (666)",
        f"UPDATE {accounts} SET a = 0",
        f"INSERT INTO {staging} (a) SELECT a FROM {accounts} WHERE a = 1",
    ]
    session, _ = await governed(db.url, sqls, ui=ScriptedApprovalUI(answer))
    scope = asked[0].grant_scope
    assert scope is not None and (scope.operations, scope.tables, scope.reads, scope.max_rows) == (
        ("INSERT",),
        (staging,),
        (accounts,),
        3,
    )
    assert [r.tool_call_id for r in asked] == ["q0", "q1", "q2"]  # q3 ran inside the grant
    assert db.count(accounts) == 3 and int(db.scalar(f"SELECT sum(a) FROM {accounts}")) == 6
    assert db.count(staging) == 4
    assert [m.is_error for m in _results(session)] == [False, True, True, False]


async def test_a_grant_is_suggested_with_a_row_bound_even_when_the_preview_counted_none(
    tmp_path: Path, governed: Any
) -> None:
    url = f"sqlite:///{tmp_path / 'z.sqlite'}"
    scratch = Scratch("sqlite", url)
    staging, accounts = _staging(scratch), _three_rows(scratch)
    ui = ScriptedApprovalUI("rejected")
    await governed(url, [f"INSERT INTO {staging} (a) SELECT a FROM {accounts} WHERE a > 9"], ui=ui)
    [req] = ui.requests
    assert req.preview is not None and req.preview.affected_rows == 0
    assert req.grant_scope is not None and req.grant_scope.max_rows == 100
    scratch.dispose()


# -- triggers, views and cascades fall outside every grant -----------------


def _hidden_effects(db: Scratch, accounts: str) -> dict[str, str]:
    """Scratch tables named staging_* whose writes change ``accounts`` behind the statement:
    a trigger, a view (written through its INSTEAD OF trigger or by the engine), a cascade."""
    tag = uuid.uuid4().hex[:8]
    trig, view, parent = f"staging_t{tag}", f"staging_v{tag}", f"staging_p{tag}"
    child = f"child_{tag}"
    db.execute(f"CREATE TABLE {trig} (a INTEGER NOT NULL)")
    db.execute(f"CREATE VIEW {view} AS SELECT a FROM {accounts}")
    db.execute(f"CREATE TABLE {parent} (a INTEGER NOT NULL PRIMARY KEY)")
    db.execute(f"CREATE TABLE {child} (a INTEGER REFERENCES {parent} (a) ON DELETE CASCADE)")
    if db.engine == "sqlite":
        db.execute(
            f"CREATE TRIGGER w{tag} AFTER INSERT ON {trig} BEGIN DELETE FROM {accounts}; END"
        )
        db.execute(
            f"CREATE TRIGGER v{tag} INSTEAD OF INSERT ON {view} "
            f"BEGIN INSERT INTO {accounts} (a) VALUES (NEW.a); END"
        )
    elif db.engine == "postgres":
        db.execute(
            f"CREATE FUNCTION f{tag}() RETURNS trigger LANGUAGE plpgsql AS "
            f"$$ BEGIN DELETE FROM {accounts}; RETURN NEW; END $$"
        )
        db.execute(
            f"CREATE TRIGGER w{tag} AFTER INSERT ON {trig} FOR EACH ROW EXECUTE FUNCTION f{tag}()"
        )
    else:
        db.execute(
            f"CREATE TRIGGER w{tag} AFTER INSERT ON {trig} FOR EACH ROW DELETE FROM {accounts}"
        )
    db.execute(f"INSERT INTO {parent} (a) VALUES (1)")
    return {"trigger": trig, "view": view, "cascade": parent}


async def test_a_write_with_triggers_views_or_cascades_is_outside_every_grant(
    db: Scratch, governed: Any
) -> None:
    if db.engine == "duckdb":
        pytest.skip("DuckDB has no triggers, updatable views or cascading foreign keys")
    plain, accounts = _staging(db), _three_rows(db)
    hidden = _hidden_effects(db, accounts)
    grant = Grant(operations=("INSERT", "DELETE"), tables=("staging_*",), ttl_s=600)
    asked: list[ApprovalRequest] = []

    def answer(req: ApprovalRequest) -> ApprovalOutcome:
        asked.append(req)
        return (
            ApprovalOutcome("approved", grant=grant)
            if len(asked) == 1
            else (ApprovalOutcome("rejected"))
        )

    sqls = [
        f"INSERT INTO {plain} (a) VALUES (1)",  # asked: grants staging_*
        f"INSERT INTO {hidden['trigger']} (a) VALUES (1)",  # its trigger empties accounts
        f"INSERT INTO {hidden['view']} (a) VALUES (7)",  # writes accounts through the view
        f"DELETE FROM {hidden['cascade']}",  # cascades to another table
        f"INSERT INTO {plain} (a) VALUES (2)",
    ]  # inside the grant
    session, _ = await governed(db.url, sqls, ui=ScriptedApprovalUI(answer))
    assert [r.tool_call_id for r in asked] == ["q0", "q1", "q2", "q3"]
    for req, why in zip(asked[1:], ["has a trigger", "view", "cascade"], strict=True):
        assert req.grant_scope is None  # no grant is offered for it either
        assert any("no scoped grant can cover it" in r and why in r for r in req.reasons), (
            req.reasons
        )
    assert db.count(accounts) == 3 and db.count(plain) == 2
    assert [m.is_error for m in _results(session)] == [False, True, True, True, False]


async def test_two_calls_in_one_turn_are_approved_and_rejected_independently(
    db: Scratch, tmp_path: Path
) -> None:
    table = db.table()
    batch = [
        tool_call("query_database", {"sql": f"INSERT INTO {table} (a) VALUES ({n})"}, id=f"p{n}")
        for n in (10, 20, 30)
    ]
    answers = {"p10": "approved", "p20": "rejected", "p30": "approved"}
    ui = ScriptedApprovalUI(lambda req: ApprovalOutcome(answers[req.tool_call_id]))  # type: ignore[arg-type]
    ext = pi_notebook.database.database_extension(db.url)
    session = create_agent_session(
        model=ScriptedModel([batch, text("done")]),
        ui=ui,
        extensions=[ext],
        audit=f"sqlite:///{tmp_path / 'audit.sqlite'}",
    )
    try:
        await session.prompt("go")
        # each request names its own call and carries that call's statement
        assert {r.tool_call_id: r.args["sql"][-4:] for r in ui.requests} == {
            "p10": "(10)",
            "p20": "(20)",
            "p30": "(30)",
        }
        errors = {m.tool_call_id: m.is_error for m in _results(session)}
        assert errors == {"p10": False, "p20": True, "p30": False}
        assert int(db.scalar(f"SELECT sum(a) FROM {table}")) == 40 and db.count(table) == 2
        decisions = {r.tool_call_id: r.decision for r in ext.approvals.records()}
        assert decisions == {"p10": "approved", "p20": "rejected", "p30": "approved"}
        assert len(ext.backend.capabilities) == 0
    finally:
        await session.close()


async def test_the_trigger_check_resolves_names_as_sqlite_does(tmp_path: Path) -> None:
    from pi_notebook.database.triggers import hidden_effects
    from pi_notebook.sql.backend import DatabaseBackend

    url = f"sqlite:///{tmp_path / 'k.sqlite'}"
    scratch = Scratch("sqlite", url)
    plain, other = scratch.table(), scratch.table()
    scratch.execute(f"CREATE TRIGGER k AFTER DELETE ON {other} BEGIN SELECT 1; END")
    backend = DatabaseBackend(url, approvals=CapabilityStore())
    try:
        assert await hidden_effects(backend, [plain]) is None
        assert await hidden_effects(backend, [f"main.{plain}"]) is None
        assert await hidden_effects(backend, [plain.upper()]) is None  # SQLite ignores case
        assert "has a trigger (k)" in str(await hidden_effects(backend, [plain, other]))
        assert "has a trigger" in str(await hidden_effects(backend, [f"main.{other}"]))
        assert "was not found" in str(await hidden_effects(backend, ["nowhere"]))
        assert "check can resolve" in str(await hidden_effects(backend, ["a.b.c"]))
    finally:
        backend.dispose()
        scratch.dispose()
