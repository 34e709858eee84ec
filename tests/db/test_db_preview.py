# ruff: noqa: F811 - the engine fixture ``db`` is imported from dbtest_support
"""The write preview bound to the approval, on all four engines.

``preview()`` measures a write without changing anything; ``run()`` re-counts inside the
approved transaction and refuses (rolled back, audited) when the count drifted.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from dbtest_support import FakeAudit, Scratch, db, long_insert  # noqa: F401

from pi_notebook.ai.abort import AbortController
from pi_notebook.approvals import WritePreview
from pi_notebook.errors import AuditUnavailableError
from pi_notebook.sql.backend import DatabaseBackend, QueryAborted, QueryRefused, query_args_hash
from pi_notebook.sql.backend.backend import AUDIT_UNAVAILABLE

ROLLED_BACK = "counted by running the statement in a transaction that was rolled back"
SELECTED = "counted with SELECT count(*); the statement itself was not run"


@pytest.fixture
async def backend(db: Scratch) -> AsyncIterator[DatabaseBackend]:
    b = DatabaseBackend(db.url, audit=FakeAudit())
    try:
        yield b
    finally:
        b.dispose()


def _filled(db: Scratch, n: int = 10) -> str:
    table = db.table()
    db.execute(f"INSERT INTO {table} (a) VALUES " + ", ".join(f"({i})" for i in range(1, n + 1)))
    return table


def _checksum(db: Scratch, table: str) -> tuple[int, int, int]:
    """Row count, sum and sum of squares: any changed, added or removed row shows."""
    row = db.row(f"SELECT count(*), sum(a), sum(a * a) FROM {table}")
    return int(row[0]), int(row[1] or 0), int(row[2] or 0)


def _long_pure_insert(engine: str, table: str) -> str:
    """An INSERT that runs for a long time and calls nothing impure (so a preview runs it)."""
    if engine == "postgres":
        return (
            f"INSERT INTO {table} (a) WITH RECURSIVE c(x) AS "
            "(SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
        )
    if engine == "mysql":
        return (
            f"INSERT INTO {table} (a) SELECT count(*) FROM seq_1_to_1000000 a, seq_1_to_1000000 b"
        )
    return long_insert(engine, table)


def _audit(b: DatabaseBackend) -> FakeAudit:
    assert isinstance(b.audit, FakeAudit)
    return b.audit


WRITES = {
    "update": ("UPDATE {t} SET a = a + 100 WHERE a > 6", 4),
    "delete": ("DELETE FROM {t} WHERE a <= 3", 3),
    "insert_values": ("INSERT INTO {t} (a) VALUES (11), (12)", 2),
    "insert_select": ("INSERT INTO {t} (a) SELECT a + 50 FROM {t} WHERE a > 5", 5),
}


@pytest.mark.parametrize("case", list(WRITES))
async def test_preview_counts_what_the_write_changes_and_changes_nothing(
    db: Scratch, backend: DatabaseBackend, case: str
) -> None:
    table = _filled(db)
    sql, expected = WRITES[case]
    sql = sql.format(t=table)
    before = _checksum(db, table)
    preview = await backend.preview("p1", sql)
    assert isinstance(preview, WritePreview)
    assert _checksum(db, table) == before  # the preview changed nothing
    assert preview.affected_rows == expected and preview.method == ROLLED_BACK
    assert preview.plan and len(preview.plan) <= 4_000
    assert preview.sample is not None and 0 < len(preview.sample) <= 5
    # The same count comes out of the real write, approved with that count.
    backend.capabilities.grant(
        "w1", query_args_hash(sql, backend.dialect), 60, expected_rows=preview.affected_rows
    )
    out = await backend.run("w1", sql)
    assert out.row_count == expected and _checksum(db, table) != before
    kinds = _audit(backend).kinds()
    assert kinds[:2] == ["write_preview", "write_preview"]
    start, result = _audit(backend).of("write_preview")
    assert start["durable"] and start["payload"]["phase"] == "start"
    assert (
        result["payload"]["affected_rows"] == expected and result["payload"]["method"] == "execute"
    )


async def test_preview_of_drop_table_counts_with_select_and_keeps_the_table(
    db: Scratch, backend: DatabaseBackend
) -> None:
    """DDL is never run to preview it (MySQL/MariaDB would commit it implicitly)."""
    table = _filled(db, 7)
    preview = await backend.preview("p1", f"DROP TABLE {table}")
    assert preview.affected_rows == 7 and preview.method == SELECTED
    assert preview.sample is not None and len(preview.sample) == 5
    assert _checksum(db, table) == (7, 28, 140)


async def test_preview_of_a_failing_write_says_why_and_changes_nothing(
    db: Scratch, backend: DatabaseBackend
) -> None:
    table = _filled(db, 3)
    preview = await backend.preview("p1", f"INSERT INTO {table} (a) VALUES (4), (NULL)")
    assert preview.affected_rows is None and preview.method is None
    assert preview.note and "the statement fails" in preview.note
    assert _checksum(db, table) == (3, 6, 14)


async def test_preview_refuses_reads_and_rejected_sql(backend: DatabaseBackend) -> None:
    with pytest.raises(QueryRefused, match="a read needs no preview"):
        await backend.preview("p1", "SELECT 1")
    with pytest.raises(QueryRefused, match=r"^Refused: not previewed: "):
        await backend.preview("p2", "SELECT 1; DELETE FROM t")
    assert _audit(backend).kinds() == []


async def test_preview_is_stopped_by_abort_and_changes_nothing(
    db: Scratch, backend: DatabaseBackend
) -> None:
    table = db.table()
    controller = AbortController()
    loop = asyncio.get_running_loop()
    loop.call_later(0.3, controller.abort)
    with pytest.raises(QueryAborted):
        await backend.preview("p1", _long_pure_insert(db.engine, table), signal=controller.signal)
    assert db.count(table) == 0
    assert _audit(backend).of("write_preview")[-1]["payload"]["phase"] == "error"


async def test_preview_under_the_statement_timeout_gives_a_note(db: Scratch) -> None:
    table = db.table()
    backend = DatabaseBackend(db.url, statement_timeout_s=0.3)
    try:
        preview = await backend.preview("p1", _long_pure_insert(db.engine, table))
    finally:
        backend.dispose()
    assert preview.affected_rows is None and preview.note and "statement timeout" in preview.note
    assert db.count(table) == 0


async def test_rows_added_after_the_preview_make_the_write_refuse(
    db: Scratch, backend: DatabaseBackend
) -> None:
    table = _filled(db, 5)
    sql = f"DELETE FROM {table} WHERE a > 2"
    preview = await backend.preview("p1", sql)
    assert preview.affected_rows == 3
    db.execute(f"INSERT INTO {table} (a) VALUES (6), (7)")  # someone else writes meanwhile
    before = _checksum(db, table)
    backend.capabilities.grant(
        "w1", query_args_hash(sql, backend.dialect), 60, expected_rows=preview.affected_rows
    )
    with pytest.raises(QueryRefused) as info:
        await backend.run("w1", sql)
    assert str(info.value) == (
        "Refused: the statement would change 5 rows, the approval was for 3; nothing was changed."
    )
    assert _checksum(db, table) == before
    [drift] = _audit(backend).of("preview_drift")
    assert drift["payload"]["expected_rows"] == 3 and drift["payload"]["actual_rows"] == 5
    assert drift["payload"]["args_hash"] == query_args_hash(sql, backend.dialect)


async def test_a_write_over_the_grants_row_limit_is_refused(
    db: Scratch, backend: DatabaseBackend
) -> None:
    table = _filled(db, 6)
    sql = f"UPDATE {table} SET a = a * 10"
    backend.capabilities.grant("w1", query_args_hash(sql, backend.dialect), 60, max_rows=5)
    with pytest.raises(QueryRefused, match="would change 6 rows, the approval allows at most 5"):
        await backend.run("w1", sql)
    assert _checksum(db, table) == (6, 21, 91)
    ok_sql = f"UPDATE {table} SET a = a * 10 WHERE a <= 5"
    backend.capabilities.grant("w2", query_args_hash(ok_sql, backend.dialect), 60, max_rows=5)
    assert (await backend.run("w2", ok_sql)).row_count == 5


async def test_a_bounded_ddl_statement_is_checked_before_it_runs(
    db: Scratch, backend: DatabaseBackend
) -> None:
    """DROP TABLE cannot be rolled back on MySQL/MariaDB: the count comes first."""
    table = _filled(db, 4)
    sql = f"DROP TABLE {table}"
    backend.capabilities.grant("w1", query_args_hash(sql, backend.dialect), 60, expected_rows=3)
    with pytest.raises(QueryRefused, match="would change 4 rows, the approval was for 3"):
        await backend.run("w1", sql)
    assert db.count(table) == 4


class _BrokenAudit(FakeAudit):
    def record(self, kind: str, payload: Any = None, *, durable: bool = False, **ids: Any) -> None:
        if durable:
            raise AuditUnavailableError("the audit store is locked")
        super().record(kind, payload, durable=durable, **ids)


async def test_an_unavailable_audit_refuses_write_and_preview(db: Scratch) -> None:
    table = db.table()
    sql = f"INSERT INTO {table} (a) VALUES (1)"
    backend = DatabaseBackend(db.url, audit=_BrokenAudit())
    try:
        backend.capabilities.grant("w1", query_args_hash(sql, backend.dialect), 60)
        with pytest.raises(QueryRefused) as info:
            await backend.run("w1", sql)
        assert (
            str(info.value)
            == AUDIT_UNAVAILABLE
            == "Refused: not run: the audit store is unavailable."
        )
        with pytest.raises(QueryRefused, match="audit store is unavailable"):
            await backend.preview("p1", sql)
        with pytest.raises(QueryRefused, match="audit store is unavailable"):
            await backend.run("r1", f"SELECT count(*) FROM {table}")
    finally:
        backend.dispose()
    assert db.count(table) == 0


@pytest.mark.mysql
async def test_preview_on_a_non_transactional_mariadb_table_is_never_run(mysql_url: str) -> None:
    """MyISAM ignores ROLLBACK: the rows are counted with SELECT, the UPDATE is not run."""
    scratch = Scratch("mysql", mysql_url)
    backend = DatabaseBackend(mysql_url)
    try:
        scratch.execute("CREATE TABLE myisam_t (a INTEGER NOT NULL) ENGINE=MyISAM")
        scratch.execute("INSERT INTO myisam_t (a) VALUES (1), (2), (3)")
        preview = await backend.preview("p1", "UPDATE myisam_t SET a = a + 10 WHERE a > 1")
        assert preview.affected_rows == 2 and preview.method == SELECTED
        assert preview.note and "not an InnoDB table" in preview.note
        assert _checksum(scratch, "myisam_t") == (3, 6, 14)
    finally:
        scratch.execute("DROP TABLE IF EXISTS myisam_t")
        backend.dispose()
        scratch.dispose()


@pytest.mark.postgres
async def test_preview_never_fires_a_trigger(pg_url: str) -> None:
    """A trigger may act outside the transaction (dblink, NOTIFY...): such tables are counted
    with SELECT; the trigger never runs."""
    scratch = Scratch("postgres", pg_url)
    table = _filled(scratch, 4)
    backend = DatabaseBackend(pg_url)
    try:
        scratch.execute(f"CREATE TABLE {table}_log (n INTEGER)")
        scratch.execute(
            f"CREATE FUNCTION {table}_f() RETURNS trigger LANGUAGE plpgsql AS "
            f"$$ BEGIN INSERT INTO {table}_log VALUES (1); RETURN NULL; END $$"
        )
        scratch.execute(
            f"CREATE TRIGGER {table}_t AFTER DELETE ON {table} "
            f"FOR EACH ROW EXECUTE FUNCTION {table}_f()"
        )
        preview = await backend.preview("p1", f"DELETE FROM {table} WHERE a > 1")
        assert preview.affected_rows == 3 and preview.method == SELECTED
        assert preview.note and "triggers" in preview.note
        assert scratch.count(f"{table}_log") == 0 and scratch.count(table) == 4
    finally:
        backend.dispose()
        scratch.dispose()


@pytest.mark.postgres
async def test_preview_never_runs_a_write_that_calls_impure_functions(pg_url: str) -> None:
    """nextval() advances a sequence even when the transaction rolls back: the UPDATE is not run,
    its rows are counted with SELECT."""
    scratch = Scratch("postgres", pg_url)
    table = _filled(scratch, 3)
    backend = DatabaseBackend(pg_url)
    try:
        scratch.execute(f"CREATE SEQUENCE {table}_s")
        preview = await backend.preview("p1", f"UPDATE {table} SET a = nextval('{table}_s')")
        assert preview.affected_rows == 3 and preview.method == SELECTED
        assert preview.note and "not a pure read" in preview.note
        assert scratch.scalar(f"SELECT last_value FROM {table}_s") == 1
        assert scratch.scalar(f"SELECT is_called FROM {table}_s") is False
        assert _checksum(scratch, table) == (3, 6, 14)
    finally:
        backend.dispose()
        scratch.dispose()


@pytest.mark.parametrize(
    ("sql", "count_sql", "static_rows"),
    [
        ("UPDATE t SET a = 1 WHERE b > 2", "SELECT COUNT(*) FROM t WHERE b > 2", None),
        ("UPDATE t SET a = o.a FROM o WHERE o.id = t.id", None, None),
        ("DELETE FROM t USING o WHERE o.id = t.id", None, None),
        ("INSERT INTO t (a) VALUES (1), (2), (3)", None, 3),
        ("INSERT INTO t (a) VALUES (1) ON CONFLICT DO NOTHING", None, None),
        ("INSERT INTO t SELECT * FROM u", "SELECT COUNT(*) FROM (SELECT * FROM u) AS _pi_q", None),
        ("MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE", None, None),
        ("DROP TABLE a, b", None, None),
        ("CREATE INDEX i ON t (a)", None, 0),
        ("ALTER TABLE t ADD COLUMN c INTEGER", None, None),
    ],
)
def test_derived_counts_are_exact_or_absent(
    sql: str, count_sql: str | None, static_rows: int | None
) -> None:
    from pi_notebook.sql.backend.derive import plan_write

    plan = plan_write(sql, "postgres")
    assert plan.count_sql == count_sql and plan.static_rows == static_rows
