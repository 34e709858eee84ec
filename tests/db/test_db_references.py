"""A write's preview names what it does to other tables through foreign keys, and the write is
held to those keys (SQLite connections enforce them).

The preview counts, before the statement runs and in its rolled-back transaction, the rows of
every table that references the rows a DELETE removes (or whose key an UPDATE changes), and
says per key what the write does to them: deletes them too, sets their key to NULL, or fails.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from dbtest_support import Scratch

import pi_notebook.database
from pi_notebook import AgentSession, create_agent_session
from pi_notebook.approvals import WritePreview
from pi_notebook.sample_db import create_sample_database
from pi_notebook.sql.backend import DatabaseBackend
from pi_notebook.testing import ScriptedApprovalUI, ScriptedModel, text, tool_call

ACTION_ENGINES = ["sqlite", "postgres", "mysql"]  # DuckDB's foreign keys only restrict


def _url(engine: str, request: pytest.FixtureRequest, tmp: Path) -> str:
    if engine == "sqlite":
        return f"sqlite:///{tmp / 'db.sqlite'}"
    if engine == "duckdb":
        return f"duckdb:///{tmp / 'db.duckdb'}"
    return str(request.getfixturevalue("pg_url" if engine == "postgres" else "mysql_url"))


@pytest.fixture
async def governed(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """``await governed(url, sql)``: one prompt whose model runs ``sql``; the person approves.
    Returns (session, ui)."""
    sessions: list[AgentSession] = []

    async def run(url: str, sql: str) -> tuple[AgentSession, ScriptedApprovalUI]:
        ui = ScriptedApprovalUI("approved")
        model = ScriptedModel([[tool_call("query_database", {"sql": sql}, id="w1")], text("ok")])
        session = create_agent_session(
            model=model,
            ui=ui,
            audit=f"sqlite:///{tmp_path / 'audit.sqlite'}",
            extensions=[pi_notebook.database.database_extension(url)],
        )
        sessions.append(session)
        await session.prompt("go")
        return session, ui

    yield run
    for s in sessions:
        await s.close()


def _result(session: AgentSession) -> tuple[bool, str]:
    [result] = [m for m in session.messages if m.role == "toolResult"]
    return result.is_error, " ".join(getattr(p, "text", "") for p in result.content)


def _note(preview: WritePreview | None) -> str:
    assert preview is not None and preview.note, preview
    return preview.note


# -- the sample database (SQLite) -------------------------------------------------------------


async def test_deleting_referenced_orders_is_previewed_as_failing_and_fails_changing_nothing(
    tmp_path: Path, governed: Any
) -> None:
    """The sample's order_items reference orders (no ON DELETE action): the preview names the
    items of the cancelled orders, and the approved DELETE fails, rolled back, saying why."""
    url = f"sqlite:///{tmp_path / 'shop.sqlite'}"
    create_sample_database(url)
    scratch = Scratch("sqlite", url)
    try:
        items = scratch.scalar(
            "SELECT count(*) FROM order_items WHERE order_id IN "
            "(SELECT order_id FROM orders WHERE status = 'cancelled')"
        )
        assert items > 0
        before = (scratch.count("orders"), scratch.count("order_items"))
        session, ui = await governed(url, "DELETE FROM orders WHERE status = 'cancelled'")
        note = _note(ui.requests[0].preview)
        assert f"would fail: {items:,} order_items rows reference these orders" in note
        assert "order_items.order_id → orders.order_id, ON DELETE NO ACTION" in note
        is_error, said = _result(session)
        assert is_error and "FOREIGN KEY constraint failed" in said and "\n" not in said
        assert "still reference" in said
        assert (scratch.count("orders"), scratch.count("order_items")) == before
        [approval] = session.audit.to_dataframe(kind="approval")["payload"]
        assert "would fail" in approval["preview"]["note"]  # the audit keeps what was shown
    finally:
        scratch.dispose()


async def test_an_update_of_a_column_no_key_references_names_no_other_table(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'shop.sqlite'}"
    create_sample_database(url)
    backend = DatabaseBackend(url)
    try:
        preview = await backend.preview(
            "p1", "UPDATE orders SET status = 'void' WHERE status = 'cancelled'"
        )
        assert preview.affected_rows is not None and preview.affected_rows > 0
        assert preview.note is None or "order_items" not in preview.note
        keyed = await backend.preview(
            "p2", "UPDATE orders SET order_id = order_id + 100000 WHERE status = 'cancelled'"
        )
        assert "would fail if it changes their key" in _note(keyed)
        assert "order_items rows reference these orders" in _note(keyed)
    finally:
        backend.dispose()


# -- cascade, set null and restrict on each engine that has them ----------------------------


def _tables(scratch: Scratch, *, locks: bool) -> str:
    """A parent ``p`` (6 rows, 3 with grp = 1) with children: items (2 per parent, ON DELETE
    and ON UPDATE CASCADE), notes (1 per item, ON DELETE CASCADE from items), tags (1 per
    parent, ON DELETE SET NULL) and, with ``locks``, one lock on parent 3 (RESTRICT)."""
    p = f"p_{uuid.uuid4().hex[:8]}"
    scratch.execute(f"CREATE TABLE {p} (id INTEGER PRIMARY KEY, grp INTEGER NOT NULL)")
    scratch.execute(
        f"CREATE TABLE {p}_items (id INTEGER PRIMARY KEY, p_id INTEGER NOT NULL, "
        f"FOREIGN KEY (p_id) REFERENCES {p} (id) ON DELETE CASCADE "
        "ON UPDATE CASCADE)"
    )
    scratch.execute(
        f"CREATE TABLE {p}_notes (id INTEGER PRIMARY KEY, item_id INTEGER NOT NULL, "
        f"FOREIGN KEY (item_id) REFERENCES {p}_items (id) ON DELETE CASCADE)"
    )
    scratch.execute(
        f"CREATE TABLE {p}_tags (id INTEGER PRIMARY KEY, p_id INTEGER, "
        f"FOREIGN KEY (p_id) REFERENCES {p} (id) ON DELETE SET NULL)"
    )
    parents = range(1, 7)
    scratch.execute(
        f"INSERT INTO {p} (id, grp) VALUES " + ", ".join(f"({i}, {i % 2})" for i in parents)
    )
    scratch.execute(
        f"INSERT INTO {p}_items (id, p_id) VALUES "
        + ", ".join(f"({i * 10 + k}, {i})" for i in parents for k in (1, 2))
    )
    scratch.execute(
        f"INSERT INTO {p}_notes (id, item_id) VALUES "
        + ", ".join(f"({i * 10 + k}, {i * 10 + k})" for i in parents for k in (1, 2))
    )
    scratch.execute(
        f"INSERT INTO {p}_tags (id, p_id) VALUES " + ", ".join(f"({i}, {i})" for i in parents)
    )
    if locks:
        scratch.execute(
            f"CREATE TABLE {p}_locks (id INTEGER PRIMARY KEY, p_id INTEGER NOT NULL, "
            f"FOREIGN KEY (p_id) REFERENCES {p} (id) ON DELETE RESTRICT)"
        )
        scratch.execute(f"INSERT INTO {p}_locks (id, p_id) VALUES (1, 3), (2, 4)")
    return p


def _state(scratch: Scratch, p: str) -> tuple[int, int, int, int]:
    return (
        scratch.count(p),
        scratch.count(f"{p}_items"),
        scratch.count(f"{p}_notes"),
        int(scratch.scalar(f"SELECT count(*) FROM {p}_tags WHERE p_id IS NULL")),
    )


@pytest.mark.parametrize("engine", ACTION_ENGINES)
async def test_preview_counts_cascades_and_set_null_and_the_write_does_exactly_that(
    engine: str, request: pytest.FixtureRequest, tmp_path: Path, governed: Any
) -> None:
    scratch = Scratch(engine, _url(engine, request, tmp_path))
    try:
        p = _tables(scratch, locks=False)
        sql = f"DELETE FROM {p} WHERE grp = 1"
        session, ui = await governed(scratch.url, sql)
        preview = ui.requests[0].preview
        note = _note(preview)
        assert preview is not None and preview.affected_rows == 3
        assert f"also deletes 6 {p}_items rows that reference these {p}" in note
        assert f"also deletes 6 {p}_notes rows that reference those {p}_items" in note
        assert f"also sets p_id to NULL in 3 {p}_tags rows that reference these {p}" in note
        assert "ON DELETE CASCADE" in note and "ON DELETE SET NULL" in note
        assert "would fail" not in note
        is_error, said = _result(session)
        assert not is_error, said
        # What the preview said is what the approved write did.
        assert _state(scratch, p) == (3, 6, 6, 3)
    finally:
        scratch.dispose()


@pytest.mark.parametrize("engine", ACTION_ENGINES)
async def test_a_restricting_key_makes_the_preview_say_the_write_fails_and_it_does(
    engine: str, request: pytest.FixtureRequest, tmp_path: Path, governed: Any
) -> None:
    scratch = Scratch(engine, _url(engine, request, tmp_path))
    try:
        p = _tables(scratch, locks=True)
        before = _state(scratch, p)
        session, ui = await governed(scratch.url, f"DELETE FROM {p} WHERE grp = 1")
        note = _note(ui.requests[0].preview)
        assert f"would fail: 1 {p}_locks row references these {p}" in note
        assert f"{p}_locks.p_id → {p}.id, ON DELETE RESTRICT" in note
        assert f"also deletes 6 {p}_items rows" in note  # the other keys are still described
        is_error, said = _result(session)
        assert is_error and "foreign key" in said.lower() and "\n" not in said
        if engine != "sqlite":  # PostgreSQL and MariaDB name the table; SQLite names nothing
            assert f"{p}_locks" in said
        assert _state(scratch, p) == before and scratch.count(f"{p}_locks") == 2
    finally:
        scratch.dispose()


@pytest.mark.parametrize("engine", ACTION_ENGINES)
async def test_an_update_of_a_referenced_key_names_the_rows_that_follow_it(
    engine: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    scratch = Scratch(engine, _url(engine, request, tmp_path))
    backend = DatabaseBackend(scratch.url)
    try:
        p = _tables(scratch, locks=False)
        keyed = await backend.preview("u1", f"UPDATE {p} SET id = id + 100 WHERE grp = 1")
        note = _note(keyed)
        assert f"also changes p_id to the new key in 6 {p}_items rows" in note
        assert "ON UPDATE CASCADE" in note
        assert f"{p}_tags" in note and "would fail if it changes their key" in note  # NO ACTION
        plain = await backend.preview("u2", f"UPDATE {p} SET grp = 7 WHERE grp = 1")
        assert plain.note is None or f"{p}_items" not in plain.note
        assert _state(scratch, p) == (6, 12, 12, 0)
    finally:
        backend.dispose()
        scratch.dispose()


async def test_duckdb_preview_names_referencing_rows_and_the_write_fails(
    tmp_path: Path, governed: Any
) -> None:
    scratch = Scratch("duckdb", f"duckdb:///{tmp_path / 'db.duckdb'}")
    try:
        scratch.execute("CREATE TABLE parent (id INTEGER PRIMARY KEY, grp INTEGER)")
        scratch.execute("CREATE TABLE child (id INTEGER, parent_id INTEGER REFERENCES parent (id))")
        scratch.execute("INSERT INTO parent VALUES (1, 1), (2, 0), (3, 1)")
        scratch.execute("INSERT INTO child VALUES (1, 1), (2, 1), (3, 2), (4, 3)")
        session, ui = await governed(scratch.url, "DELETE FROM parent WHERE grp = 1")
        note = _note(ui.requests[0].preview)
        assert "would fail: 3 child rows reference these parent" in note
        assert "child.parent_id → parent.id" in note
        is_error, said = _result(session)
        assert is_error and "foreign key" in said.lower()
        assert scratch.count("parent") == 3 and scratch.count("child") == 4
        backend = DatabaseBackend(scratch.url)
        try:  # DuckDB's TRUNCATE deletes row by row; its DROP refuses a referenced table
            truncate = _note(await backend.preview("d2", "TRUNCATE parent"))
            assert "would fail: 4 child rows reference these parent" in truncate
            drop = _note(await backend.preview("d3", "DROP TABLE parent"))
            assert "would fail: child (4 rows) references parent" in drop
        finally:
            backend.dispose()
        assert scratch.count("parent") == 3
    finally:
        scratch.dispose()


def test_sqlite_triggers_on_the_written_table_are_named(tmp_path: Path) -> None:
    import asyncio

    scratch = Scratch("sqlite", f"sqlite:///{tmp_path / 'db.sqlite'}")
    backend = DatabaseBackend(scratch.url)
    try:
        p = _tables(scratch, locks=False)
        scratch.execute(f"CREATE TABLE {p}_log (n INTEGER)")
        scratch.execute(
            f"CREATE TRIGGER {p}_audit AFTER DELETE ON {p} "
            f"BEGIN INSERT INTO {p}_log VALUES (old.id); END"
        )
        preview = asyncio.run(backend.preview("t1", f"DELETE FROM {p} WHERE grp = 1"))
        assert f"{p} has trigger {p}_audit: they run with the write" in _note(preview)
        assert scratch.count(f"{p}_log") == 0 and _state(scratch, p) == (6, 12, 12, 0)
    finally:
        backend.dispose()
        scratch.dispose()


@pytest.mark.postgres
async def test_postgres_rows_a_write_reaches_that_cannot_be_counted_are_said_so(
    pg_url: str,
) -> None:
    """A DELETE ... USING has no derivable rows: the preview names the referencing key and says
    its rows are not counted, never that there are none."""
    scratch = Scratch("postgres", pg_url)
    backend = DatabaseBackend(pg_url)
    try:
        p = _tables(scratch, locks=False)
        preview = await backend.preview(
            "x1", f"DELETE FROM {p} USING {p}_tags t WHERE t.p_id = {p}.id AND t.id = 1"
        )
        note = _note(preview)
        assert f"{p}_items references {p}" in note and "not counted" in note
        assert _state(scratch, p) == (6, 12, 12, 0)
    finally:
        backend.dispose()
        scratch.dispose()


async def test_a_key_whose_rows_cannot_be_counted_is_said_so_never_none(tmp_path: Path) -> None:
    """A foreign key naming a column its parent lacks (SQLite accepts the declaration): the
    count fails, and the preview says what it could not check instead of naming nothing."""
    scratch = Scratch("sqlite", f"sqlite:///{tmp_path / 'db.sqlite'}")
    backend = DatabaseBackend(scratch.url)
    try:
        scratch.execute("CREATE TABLE parent (id INTEGER PRIMARY KEY)")
        scratch.execute("INSERT INTO parent VALUES (1), (2)")
        scratch.execute("CREATE TABLE child (x INTEGER REFERENCES parent (nope))")
        preview = await backend.preview("m1", "DELETE FROM parent WHERE id = 1")
        assert "what it does to rows of other tables could not be checked" in _note(preview)
        assert scratch.count("parent") == 2
    finally:
        backend.dispose()
        scratch.dispose()


@pytest.mark.parametrize("engine", ACTION_ENGINES)
async def test_dropping_a_referenced_table_names_what_references_it(
    engine: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """SQLite's DROP TABLE deletes every row first (the keys' actions apply); PostgreSQL and
    MariaDB refuse to drop or truncate a table another table references."""
    scratch = Scratch(engine, _url(engine, request, tmp_path))
    backend = DatabaseBackend(scratch.url)
    try:
        p = _tables(scratch, locks=False)
        note = _note(await backend.preview("d1", f"DROP TABLE {p}"))
        if engine == "sqlite":
            assert f"also deletes 12 {p}_items rows that reference these {p}" in note
            assert f"also sets p_id to NULL in 6 {p}_tags rows" in note
        else:
            assert f"would fail: {p}_items (12 rows) references {p}" in note
            assert f"would fail: {p}_tags (6 rows) references {p}" in note
            truncate = _note(await backend.preview("d2", f"TRUNCATE {p}"))
            assert f"would fail: {p}_items (12 rows) references {p}" in truncate
        if engine == "postgres":
            cascade = _note(await backend.preview("d3", f"TRUNCATE {p} CASCADE"))
            assert f"also empties {p}_items, all its 12 rows" in cascade
            assert f"also empties {p}_notes, all its 12 rows" in cascade  # followed further
            dropped = _note(await backend.preview("d4", f"DROP TABLE {p} CASCADE"))
            assert f"also drops the foreign key of {p}_items" in dropped
            assert "its 12 rows stay" in dropped
        assert _state(scratch, p) == (6, 12, 12, 0)
    finally:
        backend.dispose()
        scratch.dispose()


@pytest.mark.postgres
async def test_postgres_partitioned_tables_and_composite_keys_are_counted_once(
    pg_url: str,
) -> None:
    """A key between partitioned tables is copied onto every partition: the preview counts its
    rows once, whether the parent table or one of its partitions is written."""
    scratch = Scratch("postgres", pg_url)
    backend = DatabaseBackend(pg_url)
    p = f"p_{uuid.uuid4().hex[:8]}"
    try:
        for sql in (
            f"CREATE TABLE {p} (id int, yr int, PRIMARY KEY (id, yr)) PARTITION BY LIST (yr)",
            f"CREATE TABLE {p}_23 PARTITION OF {p} FOR VALUES IN (2023)",
            f"CREATE TABLE {p}_24 PARTITION OF {p} FOR VALUES IN (2024)",
            f"CREATE TABLE {p}_c (id int, yr int, pid int, FOREIGN KEY (pid, yr) REFERENCES {p} "
            "(id, yr) ON DELETE CASCADE) PARTITION BY LIST (yr)",
            f"CREATE TABLE {p}_c23 PARTITION OF {p}_c FOR VALUES IN (2023)",
            f"CREATE TABLE {p}_c24 PARTITION OF {p}_c FOR VALUES IN (2024)",
            f"INSERT INTO {p} VALUES (1, 2023), (2, 2024)",
            f"INSERT INTO {p}_c VALUES (1, 2023, 1), (2, 2023, 1), (3, 2024, 2)",
        ):
            scratch.execute(sql)
        link = f"{p}_c(pid, yr) → {p}(id, yr), ON DELETE CASCADE"
        whole = _note(await backend.preview("w1", f"DELETE FROM {p}"))
        assert whole == f"also deletes 3 {p}_c rows that reference these {p} ({link})"
        part = _note(await backend.preview("w2", f"DELETE FROM {p}_23"))
        assert f"also deletes 2 {p}_c rows that reference these {p}_23" in part
        assert scratch.count(f"{p}_c") == 3
    finally:
        scratch.execute(f"DROP TABLE IF EXISTS {p}_c, {p}")
        backend.dispose()
        scratch.dispose()
