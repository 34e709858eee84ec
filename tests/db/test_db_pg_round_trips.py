"""D5: a capped PostgreSQL read is one round trip, with its read-only transaction and its
statement timeout intact, and then the session reset (``DISCARD ALL``, its own round trip).

``BEGIN READ ONLY`` and ``SET LOCAL statement_timeout`` go in front of the cursor's
``DECLARE`` and first ``FETCH``, and a read whose first batch is all it takes (the row cap
plus one) ends with ``ROLLBACK`` in the same message. A read that counts every row keeps its
transaction open across batches and is rolled back after.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from pi_notebook.sql.backend import DatabaseBackend, QueryError, QueryTimeout
from pi_notebook.sql.backend.engines import create_backend_engine
from pi_notebook.sql.backend.fetch import RunSettings, execute_and_fetch
from pi_notebook.sql.backend.readonly import begin, finish

pytestmark = pytest.mark.postgres


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement text a psycopg cursor sends (one entry per round trip)."""
    texts: list[str] = []
    original = psycopg.Cursor.execute

    def spy(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        texts.append(str(query))
        return original(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", spy)
    return texts


@pytest.fixture
def backend(pg_url: str) -> Iterator[DatabaseBackend]:
    b = DatabaseBackend(pg_url, row_cap=100)
    try:
        yield b
    finally:
        b.dispose()


def _idle(b: DatabaseBackend) -> bool:
    """Whether the connection the backend keeps between runs has no transaction open."""
    raw = b._slot._raw  # pyright: ignore[reportPrivateUsage]
    assert raw is not None
    return raw.driver_connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


async def test_d5_a_capped_read_is_one_round_trip_then_the_session_reset(
    backend: DatabaseBackend, sent: list[str]
) -> None:
    await backend.run("warm", "SELECT 1")
    sent.clear()
    out = await backend.run("r1", "SELECT g FROM generate_series(1, 500) AS g")
    assert out.dataframe["g"].tolist()[:3] == [1, 2, 3] and out.truncated
    assert len(sent) == 2 and sent[1] == "DISCARD ALL"
    assert sent[0].startswith("BEGIN READ ONLY; SET LOCAL statement_timeout")
    assert sent[0].endswith("; ROLLBACK")
    assert "DECLARE" in sent[0] and "FETCH FORWARD 101" in sent[0]
    assert _idle(backend)


async def test_d5_a_read_counting_every_row_keeps_its_transaction_across_batches(
    backend: DatabaseBackend, sent: list[str]
) -> None:
    await backend.run("warm", "SELECT 1")
    sent.clear()
    out = await backend.run("r1", "SELECT g FROM generate_series(1, 25000) AS g", count_rows=True)
    assert out.row_count == 25_000 and len(out.dataframe) == 100
    assert sent[0].startswith("BEGIN READ ONLY") and not sent[0].endswith("ROLLBACK")
    assert any(text.startswith("FETCH FORWARD") for text in sent[1:])  # later batches
    assert _idle(backend)


async def test_d5_the_one_message_read_stays_read_only(backend: DatabaseBackend) -> None:
    """Past the classifier (``_run_as``), the server's read-only transaction refuses a write
    on both read paths: the cursor's (``SELECT nextval``) and the streamed one (``INSERT``)."""
    engine = sa.create_engine(backend.url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS rt_probe (a int)")
        conn.exec_driver_sql("CREATE SEQUENCE IF NOT EXISTS rt_seq")
    try:
        for sql in ("SELECT nextval('rt_seq') AS n", "INSERT INTO rt_probe VALUES (1)"):
            with pytest.raises(QueryError, match=r"(?i)read-only"):
                await backend._run_as("read", sql)  # pyright: ignore[reportPrivateUsage]
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM rt_probe").scalar() == 0
            assert conn.exec_driver_sql("SELECT last_value FROM rt_seq").scalar() == 1
            assert conn.exec_driver_sql("SELECT is_called FROM rt_seq").scalar() is False
        out = await backend.run("r1", "SELECT count(*) AS n FROM rt_probe")
        assert out.dataframe["n"].tolist() == [0]
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql("DROP TABLE IF EXISTS rt_probe")
            conn.exec_driver_sql("DROP SEQUENCE IF EXISTS rt_seq")
        engine.dispose()


def test_d5_the_statement_timeout_applies_inside_the_one_message(pg_url: str) -> None:
    """The server's own timeout (not the backend's watchdog) stops the read."""
    engine = create_backend_engine(pg_url)
    settings = RunSettings(row_cap=10, count_limit=11, statement_timeout_s=0.3, progress_every=10)
    raw = engine.raw_connection()
    try:
        begin(raw, "postgresql", "read", timeout_s=0.3, mariadb=False)
        with pytest.raises(psycopg.errors.QueryCanceled, match="statement timeout"):
            execute_and_fetch(raw, "postgresql", "read", "SELECT pg_sleep(3)", settings, None)
        finish(raw, "postgresql", "read", commit=False)
        assert raw.driver_connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE  # pyright: ignore[reportOptionalMemberAccess]
    finally:
        raw.close()
        engine.dispose()


async def test_d5_a_timed_out_read_leaves_the_connection_usable(pg_url: str) -> None:
    b = DatabaseBackend(pg_url, statement_timeout_s=0.3)
    try:
        with pytest.raises(QueryTimeout):
            await b.run("slow", "SELECT count(*) FROM generate_series(1, 500000000)")
        assert (await b.run("r1", "SELECT 2 AS two")).dataframe["two"].tolist() == [2]
    finally:
        b.dispose()
