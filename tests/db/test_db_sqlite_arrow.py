"""SQLite's Arrow path: ADBC in a child process gives the DataFrame the ``sqlite3``
path gives, behind the same walls (the guard compiles every statement first, the child opens
the file read-only, values stay within the kernel's limit), and stops on abort and timeout."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pi_notebook.ai.abort import AbortController
from pi_notebook.readers.protocol import Query
from pi_notebook.sql.backend import DatabaseBackend, QueryAborted, QueryError, QueryRefused
from pi_notebook.sql.backend.arrow import arrow_available
from pi_notebook.sql.backend.arrow_sqlite import ChildFailed, SqliteArrow

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "sql"))
from reads_corpus import load_corpus, schema  # pyright: ignore[reportMissingImports]

pytestmark = pytest.mark.skipif(not arrow_available("sqlite"), reason="no pyarrow/ADBC SQLite")

ROWS = 3_000
CAP = 1_000
ENDLESS = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT i FROM r"


def _fill(path: Path, rows: int = ROWS, journal: str = "delete") -> str:
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA journal_mode = {journal}")
    conn.execute(
        "CREATE TABLE typed (id INTEGER PRIMARY KEY, name TEXT, amount REAL, "
        "maybe INTEGER, blob BLOB, day TEXT)"
    )
    conn.executemany(
        "INSERT INTO typed VALUES (?, ?, ?, ?, ?, ?)",
        [
            (
                i,
                f"näme {i}" if i % 5 else "",
                i * 1.25,
                None if i % 7 == 0 else i,
                bytes([i % 256]) * 3,
                f"2024-01-{i % 28 + 1:02d}",
            )
            for i in range(1, rows + 1)
        ],
    )
    conn.commit()
    conn.close()
    return f"sqlite:///{path}"


class _Spy:
    """Records the statements the child was asked to run."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sql: list[str] = []
        real = SqliteArrow._table  # pyright: ignore[reportPrivateUsage]

        def table(reader: SqliteArrow, query: Query, *args: Any, **kwargs: Any) -> Any:
            self.sql.append(query.sql)
            return real(reader, query, *args, **kwargs)

        monkeypatch.setattr(SqliteArrow, "_table", table)


async def _run(url: str, sql: str, *, arrow: bool, **options: Any) -> Any:
    backend = DatabaseBackend(url, row_cap=CAP, arrow=arrow, **options)
    try:
        return await backend.run("r", sql)
    finally:
        backend.dispose()


async def test_sqlite_arrow_read_gives_the_sqlite3_frame(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _fill(tmp_path / "db.sqlite")
    spy = _Spy(monkeypatch)
    sql = "SELECT * FROM typed ORDER BY id"
    arrow = await _run(url, sql, arrow=True)
    assert spy.sql == [sql]  # the child served it
    dbapi = await _run(url, sql, arrow=False)
    assert spy.sql == [sql]
    pd.testing.assert_frame_equal(arrow.dataframe, dbapi.dataframe)
    assert list(arrow.dataframe.dtypes.astype(str)) == list(dbapi.dataframe.dtypes.astype(str))
    assert len(arrow.dataframe) == CAP and arrow.row_count == CAP + 1 and arrow.truncated
    assert not arrow.row_count_exact and arrow.preview == dbapi.preview
    small = await _run(url, "SELECT id, name FROM typed WHERE id <= 10", arrow=True)
    assert small.row_count == 10 and small.row_count_exact and not small.truncated


async def test_sqlite_arrow_read_falls_back_when_a_column_changes_type(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ADBC fixes a column's type from its first batch; a later text value in an integer
    column fails the child's read, and the sqlite3 path gives the rows unchanged."""
    url = _fill(tmp_path / "db.sqlite", rows=20_000)
    conn = sqlite3.connect(tmp_path / "db.sqlite")
    conn.execute("UPDATE typed SET maybe = 'text' WHERE id = 19999")
    conn.commit()
    conn.close()
    spy = _Spy(monkeypatch)
    sql = "SELECT id, maybe FROM typed WHERE id > 500 ORDER BY id"
    backend = DatabaseBackend(url, row_cap=100_000, arrow=True)
    try:
        out = await backend.run("r", sql)
    finally:
        backend.dispose()
    assert spy.sql == [sql]  # tried, failed, fell back
    dbapi = DatabaseBackend(url, row_cap=100_000, arrow=False)
    try:
        expected = await dbapi.run("r", sql)
    finally:
        dbapi.dispose()
    pd.testing.assert_frame_equal(out.dataframe, expected.dataframe)
    assert out.dataframe.loc[out.dataframe["id"] == 19999, "maybe"].tolist() == ["text"]


@pytest.mark.parametrize("journal", ["delete", "wal"])
async def test_sqlite_arrow_read_sees_a_number_in_a_text_column_past_the_first_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, journal: str
) -> None:
    """The driver would write 5 as '5' once the first batch made the column text."""
    path = tmp_path / "db.sqlite"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA journal_mode = {journal}")
    conn.execute("CREATE TABLE untyped (id INTEGER PRIMARY KEY, v)")
    conn.executemany(
        "INSERT INTO untyped (v) VALUES (?)", [(f"text {i}",) for i in range(40_000)] + [(5,)]
    )
    conn.commit()
    conn.close()
    spy = _Spy(monkeypatch)
    backend = DatabaseBackend(f"sqlite:///{path}", row_cap=100_000, arrow=True)
    try:
        out = await backend.run("r", "SELECT v FROM untyped ORDER BY id")
    finally:
        backend.dispose()
    assert spy.sql == ["SELECT v FROM untyped ORDER BY id"]
    assert out.dataframe["v"].iloc[-1] == 5 and type(out.dataframe["v"].iloc[-1]) is int


@pytest.mark.parametrize(
    "values",
    [
        "('a'), (1), (2.5)",  # the driver would give '1' and '2.5'
        "('a'), (x'00ff')",  # it would decode the blob
        "(x'00'), ('a')",  # it would encode the text
        "(NULL), ('a'), (3)",
    ],
)
@pytest.mark.parametrize("journal", ["delete", "wal"])
async def test_sqlite_arrow_read_keeps_mixed_storage_classes_as_sqlite3_gives_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, values: str, journal: str
) -> None:
    url = _fill(tmp_path / "db.sqlite", journal=journal)
    spy = _Spy(monkeypatch)
    sql = f"SELECT column1 AS v, 7 AS n FROM (VALUES {values})"
    arrow = await _run(url, sql, arrow=True)
    assert spy.sql == [sql]
    plain = await _run(url, sql, arrow=False)
    pd.testing.assert_frame_equal(arrow.dataframe, plain.dataframe)
    assert [type(v) for v in arrow.dataframe["v"]] == [type(v) for v in plain.dataframe["v"]]


@pytest.mark.parametrize(
    ("sql", "error"),
    [
        ("SELECT * FROM sqlite_dbpage", "not authorized|no such table"),
        ("SELECT load_extension('/tmp/x')", "not authorized"),
        ("SELECT fts3_tokenizer('simple')", "not authorized"),
        ("SELECT * FROM missing_table", "no such table"),
    ],
)
async def test_sqlite_arrow_child_never_runs_what_the_guard_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sql: str, error: str
) -> None:
    url = _fill(tmp_path / "db.sqlite")
    spy = _Spy(monkeypatch)
    backend = DatabaseBackend(url, row_cap=CAP, arrow=True)
    try:
        with pytest.raises((QueryError, QueryRefused), match=error):
            await backend._run_as("read", sql)  # pyright: ignore[reportPrivateUsage]  # past the classifier
    finally:
        backend.dispose()
    assert spy.sql == []


def test_sqlite_arrow_child_opens_the_file_read_only(tmp_path: Path) -> None:
    url = _fill(tmp_path / "db.sqlite")
    reader = SqliteArrow(url.removeprefix("sqlite:///"), 64 << 20)
    try:
        with pytest.raises(ChildFailed, match=r"readonly|read-only|query_only"):
            reader.table("INSERT INTO typed (id) VALUES (-1)")
        with pytest.raises(ChildFailed, match=r"readonly|read-only|query_only"):
            reader.table("CREATE TABLE made_by_child (a)")
        assert reader.table("SELECT count(*) AS n FROM typed").to_pylist() == [{"n": ROWS}]
    finally:
        reader.close()
    conn = sqlite3.connect(tmp_path / "db.sqlite")
    assert conn.execute("SELECT count(*) FROM typed WHERE id = -1").fetchone() == (0,)
    assert conn.execute(
        "SELECT count(*) FROM sqlite_master WHERE name = 'made_by_child'"
    ).fetchone() == (0,)
    conn.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pipe sizes are Linux's")
def test_sqlite_arrow_child_writes_into_a_wide_pipe(tmp_path: Path) -> None:
    """The child's stdout pipe holds 1 MiB, not the default 64 KiB: the Arrow batches of a
    large read then pass in a few hand-overs, not hundreds (and it reads the same)."""
    import fcntl

    url = _fill(tmp_path / "db.sqlite")
    reader = SqliteArrow(url.removeprefix("sqlite:///"), 64 << 20)
    try:
        assert reader.table("SELECT count(*) AS n FROM typed").to_pylist() == [{"n": ROWS}]
        proc = reader._proc  # pyright: ignore[reportPrivateUsage]
        assert proc is not None and proc.stdout is not None
        assert fcntl.fcntl(proc.stdout.fileno(), fcntl.F_GETPIPE_SZ) >= 1 << 20
    finally:
        reader.close()


async def test_sqlite_arrow_child_sends_no_value_past_the_kernels_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _fill(tmp_path / "db.sqlite")
    spy = _Spy(monkeypatch)
    sql = "SELECT zeroblob(70 * 1024 * 1024) AS big"
    backend = DatabaseBackend(url, row_cap=CAP, arrow=True)
    try:
        with pytest.raises(QueryError, match="too big"):  # the sqlite3 path's own limit
            await backend._run_as("read", sql)  # pyright: ignore[reportPrivateUsage]  # past the classifier
    finally:
        backend.dispose()
    assert spy.sql == [sql]
    reader = SqliteArrow(str(tmp_path / "db.sqlite"), 64 << 20)
    try:
        with pytest.raises(ChildFailed, match="larger than 67,108,864 bytes"):
            reader.table(sql)
        assert reader.table("SELECT 1 AS one").to_pylist() == [{"one": 1}]  # same child
    finally:
        reader.close()


async def test_sqlite_arrow_read_is_stopped_by_abort_and_timeout(tmp_path: Path) -> None:
    url = _fill(tmp_path / "db.sqlite")
    backend = DatabaseBackend(url, row_cap=10_000_000, arrow=True, statement_timeout_s=60)
    controller = AbortController()
    try:
        task = asyncio.create_task(
            backend.run("r", f"SELECT count(*) FROM ({ENDLESS})", signal=controller.signal)
        )
        await asyncio.sleep(0.5)
        started = time.perf_counter()
        controller.abort()
        with pytest.raises(QueryAborted):
            await task
        aborted_in = time.perf_counter() - started
        out = await backend.run("r", "SELECT count(*) AS n FROM typed")  # a fresh child
        assert out.dataframe["n"].tolist() == [ROWS]
    finally:
        backend.dispose()
    assert aborted_in < 30  # the statement alone never ends
    timed = DatabaseBackend(url, row_cap=10_000_000, arrow=True, statement_timeout_s=0.5)
    try:
        with pytest.raises(QueryError, match="statement timeout"):
            await timed.run("r", f"SELECT count(*) FROM ({ENDLESS})")
    finally:
        timed.dispose()


async def test_sqlite_arrow_path_is_skipped_where_it_cannot_serve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _fill(tmp_path / "db.sqlite")
    spy = _Spy(monkeypatch)
    backend = DatabaseBackend(url, row_cap=CAP, arrow=True)
    try:
        counted = await backend.run("r", "SELECT id FROM typed", count_rows=True)
        assert counted.row_count == ROWS and counted.row_count_exact  # sqlite3 counts
        pragma = await backend.run("r", "PRAGMA table_info(typed)")
        assert "name" in pragma.dataframe.columns
    finally:
        backend.dispose()
    assert spy.sql == []
    memory = DatabaseBackend("sqlite://", row_cap=CAP, arrow=True)
    try:
        assert memory._adbc is None  # pyright: ignore[reportPrivateUsage]
        assert (await memory.run("r", "SELECT 1 AS one")).dataframe["one"].tolist() == [1]
    finally:
        memory.dispose()


async def test_sqlite_arrow_read_reports_progress(tmp_path: Path) -> None:
    url = _fill(tmp_path / "db.sqlite", rows=50_000)
    seen: list[int] = []
    backend = DatabaseBackend(url, row_cap=100_000, arrow=True, progress_every=10_000)
    try:
        out = await backend.run("r", "SELECT id FROM typed", on_progress=seen.append)
        await asyncio.sleep(0)  # progress reaches the loop through call_soon_threadsafe
    finally:
        backend.dispose()
    assert out.row_count == 50_000 and out.row_count_exact
    assert seen and seen == sorted(seen) and all(n % 10_000 == 0 for n in seen)


async def test_sqlite_arrow_corpus_reads_give_the_sqlite3_frames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every read of the SQLite corpus gives the same frame on both paths (the child runs a
    newer SQLite: only what reports the version itself may differ)."""
    db = tmp_path / "corpus.sqlite"
    conn = sqlite3.connect(db)
    for statement in schema("sqlite"):
        conn.execute(statement)
    conn.commit()
    conn.close()
    url = f"sqlite:///{db}"
    spy = _Spy(monkeypatch)
    arrow = DatabaseBackend(url, row_cap=CAP, arrow=True)
    plain = DatabaseBackend(url, row_cap=CAP, arrow=False)
    differ: dict[str, str] = {}
    try:
        for number, sql in enumerate(load_corpus("sqlite")):
            a = await arrow.run(f"a{number}", sql)
            b = await plain.run(f"b{number}", sql)
            if "random" in sql or "sqlite_version" in sql:
                continue  # differs from run to run, or from version to version
            try:
                pd.testing.assert_frame_equal(a.dataframe, b.dataframe, check_column_type=False)
            except AssertionError as exc:
                if "order by" in sql.lower() or not _same_rows(a.dataframe, b.dataframe):
                    differ[sql] = str(exc).splitlines()[0]
    finally:
        arrow.dispose()
        plain.dispose()
    assert len(spy.sql) > 100  # the child served most of them
    assert not differ, differ


def _same_rows(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """The same rows in another order (no ORDER BY: the two SQLite versions may differ)."""
    rows = [sorted(f.astype(str).itertuples(index=False, name=None)) for f in (a, b)]
    return list(a.dtypes) == list(b.dtypes) and rows[0] == rows[1]


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_sqlite_arrow_check_fails_when_a_write_commits_during_the_read(
    tmp_path: Path, journal: str
) -> None:
    """The check runs on a second connection: a commit between the read and the check could
    let them see different rows, so it fails the check (the sqlite3 path then reads)."""
    from pi_notebook.readers import sqlite_child

    path = tmp_path / "db.sqlite"
    _fill(path, rows=10, journal=journal)
    child = sqlite_child._Child(64 << 20)  # pyright: ignore[reportPrivateUsage]
    spare = child.connection(str(path), spare=True)
    quiet = sqlite_child._data_version(spare)  # pyright: ignore[reportPrivateUsage]
    check = "SELECT 1 FROM typed WHERE 0"
    calm = sqlite_child._Checker(spare, check, None, quiet)  # pyright: ignore[reportPrivateUsage]
    assert calm.result() is None
    writer = sqlite3.connect(path)
    writer.execute("UPDATE typed SET name = 'changed' WHERE id = 1")
    writer.commit()
    writer.close()
    moved = sqlite_child._Checker(spare, check, None, quiet)  # pyright: ignore[reportPrivateUsage]
    assert moved.result() == "the database changed during the read"
    mixed = sqlite_child._Checker(spare, "SELECT 1", None, sqlite_child._data_version(spare))  # pyright: ignore[reportPrivateUsage]
    assert mixed.result() == "a text or blob column holds values of another storage class"
    for conn in child.conns.values():
        conn.close()


async def test_sqlite_arrow_reads_see_what_was_committed_since_and_never_block_a_write(
    tmp_path: Path,
) -> None:
    url = _fill(tmp_path / "db.sqlite")
    backend = DatabaseBackend(url, row_cap=CAP, arrow=True)
    count = "SELECT count(*) AS n FROM typed"
    try:
        assert (await backend.run("r1", count)).dataframe["n"].tolist() == [ROWS]
        writer = sqlite3.connect(tmp_path / "db.sqlite", timeout=0)  # busy at once if locked
        writer.execute("DELETE FROM typed WHERE id <= 10")
        writer.commit()
        assert (await backend.run("r2", count)).dataframe["n"].tolist() == [ROWS - 10]
        writer.execute("DELETE FROM typed WHERE id <= 20")
        writer.commit()
        writer.close()
        assert (await backend.run("r3", count)).dataframe["n"].tolist() == [ROWS - 20]
        reader = backend._adbc  # pyright: ignore[reportPrivateUsage]
        assert isinstance(reader, SqliteArrow) and reader._proc is not None  # pyright: ignore[reportPrivateUsage]
    finally:
        backend.dispose()


async def test_sqlite_arrow_stops_trying_a_process_that_cannot_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader process that dies at once (a broken driver, say) costs three tries, then
    every read takes the sqlite3 path straight away."""
    from pi_notebook.readers import sqlite as arrow_sqlite

    starts = tmp_path / "starts"
    broken = tmp_path / "broken_child.py"
    broken.write_text(f"open({str(starts)!r}, 'a').write('x')\nraise SystemExit(3)\n")
    monkeypatch.setattr(arrow_sqlite, "_CHILD", broken)
    url = _fill(tmp_path / "db.sqlite")
    backend = DatabaseBackend(url, row_cap=CAP, arrow=True)
    try:
        for i in range(5):
            out = await backend.run(f"r{i}", "SELECT count(*) AS n FROM typed")
            assert out.dataframe["n"].tolist() == [ROWS]
    finally:
        backend.dispose()
    assert starts.read_text() == "xxx"
