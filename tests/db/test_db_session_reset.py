"""D5: every statement leaves the pooled session as it found it.

A view can call a function with a session-wide effect (PostgreSQL ``pg_try_advisory_lock``,
MariaDB ``GET_LOCK``, a stored function that sets a user variable). The read's rollback does
not undo those: the backend resets the session with the engine's own command after each call
(``DISCARD ALL``, ``COM_RESET_CONNECTION``). Locks are counted from another connection.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from dbtest_support import Scratch, db  # noqa: F401

from pi_notebook.sql.backend import DatabaseBackend, QueryError
from pi_notebook.sql.backend.arrow import ARROW_MIN_CAP, arrow_available


@pytest.fixture
def pg(pg_url: str) -> Iterator[sa.Engine]:
    engine = sa.create_engine(pg_url, isolation_level="AUTOCOMMIT")
    try:
        yield engine
    finally:
        engine.dispose()


@pytest.fixture
def maria(mysql_url: str) -> Iterator[sa.Engine]:
    engine = sa.create_engine(mysql_url, isolation_level="AUTOCOMMIT")
    try:
        yield engine
    finally:
        engine.dispose()


def _pg_advisory_locks(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(
            conn.exec_driver_sql(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = "
                "(SELECT oid FROM pg_database WHERE datname = current_database())"
            ).scalar_one()
        )


@pytest.mark.postgres
@pytest.mark.parametrize("row_cap", [100, ARROW_MIN_CAP], ids=["cursor", "arrow"])
async def test_d5_postgres_a_lock_taken_by_a_view_is_released_after_the_read(
    pg: sa.Engine, pg_url: str, row_cap: int
) -> None:
    if row_cap >= ARROW_MIN_CAP and not arrow_available("postgresql"):
        pytest.skip("no ADBC driver for PostgreSQL")
    view = f"v_lock_{uuid.uuid4().hex[:8]}"
    with pg.connect() as conn:
        conn.exec_driver_sql(f"CREATE VIEW {view} AS SELECT pg_try_advisory_lock(4242) AS got")
    backend = DatabaseBackend(pg_url, row_cap=row_cap)
    try:
        out = await backend.run("r1", f"SELECT got FROM {view}")
        assert out.dataframe["got"].tolist() == [True]  # the view did take the lock
        assert _pg_advisory_locks(pg) == 0
        # The kept connection still serves reads, prepared statements included.
        for i in range(8):
            again = await backend.run(f"r{i + 2}", f"SELECT got FROM {view}")
            assert again.dataframe["got"].tolist() == [True]
        assert _pg_advisory_locks(pg) == 0
    finally:
        backend.dispose()
        with pg.connect() as conn:
            conn.exec_driver_sql(f"DROP VIEW {view}")


@pytest.mark.postgres
async def test_d5_postgres_a_session_setting_of_an_approved_write_does_not_outlive_it(
    pg: sa.Engine, pg_url: str
) -> None:
    """A write's transaction commits: a setting made with ``set_config(..., false)`` in it
    would stay on the pooled session without the reset."""
    from pi_notebook.approvals.capabilities import CapabilityStore
    from pi_notebook.sql.backend.backend import query_args_hash

    table = f"t_{uuid.uuid4().hex[:8]}"
    with pg.connect() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {table} (a text)")
    store = CapabilityStore()
    backend = DatabaseBackend(pg_url, approvals=store)
    sql = f"INSERT INTO {table} SELECT set_config('application_name', 'leaked', false)"
    try:
        store.grant("w1", query_args_hash(sql, backend.dialect))
        await backend.run("w1", sql)
        out = await backend.run("r1", "SELECT current_setting('application_name') AS name")
        assert out.dataframe["name"].tolist() != ["leaked"]
    finally:
        backend.dispose()
        with pg.connect() as conn:
            conn.exec_driver_sql(f"DROP TABLE {table}")


@pytest.mark.mysql
async def test_d5_mariadb_a_lock_and_a_variable_set_by_a_view_do_not_outlive_the_read(
    maria: sa.Engine, mysql_url: str
) -> None:
    tag = uuid.uuid4().hex[:8]
    lock, view, fn = f"pi_lock_{tag}", f"v_lock_{tag}", f"f_leak_{tag}"
    with maria.connect() as conn:
        conn.exec_driver_sql(
            f"CREATE FUNCTION {fn}() RETURNS INT NOT DETERMINISTIC BEGIN "
            f"SET @pi_leak = 'leaked'; RETURN GET_LOCK('{lock}', 0); END"
        )
        conn.exec_driver_sql(f"CREATE VIEW {view} AS SELECT {fn}() AS got")
    backend = DatabaseBackend(mysql_url)
    try:
        out = await backend.run("r1", f"SELECT got FROM {view}")
        assert out.dataframe["got"].tolist() == [1]  # the view did take the lock
        with maria.connect() as conn:
            assert conn.exec_driver_sql(f"SELECT IS_USED_LOCK('{lock}')").scalar() is None
        leaked = await backend.run("r2", "SELECT @pi_leak AS v")
        assert leaked.dataframe["v"].tolist() == [None]
        utf8 = await backend.run("r3", "SELECT 'é✓' AS s")  # the session's charset is kept
        assert utf8.dataframe["s"].tolist() == ["é✓"]
    finally:
        backend.dispose()
        with maria.connect() as conn:
            conn.exec_driver_sql(f"DROP VIEW {view}")
            conn.exec_driver_sql(f"DROP FUNCTION {fn}")


async def test_d5_a_temporary_table_of_an_approved_write_does_not_outlive_the_call(
    db: Scratch,  # noqa: F811
) -> None:
    from pi_notebook.approvals.capabilities import CapabilityStore
    from pi_notebook.sql.backend.backend import query_args_hash

    store = CapabilityStore()
    backend = DatabaseBackend(db.url, approvals=store)
    table = f"tmp_{uuid.uuid4().hex[:8]}"
    create = f"CREATE TEMPORARY TABLE {table} (a INTEGER)"
    try:
        store.grant("w1", query_args_hash(create, backend.dialect))
        await backend.run("w1", create)
        with pytest.raises(QueryError, match=table):
            await backend.run("r1", f"SELECT a FROM {table}")
    finally:
        backend.dispose()
