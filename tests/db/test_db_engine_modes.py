"""Engine-specific walls of the read-only modes (D5), beyond a plain INSERT."""

from __future__ import annotations

import pytest

from pi_notebook.sql.backend import DatabaseBackend, QueryError


@pytest.mark.parametrize(
    "sql",
    [
        "PRAGMA query_only = 0",
        "ATTACH DATABASE ':memory:' AS other",
        "CREATE TEMP TABLE tmp_x (a INTEGER)",
        "PRAGMA journal_mode = WAL",
    ],
)
async def test_d5_sqlite_authorizer_denies_escapes_in_read_mode(sql: str, tmp_path: object) -> None:
    backend = DatabaseBackend("sqlite://")
    try:
        with pytest.raises(QueryError, match="not authorized"):
            await backend._run_as("read", sql)  # pyright: ignore[reportPrivateUsage]
    finally:
        backend.dispose()


@pytest.mark.parametrize("sql", ["ATTACH DATABASE ':memory:' AS other", "PRAGMA query_only = 0"])
async def test_d5_sqlite_authorizer_denies_attach_and_pragma_writes_even_when_approved(
    sql: str,
) -> None:
    backend = DatabaseBackend("sqlite://")
    try:
        with pytest.raises(QueryError, match="not authorized"):
            await backend._run_as("write", sql)  # pyright: ignore[reportPrivateUsage]
    finally:
        backend.dispose()


async def test_d5_duckdb_external_access_is_off_and_locked(tmp_path: object) -> None:
    backend = DatabaseBackend(f"duckdb:///{tmp_path}/x.duckdb")
    try:
        with pytest.raises(QueryError, match="disabled by configuration"):
            await backend._run_as("read", "SELECT * FROM read_csv('/etc/passwd')")  # pyright: ignore[reportPrivateUsage]
        with pytest.raises(QueryError, match="locked"):
            await backend._run_as("write", "SET enable_external_access = true")  # pyright: ignore[reportPrivateUsage]
    finally:
        backend.dispose()


def test_d5_duckdb_replacement_scans_of_python_variables_are_off(tmp_path: object) -> None:
    """DuckDB can read a pandas variable by name (`FROM df`) from the calling frame; the
    backend turns that off at open, and the lock keeps SQL from turning it back on."""
    import sqlalchemy as sa

    from pi_notebook.sql.backend import create_backend_engine

    engine = create_backend_engine(f"duckdb:///{tmp_path}/y.duckdb")
    try:
        with engine.connect() as conn:
            value = conn.exec_driver_sql(
                "SELECT current_setting('python_enable_replacements')"
            ).scalar()
            assert value is False
            with pytest.raises(sa.exc.DBAPIError, match="Cannot change configuration"):
                conn.exec_driver_sql("SET python_enable_replacements = true")
    finally:
        engine.dispose()


async def test_d5_sqlite_caps_the_size_of_one_value() -> None:
    backend = DatabaseBackend("sqlite://")
    try:
        with pytest.raises(QueryError, match="too big"):
            # 200 MB built in one uninterruptible call would otherwise land in the kernel's memory.
            await backend._run_as("read", "SELECT length(zeroblob(200000000))")  # pyright: ignore[reportPrivateUsage]
        outcome = await backend._run_as("read", "SELECT length(zeroblob(1000)) AS n")  # pyright: ignore[reportPrivateUsage]
        assert int(outcome.dataframe["n"].iloc[0]) == 1000
    finally:
        backend.dispose()
