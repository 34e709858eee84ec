"""One scrubber for URLs and texts, and no password from a URL anywhere the
model, the audit or the notebook shows (a query-string ``?password=`` included)."""

from __future__ import annotations

import socket
from pathlib import Path

import sqlalchemy as sa

from pi_notebook import create_agent_session
from pi_notebook.database import database_extension
from pi_notebook.secrets import safe_url, scrub
from pi_notebook.testing import ScriptedModel, text, tool_call

SECRET = "hunter2-Zq9"


def test_safe_url_masks_the_password_and_query_string_credentials() -> None:
    url = f"postgresql+psycopg://app:{SECRET}@db.example:5432/shop?sslmode=require&password={SECRET}&token=t0k3n"
    shown = safe_url(url)
    assert SECRET not in shown and "t0k3n" not in shown
    assert shown.startswith("postgresql+psycopg://app:***@db.example:5432/shop?")
    assert "sslmode=require" in shown and "password=***" in shown and "token=***" in shown
    assert safe_url(sa.make_url(url)) == shown
    assert safe_url(f"not a url {SECRET}") == "<invalid URL>"  # never echoed: it may be a secret


def test_scrub_removes_the_urls_secrets_in_every_form_and_any_password_pair() -> None:
    odd = "p@ss word/9"  # as typed, quoted in the URL, and as a driver may echo it
    url = sa.URL.create("mysql+pymysql", "app", odd, "db", database="shop", query={"token": SECRET})
    message = (
        f"Access denied for app (using p%40ss%20word%2F9, p%40ss+word%2F9 and {odd}); token {SECRET}; "
        "dsn postgresql://u:other@h/x password='elsewhere' pwd=x1"
    )
    cleaned = scrub(message, url)
    for leak in (odd, "p%40ss%20word%2F9", "p%40ss+word%2F9", SECRET, "other@", "elsewhere", "x1"):
        assert leak not in cleaned
    assert "postgresql://u:***@h/x" in cleaned


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_a_query_string_password_reaches_no_model_request_error_or_audit(
    tmp_path: Path,
) -> None:
    url = (
        f"postgresql+psycopg://app@127.0.0.1:{_closed_port()}/shop"
        f"?password={SECRET}&connect_timeout=2"
    )
    model = ScriptedModel([[tool_call("query_database", {"sql": "SELECT 1"})], text("done")])
    audit_url = f"sqlite:///{tmp_path / 'audit.sqlite'}"
    ext = database_extension(url=url, schema_budget_chars=0)
    session = create_agent_session(model=model, extensions=[ext], audit=audit_url)
    try:
        await session.prompt("go")
    finally:
        await session.close()
    [result] = [m for m in session.messages if m.role == "toolResult"]
    assert result.is_error and "Could not connect" in result.content[0].text
    seen = [call.payload_text for call in model.calls]
    assert seen and all(SECRET not in p for p in seen)
    assert "password=***" in model.calls[0].system_prompt  # the URL is named, masked
    assert SECRET not in result.content[0].text and SECRET not in str(result.details)
    engine = sa.create_engine(audit_url)
    with engine.connect() as conn:
        stored = " ".join(
            str(r) for r in conn.exec_driver_sql("SELECT payload FROM pi_audit_records")
        )
    engine.dispose()
    assert stored and SECRET not in stored
