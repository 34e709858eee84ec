"""Who is at the keyboard: ``current_user()`` and the audit's ``user`` column.

The hub's name wins over the project's variable, which wins over the OS login; unusable
values are skipped rather than stored as something other than who acted.
"""

from __future__ import annotations

import getpass
from pathlib import Path

import pytest

from pi_notebook import create_agent_session
from pi_notebook.audit import AuditLog, frames
from pi_notebook.database import database_extension
from pi_notebook.identity import current_user
from pi_notebook.testing import ScriptedModel, text, tool_call


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    monkeypatch.delenv("PI_NOTEBOOK_USER", raising=False)
    return monkeypatch


def test_hub_user_wins_over_project_variable(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("PI_NOTEBOOK_USER", "ci-bot")
    clean_env.setenv("JUPYTERHUB_USER", "ana")
    assert current_user() == "ana"


def test_project_variable_when_no_hub(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("PI_NOTEBOOK_USER", "bo")
    assert current_user() == "bo"


def test_os_login_last(clean_env: pytest.MonkeyPatch) -> None:
    assert current_user() == getpass.getuser()


@pytest.mark.parametrize("bad", ["", "   ", "x" * 256, "ana\nbo", "a\tb"])
def test_unusable_names_are_skipped(clean_env: pytest.MonkeyPatch, bad: str) -> None:
    clean_env.setenv("JUPYTERHUB_USER", bad)
    clean_env.setenv("PI_NOTEBOOK_USER", "bo")
    assert current_user() == "bo"


def test_no_login_name_is_unknown(
    clean_env: pytest.MonkeyPatch,
) -> None:
    def no_login() -> str:
        raise OSError("no login name")

    clean_env.setattr(getpass, "getuser", no_login)
    assert current_user() == "unknown"


async def test_every_record_of_a_session_carries_the_user(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    clean_env.setenv("JUPYTERHUB_USER", "ana")
    log = AuditLog(f"sqlite:///{tmp_path}/audit.sqlite")
    session = create_agent_session(
        model=ScriptedModel([tool_call("query_database", {"sql": "SELECT 1 AS one"}), text("ok")]),
        extensions=[database_extension(url=f"sqlite:///{tmp_path}/data.sqlite")],
        audit=log,
    )
    try:
        await session.prompt("go")
    finally:
        await session.close()
    log.flush()
    frame = log.to_dataframe()
    log.close()
    assert len(frame) >= 3
    assert set(frame["user"]) == {"ana"}


def test_shared_store_filters_by_user_in_sql(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Two people's sessions in one store; one person's records are selected by the store."""
    import sqlalchemy as sa

    url = f"sqlite:///{tmp_path}/shared.sqlite"
    clean_env.setenv("PI_NOTEBOOK_USER", "ana")
    ana = AuditLog(url)
    clean_env.setenv("PI_NOTEBOOK_USER", "bo")
    bo = AuditLog(url)
    for i in range(3):
        ana.record("note", {"i": i})
    bo.record("note", {"i": 99})
    ana.close()
    bo.flush()
    statements: list[str] = []
    fetch = frames._fetch

    def seen(engine: sa.Engine, query: sa.Select) -> list:  # type: ignore[type-arg]
        statements.append(str(query))
        return fetch(engine, query)

    clean_env.setattr(frames, "_fetch", seen)
    frame = bo.to_dataframe(user="ana")
    bo.close()
    assert list(frame["user"]) == ["ana"] * 3
    assert [p["i"] for p in frame["payload"]] == [0, 1, 2]
    assert frame["session_id"].nunique() == 1 and frame["session_id"][0] == ana.session_id
    assert len(statements) == 1 and 'WHERE pi_audit_records."user" =' in statements[0]
