"""Magics that keep their word, the audit log across %config (15.3), and no
secret in the status line or through inspect_variable (15.11)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from pi_notebook.notebook import current
from pi_notebook.testing import ScriptedModel, text, tool_call


def _other_db(tmp_path: Path) -> str:
    db = tmp_path / "other.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (x INTEGER)")
        conn.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(10)])
    return f"sqlite:///{db}"


async def _read(shell: InteractiveShell, sql: str):
    shell.run_cell_magic("pi", "", sql)
    run = current().last_run
    assert run is not None
    await run.wait(timeout=30)
    return run


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("mysql://root@127.0.0.1:3306/test", "no driver for 'mysql'.*MySQLdb is not installed"),
        ("postgresql+psycopg://u:hunter2@127.0.0.1:1/db", "cannot connect to .*:1/db"),
    ],
)
async def test_connect_that_fails_keeps_the_previous_connection(
    loaded: InteractiveShell, url: str, match: str
) -> None:
    state = current()
    session, database_url = state.session, state.database_url
    with pytest.raises(UsageError, match=match) as info:
        loaded.run_line_magic("pi_connect", url)
    message = str(info.value)
    assert "hunter2" not in message and "\n" not in message
    assert "still connected to sqlite:///" in message
    assert state.session is session and state.database_url == database_url
    assert not state.stale and state.config.database_url != url
    assert "query_database" in session.active_tool_names  # the tool did not vanish
    run = await _read(loaded, "SELECT 1 AS one")
    assert run.state.status == "done"


async def test_extension_diagnostics_keep_the_previous_connection(
    loaded: InteractiveShell, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import pi_notebook.notebook.state as state_module

    def broken(**options: object):
        def factory(pi: object) -> None:
            raise RuntimeError("engine refused the URL (password=hunter2)")

        return factory

    state = current()
    session = state.session
    monkeypatch.setattr(state_module, "database_extension", lambda url, **kw: broken())
    with pytest.raises(UsageError, match="database extension did not load") as info:
        loaded.run_line_magic("pi_connect", _other_db(tmp_path))
    assert "hunter2" not in str(info.value)
    assert state.session is session and "query_database" in session.tool_registry


async def test_the_chosen_active_set_survives_reconfiguration(
    loaded: InteractiveShell, tmp_path: Path
) -> None:
    loaded.run_line_magic("pi_tools", "--deactivate read")
    loaded.run_line_magic("pi_connect", _other_db(tmp_path))
    assert "read" not in current().session.active_tool_names
    loaded.run_line_magic("pi_model", "offline")
    assert "read" not in current().session.active_tool_names
    loaded.run_line_magic("config", "PiNotebook.row_cap = 5")
    run = await _read(loaded, "SELECT x FROM t")  # %%pi applies the %config change
    assert "read" not in run.session.active_tool_names
    ext = tmp_path / "noop_ext.py"
    ext.write_text("def register(pi):\n    pass\n")
    loaded.run_line_magic("pi_extension", str(ext))
    assert "read" not in current().session.active_tool_names
    frame = loaded.run_line_magic("pi_tools", "--activate read")
    assert frame.set_index("name").loc["read", "active"]
    loaded.run_line_magic("pi_model", "offline")
    assert "read" in current().session.active_tool_names


async def test_row_cap_and_statement_timeout_are_settable_with_config(
    loaded: InteractiveShell, tmp_path: Path
) -> None:
    loaded.run_line_magic("pi_connect", _other_db(tmp_path))
    loaded.run_line_magic("config", "PiNotebook.row_cap = 3")
    loaded.run_line_magic("config", "PiNotebook.statement_timeout = 2.5")
    run = await _read(loaded, "SELECT x FROM t ORDER BY x")
    database = current().database
    assert database is not None and database.statement_timeout_s == 2.5
    (frame,) = run.results().values()
    assert len(frame) == 3
    card = run.state.card_list()[0]
    assert card.details["truncated"] and card.details["row_count"] > 3
    assert "first 3 of" in (run.record or {}).get("text/html", "")


async def test_the_memory_limit_is_settable_with_config(
    loaded: InteractiveShell, tmp_path: Path
) -> None:
    loaded.run_line_magic("pi_connect", _other_db(tmp_path))
    loaded.run_line_magic("config", "PiNotebook.memory_limit_bytes = 1073741824")
    await _read(loaded, "SELECT x FROM t ORDER BY x")
    database = current().database
    assert database is not None and database.backend is not None
    assert database.backend.memory_limit_bytes == 1 << 30


async def test_default_approval_timeout_fits_a_person_reading(loaded: InteractiveShell) -> None:
    assert current().config.approval_timeout >= 120
    assert current().database.approval_timeout_s >= 120  # type: ignore[union-attr]


async def test_failed_audit_url_change_keeps_the_previous_log(
    loaded: InteractiveShell, tmp_path: Path
) -> None:
    state = current()
    audit = state.audit
    loaded.run_line_magic("config", "PiNotebook.audit_url = 'sqlite:////nonexistent/dir/a.db'")
    with pytest.raises(UsageError, match="previous audit log stays in force"):
        loaded.run_cell_magic("pi", "", "SELECT 1 AS one")
    assert state.audit is audit and not audit._closed  # pyright: ignore[reportPrivateUsage]
    loaded.run_line_magic("config", "PiNotebook.audit_url = ''")
    run = await _read(loaded, "SELECT 2 AS two")
    assert state.audit is audit
    kinds = set(audit.to_dataframe(session=audit.session_id, tool_call_id=run.state.order[0]).kind)
    assert "tool_execution_end" in kinds  # recorded in the log that stayed in force
    good = f"sqlite:///{tmp_path / 'new_audit.sqlite'}"
    loaded.run_line_magic("config", f"PiNotebook.audit_url = '{good}'")
    await _read(loaded, "SELECT 3 AS three")
    assert state.audit is not audit and not state.audit._closed  # pyright: ignore[reportPrivateUsage]


async def test_status_line_never_shows_a_password(loaded: InteractiveShell) -> None:
    state = current()
    state.database_url = "postgresql+psycopg://analyst:s3cret@db.example/prod?password=hunter2"
    line = state.status_line()
    assert "hunter2" not in line and "s3cret" not in line
    assert "db.example/prod" in line


async def test_inspect_variable_never_shows_input_history(loaded: InteractiveShell) -> None:
    loaded.run_cell("secret_url = 'postgresql://u:hunter2@host/db'; del secret_url")
    loaded.run_cell("alias_of_history = In")
    names = ["In", "_ih", "_i", "_i1", "Out", "_oh", "alias_of_history"]
    steps = [[tool_call("inspect_variable", {"name": n}, id=f"v{i}")] for i, n in enumerate(names)]
    current().set_model(ScriptedModel([*steps, text("done")]))
    run = await _read(loaded, "look around")
    results = [m for m in run.session.messages if m.role == "toolResult"]
    assert len(results) == len(names)
    for message in results:
        assert message.is_error  # type: ignore[union-attr]
        assert "hunter2" not in str(message.content)  # type: ignore[union-attr]
    assert "hunter2" not in str(run.record)


async def test_pi_cell_interpolates_names_and_pi_usage_sums_per_session(
    loaded: InteractiveShell,
) -> None:
    """In the notebook: ``{name}`` takes the kernel's value, and the run's record
    and ``%pi_usage`` show the tokens the model reported."""
    from pi_notebook.ai.messages import Usage
    from pi_notebook.testing import turn

    loaded.user_ns["city"] = "Oslo"
    model = ScriptedModel([turn(text("Noted."), usage=Usage(input_tokens=1200, output_tokens=34))])
    current().set_model(model)
    run = await _read(loaded, "Which customers live in {city}? Literal {{braces}}, {unknown}.")
    (call,) = model.calls
    sent = str(call.messages[-1].content)
    assert "Which customers live in Oslo? Literal {braces}, {unknown}." in sent
    assert "1,200 tokens in, 34 out" in (run.record or {})["text/html"]
    usage = loaded.run_line_magic("pi_usage", "")
    row = usage[usage.current].iloc[0]
    assert (row.input_tokens, row.output_tokens, row.requests) == (1200, 34, 1)
    current().set_model(
        ScriptedModel([turn(text("again"), usage=Usage(input_tokens=5, output_tokens=1))])
    )
    await _read(loaded, "again")
    usage = loaded.run_line_magic("pi_usage", "")
    assert list(usage.input_tokens)[-2:] == [1200, 5] and list(usage.current)[-2:] == [False, True]
    assert list(usage.session) == list(range(1, len(usage) + 1))
