# ruff: noqa: F811 - the engine fixture ``db`` is imported from dbtest_support
"""Bad databases and bad SQL give short errors the model can act on, with no credential in them."""

from __future__ import annotations

import pytest
from dbtest_support import SECRET, FakeAudit, Scratch, db, engine_url_with_password  # noqa: F401

from pi_notebook.sql.backend import DatabaseBackend, QueryError, scrub


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql+psycopg://app:{SECRET}@127.0.0.1:1/shop",
        f"mysql+pymysql://app:{SECRET}@127.0.0.1:1/shop",
    ],
    ids=["postgres", "mysql"],
)
async def test_down_database_gives_short_error_without_password(url: str) -> None:
    audit = FakeAudit()
    backend = DatabaseBackend(url, audit=audit)
    try:
        with pytest.raises(QueryError) as info:
            await backend.run("c1", "SELECT 1")
        message = str(info.value)
        assert message.startswith("Could not connect to ") and "app:***@127.0.0.1:1/shop" in message
        assert SECRET not in message and len(message) < 420
        assert info.value.__cause__ is None and info.value.__suppress_context__
        assert SECRET not in repr(audit.records)
        assert audit.kinds()[-1] == "query_error"
    finally:
        backend.dispose()


@pytest.mark.mysql
async def test_wrong_password_gives_short_error_without_password(mysql_url: str) -> None:
    backend = DatabaseBackend(engine_url_with_password(mysql_url))
    try:
        with pytest.raises(QueryError, match="Access denied") as info:
            await backend.run("c1", "SELECT 1")
        assert SECRET not in str(info.value)
    finally:
        backend.dispose()


async def test_missing_table_gives_short_error(db: Scratch) -> None:
    audit = FakeAudit()
    backend = DatabaseBackend(db.url, audit=audit)
    try:
        with pytest.raises(QueryError) as info:
            await backend.run("c1", "SELECT * FROM no_such_table")
        message = str(info.value)
        assert "no_such_table" in message and len(message) < 400 and "\n" not in message
        assert "Background on this error" not in message
        assert audit.kinds() == ["final_args", "query_error"]
    finally:
        backend.dispose()


@pytest.mark.postgres
async def test_secret_in_url_never_reaches_content_or_details(pg_url: str) -> None:
    """The PostgreSQL test server trusts local users, so a URL with a password still connects."""
    backend = DatabaseBackend(engine_url_with_password(pg_url))
    try:
        out = await backend.run("c1", "SELECT current_user AS u")
        assert SECRET not in out.preview and SECRET not in repr(out.details())
        with pytest.raises(QueryError) as info:
            await backend.run("c2", "SELECT * FROM missing_table")
        assert SECRET not in str(info.value)
    finally:
        backend.dispose()


def test_scrub_removes_url_and_keyword_credentials() -> None:
    text = f"failed: mysql://bob:{SECRET}@db/x password={SECRET} host=db"
    cleaned = scrub(text)
    assert SECRET not in cleaned and "bob:***@db" in cleaned and "password=***" in cleaned


@pytest.mark.parametrize("sql", ["   ", "SELECT 1; DELETE FROM t", "SELEC nonsense ((("])
async def test_bad_sql_is_refused_before_the_database(sql: str) -> None:
    audit = FakeAudit()
    backend = DatabaseBackend("sqlite://", audit=audit)
    try:
        with pytest.raises(QueryError, match=r"^Refused: "):
            await backend.run("c1", sql)
        assert audit.kinds() == ["query_refused"]
    finally:
        backend.dispose()
