"""Shared fixtures: database servers for the tests that need them.

PostgreSQL and MariaDB come from ``PI_NOTEBOOK_PG_URL`` / ``PI_NOTEBOOK_MYSQL_URL``
(defaults: the servers on this machine). Each test session creates its own database
on each server and drops it afterwards. A missing server skips its tests with the
reason, unless ``PI_NOTEBOOK_REQUIRE_SERVICES=1`` (set by ``.ci/run``), which turns the
skip into a failure.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

PG_DEFAULT = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
MYSQL_DEFAULT = "mysql+pymysql://root@127.0.0.1:3306/test"


def _unavailable(what: str, exc: BaseException) -> None:
    reason = f"{what} is not reachable ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})"
    if os.environ.get("PI_NOTEBOOK_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{reason}; PI_NOTEBOOK_REQUIRE_SERVICES=1 requires it", pytrace=False)
    pytest.skip(reason)


def _fresh_database(
    what: str, env: str, default: str, quote: str, drop_suffix: str = ""
) -> Iterator[str]:
    """Create a uniquely named database on a server, yield its URL, drop it afterwards."""
    base = make_url(os.environ.get(env, default))
    name = f"pi_nb_test_{uuid.uuid4().hex[:10]}"
    quoted = f"{quote}{name}{quote}"
    try:
        admin = sa.create_engine(base, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(sa.text(f"CREATE DATABASE {quoted}"))
    except Exception as exc:  # any failure means: server not usable
        _unavailable(what, exc)
        raise
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS {quoted}{drop_suffix}"))
        admin.dispose()


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """URL of a fresh PostgreSQL database, dropped at the end of the session."""
    yield from _fresh_database("PostgreSQL", "PI_NOTEBOOK_PG_URL", PG_DEFAULT, '"', " WITH (FORCE)")


@pytest.fixture(scope="session")
def mysql_url() -> Iterator[str]:
    """URL of a fresh MariaDB/MySQL database, dropped at the end of the session."""
    yield from _fresh_database("MariaDB/MySQL", "PI_NOTEBOOK_MYSQL_URL", MYSQL_DEFAULT, "`")


@pytest.fixture(autouse=True)
def _isolated_data_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keep every test's default files (audit log, sample database) out of the real home."""
    data = tmp_path_factory.mktemp("pi_data")
    monkeypatch.setenv("PI_NOTEBOOK_DATA_DIR", str(data))
    monkeypatch.delenv("PI_NOTEBOOK_AUDIT_URL", raising=False)
    monkeypatch.delenv("PI_NOTEBOOK_DATABASE_URL", raising=False)
