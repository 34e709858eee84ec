"""In-process: %load_ext, the magics, the run/approval flow with Button.click(), bad input."""

from __future__ import annotations

import asyncio
import sqlite3

import pandas as pd
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from pi_notebook.notebook import ApprovalPrompt, current


def _db_path() -> str:
    url = current().database_url
    assert url.startswith("sqlite:///")
    return url.removeprefix("sqlite:///")


def _city(customer_id: int) -> str:
    with sqlite3.connect(_db_path()) as conn:
        return conn.execute(
            "SELECT city FROM customers WHERE customer_id = ?", (customer_id,)
        ).fetchone()[0]


async def _ask(shell: InteractiveShell, text: str):
    shell.run_cell_magic("pi", "", text)
    return current().last_run


async def test_load_defaults_status_line(
    shell: InteractiveShell, shared_data_dir, monkeypatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PI_NOTEBOOK_DATA_DIR", str(shared_data_dir))
    shell.run_line_magic("load_ext", "pi_notebook")
    try:
        out = capsys.readouterr().out.strip().splitlines()
        assert len(out) == 1
        assert "offline" in out[0] and "sample" in out[0] and "sqlite:///" in out[0]
        assert out[0].endswith("(cells share one conversation; %pi_reset starts a new one)")
        tools = shell.run_line_magic("pi_tools", "")
        assert {"name", "source", "active", "label"} <= set(tools.columns)
        row = tools.set_index("name").loc["query_database"]
        assert row["active"] and row["source"] == "pi_notebook.database"
    finally:
        shell.run_line_magic("unload_ext", "pi_notebook")


async def test_read_renders_dataframe_in_output_widget(
    loaded: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    run = await _ask(loaded, "SELECT customer_id, name FROM customers ORDER BY customer_id LIMIT 3")
    capsys.readouterr()
    state = await run.wait(timeout=30)
    assert state.status == "done"
    # The background task never prints; a terminal shell shows the record's text/plain once,
    # when the record replaces the live view.
    assert run.record is not None
    assert capsys.readouterr().out.strip() == run.record["text/plain"].strip()
    card = run.view.cards[0]
    assert card.status == "done"
    assert "SELECT customer_id" in card.body.value
    assert card.result is not None and card.content_fold is not None
    (output,) = card.result.outputs
    assert "<table" in output["data"]["text/html"]
    assert card.content_fold.selected_index is None  # model-facing content folded away
    frame = loaded.run_line_magic("pi_result", "-o df")
    assert list(frame.columns) == ["customer_id", "name"] and len(frame) == 3
    assert loaded.user_ns["df"] is frame


async def test_write_approved_by_click_changes_database_and_audit(loaded: InteractiveShell) -> None:
    run = await _ask(loaded, "UPDATE customers SET city = 'Approved-City' WHERE customer_id = 7")
    prompt = await run.next_prompt(timeout=30)
    assert isinstance(prompt, ApprovalPrompt)
    assert run.view.cards[0].status == "awaiting approval"
    assert run.view.cards[0].prompt is prompt  # rendered inside the card being confirmed
    descriptions = [prompt.approve_button.description, prompt.reject_button.description]
    assert descriptions == ["Approve", "Reject"]
    assert prompt.sql == "UPDATE customers SET city = 'Approved-City' WHERE customer_id = 7"
    assert prompt.reason == "UPDATE changes data"  # why, from the database extension's policy
    prompt.approve_button.click()
    assert prompt.approve_button.disabled and prompt.reject_button.disabled
    state = await run.wait(timeout=30)
    assert state.card_list()[0].status == "done"
    assert _city(7) == "Approved-City"
    audit = loaded.run_line_magic("pi_audit", f"--call {state.order[0]}")
    assert {"tool_call_id", "tool_name", "kind", "timestamp"} <= set(audit.columns)
    assert "approval" in set(audit["kind"])
    approvals = loaded.run_line_magic("pi_approvals", "")
    assert "approved" in set(approvals["decision"])


async def test_write_rejected_is_blocked(loaded: InteractiveShell) -> None:
    before = _city(8)
    run = await _ask(loaded, "UPDATE customers SET city = 'Nope' WHERE customer_id = 8")
    prompt = await run.next_prompt(timeout=30)
    prompt.reject_button.click()
    prompt.approve_button.click()  # a late click changes nothing
    state = await run.wait(timeout=30)
    card = state.card_list()[0]
    assert card.status == "blocked" and "Rejected by user." in (card.error or "")
    assert prompt.decision == "rejected"
    assert _city(8) == before


async def test_approval_timeout_counts_as_expired(loaded: InteractiveShell) -> None:
    loaded.run_line_magic("config", "PiNotebook.approval_timeout = 0.5")
    run = await _ask(loaded, "DELETE FROM customers WHERE customer_id = 9")
    prompt = await run.next_prompt(timeout=30)
    state = await run.wait(timeout=30)
    assert prompt.decision == "expired"
    assert prompt.approve_button.disabled and prompt.reject_button.disabled
    assert state.card_list()[0].status == "blocked"


async def test_second_pi_while_running_is_a_usage_error(loaded: InteractiveShell) -> None:
    run = await _ask(loaded, "UPDATE customers SET city = 'Second' WHERE customer_id = 10")
    prompt = await run.next_prompt(timeout=30)
    with pytest.raises(UsageError, match="still going"):
        loaded.run_cell_magic("pi", "", "SELECT 1")
    with pytest.raises(UsageError, match="still going"):
        loaded.run_line_magic("pi_model", "offline")
    prompt.approve()  # the running session keeps working
    assert (await run.wait(timeout=30)).status == "done"
    assert _city(10) == "Second"


async def test_stop_button_aborts_pending_approval(loaded: InteractiveShell) -> None:
    run = await _ask(loaded, "UPDATE customers SET city = 'Stopped' WHERE customer_id = 11")
    prompt = await run.next_prompt(timeout=30)
    run.view.stop_button.click()
    state = await run.wait(timeout=30)
    assert prompt.decision == "aborted"
    assert state.status == "stopped"
    assert _city(11) != "Stopped"


@pytest.mark.parametrize(
    ("magic", "line", "match"),
    [
        ("pi_tools", "--frobnicate", "unrecognized arguments"),
        ("pi_tools", "--activate no_such_tool", "No tool named"),
        ("pi_audit", "--since yesterday-ish", "ISO time"),
        ("pi_audit", "--bogus 1", "Usage: %pi_audit"),
        ("pi_connect", "not a url", "Usage: %pi_connect"),
        ("pi_connect", "notaurl", "not a SQLAlchemy URL"),
        (
            "pi_connect",
            "postgresql://u:hunter2@host:port/db",
            r"^(?!.*hunter2).*not a SQLAlchemy URL",
        ),
        ("pi_connect", "nosuchdriver://x/y", "no driver"),
        ("pi_connect", "sqlite:////nonexistent/dir/x.db", "no SQLite file"),
        ("pi_model", "gpt-5", "Try %pi_model offline"),
        ("pi_model", "openai:", "no model id"),
        ("pi_extension", "/nonexistent/ext.py", "No file at"),
        ("pi_result", "no_such_call", "No result DataFrame"),
        ("pi_result", "-o 1bad", "not a variable name"),
    ],
)
async def test_bad_input_is_one_line_usage_error(
    loaded: InteractiveShell, magic: str, line: str, match: str
) -> None:
    session = current().session
    with pytest.raises(UsageError, match=match) as info:
        loaded.run_line_magic(magic, line)
    assert "\n" not in str(info.value)
    assert current().session is session  # nothing was rebuilt
    run = await _ask(loaded, "SELECT 1 AS one")  # and the session keeps working
    assert (await run.wait(timeout=30)).status == "done"


async def test_pi_cell_mistakes(loaded: InteractiveShell) -> None:
    with pytest.raises(UsageError, match="empty"):
        loaded.run_cell_magic("pi", "", "   ")
    with pytest.raises(UsageError, match="only --background and -o NAME"):
        loaded.run_cell_magic("pi", "--fast", "SELECT 1")


async def test_pi_tools_activate_deactivate(loaded: InteractiveShell) -> None:
    frame = loaded.run_line_magic("pi_tools", "--deactivate query_database")
    assert not frame.set_index("name").loc["query_database", "active"]
    assert "query_database" not in current().session.active_tool_names
    frame = loaded.run_line_magic("pi_tools", "--activate query_database")
    assert frame.set_index("name").loc["query_database", "active"]


async def test_config_and_model_magic(loaded: InteractiveShell, capsys) -> None:
    loaded.run_line_magic("pi_model", "")
    assert "offline" in capsys.readouterr().out
    loaded.run_line_magic("config", 'PiNotebook.model = "nonsense"')
    with pytest.raises(UsageError, match="nonsense"):
        loaded.run_cell_magic("pi", "", "SELECT 1")
    loaded.run_line_magic("pi_model", "offline")
    run = await _ask(loaded, "SELECT 2 AS two")
    assert (await run.wait(timeout=30)).status == "done"


async def test_connect_and_extension(loaded: InteractiveShell, tmp_path, capsys) -> None:
    db = tmp_path / "other.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (x INTEGER)")
        conn.execute("INSERT INTO t VALUES (41), (42)")
    loaded.run_line_magic("pi_connect", f"sqlite:///{db}")
    assert "other.db" in capsys.readouterr().out
    run = await _ask(loaded, "SELECT x FROM t ORDER BY x")
    await run.wait(timeout=30)
    assert list(loaded.run_line_magic("pi_result", "")["x"]) == [41, 42]
    ext = tmp_path / "echo_ext.py"
    ext.write_text(
        "from pydantic import BaseModel\n"
        "from pi_notebook import ToolDefinition, ToolResult, TextContent, define_tool\n"
        "class P(BaseModel):\n    text: str\n"
        "async def run(i, p, s, u, c):\n    return ToolResult(content=[TextContent(text=p.text)])\n"
        "def register(pi):\n"
        "    pi.register_tool(define_tool(ToolDefinition(name='echo', label='Echo', description='Echo.',"
        " parameters=P, execute=run)))\n"
    )
    loaded.run_line_magic("pi_extension", str(ext))
    tools = loaded.run_line_magic("pi_tools", "").set_index("name")
    assert tools.loc["echo", "source"] == str(ext)
    broken = tmp_path / "broken_ext.py"
    broken.write_text("raise RuntimeError('broken on purpose')\n")
    with pytest.raises(UsageError, match="broken on purpose"):
        loaded.run_line_magic("pi_extension", str(broken))
    assert "echo" in current().session.tool_registry


async def test_wait_refused_where_kernel_cannot_take_comms(
    loaded: InteractiveShell, monkeypatch
) -> None:
    from pi_notebook.notebook import AwaitNotSupportedError

    class OldKernel:
        async def dispatch_shell(self, msg: object) -> None: ...

    run = await _ask(loaded, "SELECT 3 AS three")
    monkeypatch.setattr(loaded, "kernel", OldKernel(), raising=False)
    with pytest.raises(AwaitNotSupportedError, match="cannot receive widget clicks"):
        await run.wait()
    monkeypatch.undo()
    await run.wait(timeout=30)


async def test_current_handle_and_results(loaded: InteractiveShell) -> None:
    state = current()
    run = await _ask(loaded, "SELECT product_id, price FROM products LIMIT 4")
    assert state.last_run is run and state.active_run is run
    await asyncio.wait_for(run.wait(), 30)
    assert state.active_run is None
    (frame,) = run.results().values()
    assert isinstance(frame, pd.DataFrame) and frame.shape == (4, 2)


async def test_unload_closes_the_session_then_the_audit_log(
    shell: InteractiveShell, shared_data_dir, monkeypatch
) -> None:
    monkeypatch.setenv("PI_NOTEBOOK_DATA_DIR", str(shared_data_dir))
    shell.run_line_magic("load_ext", "pi_notebook")
    state = current()
    audit, session = state.audit, state.session
    assert audit is not None and session is not None
    shell.run_line_magic("unload_ext", "pi_notebook")
    for task in list(state._background):  # pyright: ignore[reportPrivateUsage]
        await task
    assert session.closed
    assert audit._closed  # pyright: ignore[reportPrivateUsage]
    assert audit.verify().ok  # the store is still readable, only this writer is closed


def test_unload_removes_every_magic_it_added(
    shell: InteractiveShell, shared_data_dir, monkeypatch
) -> None:
    monkeypatch.setenv("PI_NOTEBOOK_DATA_DIR", str(shared_data_dir))
    magics = shell.magics_manager.magics
    before = {kind: set(names) for kind, names in magics.items()}
    shell.run_line_magic("load_ext", "pi_notebook")
    added = {kind: set(names) - before[kind] for kind, names in magics.items()}
    assert {"pi_mcp", "pi_reset", "pi_review"} <= added["line"] and "pi" in added["cell"]
    shell.run_line_magic("unload_ext", "pi_notebook")
    assert {kind: set(names) for kind, names in magics.items()} == before


async def test_pi_audit_user_looks_across_sessions(loaded: InteractiveShell) -> None:
    """``--user NAME``: one person's records from every session of the store."""
    audit = current().audit
    assert audit is not None
    mine = loaded.run_line_magic("pi_audit", f"--user {audit.user}")
    assert len(mine) >= 1 and set(mine["user"]) == {audit.user}
    nobody = loaded.run_line_magic("pi_audit", "--user no-such-person")
    assert len(nobody) == 0


async def test_empty_audit_views_say_so_and_calls_read_decision_first(
    loaded: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    """No grants, no decisions: one line says so and the empty frame (with its columns) is
    still returned; ``%pi_audit --calls`` puts what a person reads first, ids and hashes last."""
    grants = loaded.run_line_magic("pi_grants", "")
    assert grants.empty and "grant_id" in grants.columns
    assert capsys.readouterr().out == "No grants in force.\n"
    approvals = loaded.run_line_magic("pi_approvals", "")
    assert approvals.empty and "decision" in approvals.columns
    assert capsys.readouterr().out == "No approval decisions yet.\n"
    run = await _ask(loaded, "UPDATE customers SET city = 'Seen' WHERE customer_id = 12")
    (await run.next_prompt(timeout=30)).reject()
    await run.wait(timeout=30)
    capsys.readouterr()
    approvals = loaded.run_line_magic("pi_approvals", "")
    assert list(approvals["decision"]) == ["rejected"]
    assert capsys.readouterr().out == ""
    calls = loaded.run_line_magic("pi_audit", "--calls")
    assert list(calls.columns[:4]) == ["decision", "outcome", "sql", "rows"]
    assert list(calls.columns[-3:]) == ["tool_call_id", "session_id", "args_hash"]
    row = calls.iloc[-1]
    assert (row["decision"], row["sql"]) == (
        "rejected",
        "UPDATE customers SET city = 'Seen' WHERE customer_id = 12",
    )


async def test_pi_cell_o_binds_the_last_result_when_the_run_settles(
    loaded: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    loaded.user_ns.pop("top", None)
    loaded.run_cell_magic("pi", "-o top", "SELECT customer_id FROM customers ORDER BY 1 LIMIT 3")
    run = current().last_run
    assert run is not None
    assert "top" not in loaded.user_ns  # bound when the run settles, not before
    await run.wait(timeout=30)
    top = loaded.user_ns["top"]
    assert list(top["customer_id"]) == [1, 2, 3]
    assert top is loaded.run_line_magic("pi_result", "")
    # A run without a result DataFrame (a rejected write) leaves the name as it was.
    capsys.readouterr()
    loaded.run_cell_magic(
        "pi", "--background -o top", "DELETE FROM customers WHERE customer_id = 13"
    )
    run = current().last_run
    assert run is not None
    (await run.next_prompt(timeout=30)).reject()
    await run.wait(timeout=30)
    assert loaded.user_ns["top"] is top
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1] == (
        "No result DataFrame from this run (blocked): top was not set (top keeps its earlier value)."
    )


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ("-o 1bad", "'1bad' is not a variable name"),
        ("-o class", "'class' is not a variable name"),
        ("-o", "-o needs a variable name"),
        ("-o df --fast", "only --background and -o NAME"),
    ],
)
async def test_pi_cell_o_name_mistakes(loaded: InteractiveShell, line: str, match: str) -> None:
    before = current().last_run
    with pytest.raises(UsageError, match=match) as info:
        loaded.run_cell_magic("pi", line, "SELECT 1 AS one")
    assert "\n" not in str(info.value)
    assert current().last_run is before  # no run started
