"""``pi_notebook.database.engines()``: one row per engine, from the seam's own facts."""

from __future__ import annotations

import pytest

import pi_notebook.database
from pi_notebook import create_agent_session
from pi_notebook.database import database_extension
from pi_notebook.sql import classify
from pi_notebook.sql import engines as seam
from pi_notebook.sql.engines import ENGINES, DialectOnly, EngineInfo, create_backend, engine_for_url
from pi_notebook.testing import ScriptedModel, text

FUTURE = EngineInfo(
    engine="oracle",
    dialect="oracle",
    url_scheme="oracle://USER@HOST/DB",
    schemes=("oracle",),
    read_only_backstop="a read-only standby, not yet set",
    bounds="none yet",
    cancel=None,
    write_preview="none yet",
    connects=False,
    tested_against="dialect only",
)
"""A ``dialect only`` engine: its SQL classified, its URL refused (none of the shipped engines is
one any more; the next engine to land starts as one)."""
SERVER_URLS = {
    "clickhouse server": "clickhousedb://analyst@localhost:8123/sales",
    "trino": "trino://analyst@localhost:8080/hive/sales",
}
"""Engines the tool connects to whose client path is tested against a scripted HTTP server
only: listed as ``dialect only``, and the row says so in words."""


def test_engines_lists_each_engine_with_its_walls() -> None:
    frame = pi_notebook.database.engines()
    assert list(frame.columns) == [
        "engine",
        "dialect",
        "url_scheme",
        "read_only_backstop",
        "cancel",
        "arrow",
        "estimate",
        "tested_against",
    ]
    assert list(frame["engine"]) == [
        "sqlite",
        "postgresql",
        "mysql",
        "duckdb",
        "clickhouse",
        "clickhouse server",
        "trino",
        "spark",
        "snowflake",
        "bigquery",
    ]
    assert set(frame["tested_against"]) <= {"live", "emulator", "dialect only"}
    assert frame["arrow"].dtype == bool and frame["read_only_backstop"].str.len().min() > 20
    clickhouse = frame.set_index("engine").loc["clickhouse"]
    assert (
        clickhouse["dialect"] == "clickhouse" and "readonly=1" in clickhouse["read_only_backstop"]
    )
    assert clickhouse["url_scheme"].startswith("chdb:///") and "KILL QUERY" in clickhouse["cancel"]
    assert not clickhouse["arrow"]  # chDB's native DataFrame stream, not its Arrow output
    assert "EXPLAIN ESTIMATE" in clickhouse["estimate"]
    estimates = frame.set_index("engine")["estimate"]
    assert (
        "EXPLAIN (FORMAT JSON)" in estimates["postgresql"]
        and "Plan Width" in estimates["postgresql"]
    )
    assert "Estimated Cardinality" in estimates["duckdb"]
    assert estimates[["sqlite", "mysql"]].isna().all()  # no estimate: reads run as before
    spark = frame.set_index("engine").loc["spark"]
    assert spark["url_scheme"] == "sc://HOST:15002" and spark["arrow"]
    assert spark["read_only_backstop"].startswith("none: Spark has no read-only mode")
    assert "interruptTag" in spark["cancel"] and "EXPLAIN COST" in spark["estimate"]


def test_every_shipped_engine_connects_and_says_what_its_tests_run_it_on() -> None:
    frame = pi_notebook.database.engines().set_index("engine")
    assert all(info.connects for info in ENGINES)
    tested = frame["tested_against"]
    assert set(tested[["snowflake", "bigquery"]]) == {"emulator"}
    assert set(tested[list(SERVER_URLS)]) == {"dialect only"}  # scripted servers, said in words
    assert set(tested.drop(index=[*SERVER_URLS, "snowflake", "bigquery"])) == {"live"}


def test_snowflake_runs_on_its_client_and_says_what_only_the_engine_guarantees() -> None:
    row = pi_notebook.database.engines().set_index("engine").loc["snowflake"]
    assert row["tested_against"] == "emulator" and row["arrow"]
    assert "SELECT grants" in row["read_only_backstop"]
    assert "STATEMENT_TIMEOUT_IN_SECONDS" in row["read_only_backstop"]
    assert "cannot show" in row["read_only_backstop"] and "abort_query" in row["cancel"]
    assert "EXPLAIN USING JSON" in row["estimate"]


def test_bigquery_runs_on_its_client_and_says_what_only_the_project_guarantees() -> None:
    row = pi_notebook.database.engines().set_index("engine").loc["bigquery"]
    assert row["tested_against"] == "emulator" and row["arrow"]
    backstop = row["read_only_backstop"]
    assert "IAM roles" in backstop and "maximum_bytes_billed" in backstop
    assert "cannot show" in backstop and "jobs.cancel" in row["cancel"]
    assert "dry run" in row["estimate"] and "total_bytes_processed" in row["estimate"]


def test_server_engines_connect_but_say_their_client_path_met_no_live_server() -> None:
    frame = pi_notebook.database.engines().set_index("engine")
    servers = frame.loc[list(SERVER_URLS)]
    assert set(servers["tested_against"]) == {"dialect only"}
    assert all("never against a live server" in text for text in servers["read_only_backstop"])
    assert list(servers["dialect"]) == ["clickhouse", "trino"]
    assert servers["estimate"].notna().all() and servers["cancel"].notna().all()
    clickhouse, trino = servers["read_only_backstop"]
    assert "readonly=1" in clickhouse and "access-control.name=read-only" in trino
    assert "classifier is the only wall" in trino
    assert "KILL QUERY" in servers["cancel"]["clickhouse server"]
    assert not servers["arrow"].any()  # ClickHouse: Native, whose DateTime stays a DateTime
    for url in SERVER_URLS.values():
        info = engine_for_url(url)
        assert info.connects and info.dialect_only() is None


def test_a_dialect_only_url_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(seam, "ENGINES", (*ENGINES, FUTURE))
    assert engine_for_url("oracle://u@h/db") is FUTURE
    with pytest.raises(DialectOnly) as refused:
        create_backend("oracle://u@h/db")
    message = str(refused.value)
    assert "\n" not in message and "'dialect only'" in message and "oracle" in message


def test_database_extension_refuses_a_dialect_only_url_when_the_session_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As any URL the tool cannot run: the extension's failure is the session's diagnostic,
    in one line, and no query tool is registered."""
    monkeypatch.setattr(seam, "ENGINES", (*ENGINES, FUTURE))
    ext = database_extension(url="oracle://u@h/db")
    session = create_agent_session(model=ScriptedModel([text("done")]), extensions=[ext])
    messages = [d.message for d in session.diagnostics]
    assert len(messages) == 1 and "\n" not in messages[0]
    assert "oracle is 'dialect only' so far" in messages[0]
    assert ext.backend is None
    assert "query_database" not in [tool.name for tool in session.get_all_tools()]


def test_an_unknown_url_is_still_refused_naming_only_the_urls_the_tool_runs() -> None:
    with pytest.raises(ValueError, match="Unsupported database 'oracle'") as refused:
        engine_for_url("oracle://u@h/db")
    assert "chdb:///PATH" in str(refused.value) and "snowflake://" in str(refused.value)
    assert "sc://HOST:15002" in str(refused.value) and "bigquery://" in str(refused.value)


def test_every_listed_engine_is_classified_and_dispatched() -> None:
    examples = {
        "sqlite": "sqlite:///x.db",
        "postgresql": "postgresql+psycopg://u@h/db",
        "mysql": "mysql+pymysql://u@h/db",
        "duckdb": "duckdb:///x.duckdb",
        "clickhouse": "chdb:///data/ch",
        "snowflake": "snowflake://u@acct/db/sales",
        "spark": "sc://localhost:15002",
        "bigquery": "bigquery://my-project/sales",
        **SERVER_URLS,
    }
    for info in ENGINES:
        assert classify("SELECT 1", info.dialect).kind == "read"
        assert classify("DELETE FROM t", info.dialect).kind == "write"
        assert engine_for_url(examples[info.engine]) is info


def test_the_readme_and_deployment_tables_are_the_engines_own_facts() -> None:
    """The engine tables of the README and docs/deployment.md are what ``engines_markdown``
    renders from the seam now (``scripts/engine_tables.py`` rewrites them)."""
    import importlib.util
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "scripts" / "engine_tables.py"
    spec = importlib.util.spec_from_file_location("engine_tables", script)
    assert spec is not None and spec.loader is not None
    tables = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tables)
    for name, (path, _columns) in tables.TABLES.items():
        text = path.read_text()
        assert tables.rendered(name, text) == text, f"{path.name} is stale: run {script.name}"
        assert "| clickhouse |" in text and "| live |" in text
