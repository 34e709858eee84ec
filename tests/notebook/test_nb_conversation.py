"""Cells share one conversation: ``%pi_reset`` starts a new one and keeps the session (its
tools, grants, settings, audit log); a rebuild (``%pi_model``, ``%pi_connect``, ``%config``)
says what it keeps and what it drops."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from pi_notebook.ai.messages import content_text
from pi_notebook.notebook import ApprovalPrompt, Run, current

REBUILT = (
    "New session: a fresh conversation, and any grants ended; kept: your tool choices, earlier "
    "results, the audit log."
)


async def _cell(shell: InteractiveShell, sql: str) -> Run:
    shell.run_cell_magic("pi", "", sql)
    run = current().last_run
    assert run is not None
    return run


async def _granted(shell: InteractiveShell, customer_id: int) -> None:
    """An UPDATE of customers asked about and answered with a grant of that scope."""
    run = await _cell(
        shell, f"UPDATE customers SET city = 'C{customer_id}' WHERE customer_id = {customer_id}"
    )
    prompt = await run.next_prompt(timeout=30)
    assert isinstance(prompt, ApprovalPrompt) and prompt.grant_form is not None
    prompt.grant_form.max_rows.value = 5
    prompt.grant_form.grant_button.click()
    await run.wait(timeout=30)


def _user_texts(messages: list[object]) -> list[str]:
    return [
        content_text(getattr(m, "content"))  # noqa: B009 - messages of several classes
        for m in messages
        if getattr(m, "role", None) == "user" and getattr(m, "custom_type", None) is None
    ]


async def test_pi_reset_clears_the_conversation_and_keeps_the_grants(
    loaded: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    state = current()
    session = state.session
    assert session is not None
    await _granted(loaded, 51)
    await (await _cell(loaded, "SELECT COUNT(*) AS n FROM customers")).wait(timeout=30)
    assert len(_user_texts(session.messages)) == 2  # both cells, one conversation
    held = len(session.messages)
    capsys.readouterr()
    loaded.run_line_magic("pi_reset", "")
    assert capsys.readouterr().out == (
        f"New conversation: the model no longer sees earlier cells ({held} messages cleared); "
        "kept: the session's tools, grants and settings, earlier results and the audit log.\n"
    )
    assert session.messages == [] and state.session is session
    state.audit.flush()
    (reset,) = state.audit.to_dataframe(kind="conversation_reset")["payload"]
    assert reset == {"cleared_messages": held}  # the audit says when the model forgot
    # The grant is still in force: a write inside its scope runs without asking.
    later = await _cell(loaded, "UPDATE customers SET city = 'After' WHERE customer_id = 52")
    final = await later.wait(timeout=30)
    assert later.prompts == [] and final.card_list()[0].word == "granted"
    assert _user_texts(session.messages) == [
        "UPDATE customers SET city = 'After' WHERE customer_id = 52"
    ]
    assert len(loaded.run_line_magic("pi_grants", "")) == 1
    # Not while a run is going: the conversation is in use.
    asking = await _cell(loaded, "DELETE FROM customers WHERE customer_id = 53")
    prompt = await asking.next_prompt(timeout=30)
    with pytest.raises(UsageError, match="still going"):
        loaded.run_line_magic("pi_reset", "")
    assert isinstance(prompt, ApprovalPrompt)
    prompt.reject()
    await asking.wait(timeout=30)
    with pytest.raises(UsageError, match="Usage: %pi_reset"):
        loaded.run_line_magic("pi_reset", "--all")


async def test_a_rebuild_says_what_it_keeps_and_what_it_drops(
    loaded: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    await _granted(loaded, 54)
    read = await _cell(loaded, "SELECT customer_id FROM customers ORDER BY 1 LIMIT 2")
    await read.wait(timeout=30)
    frame = loaded.run_line_magic("pi_result", "")
    loaded.run_line_magic("pi_tools", "--deactivate describe_database")
    capsys.readouterr()
    loaded.run_line_magic("pi_model", "offline")
    status, note = capsys.readouterr().out.strip().splitlines()
    assert status.endswith("(cells share one conversation; %pi_reset starts a new one)")
    assert note == REBUILT
    # Each word of it holds: no grant, no conversation; tool choices and results are kept.
    assert loaded.run_line_magic("pi_grants", "").empty
    session = current().session
    assert session is not None and session.messages == []
    assert "describe_database" not in session.active_tool_names
    assert loaded.run_line_magic("pi_result", "") is frame
    # A %config change rebuilds at the next cell, which says so first, once.
    loaded.run_line_magic("config", "PiNotebook.row_cap = 500")
    capsys.readouterr()
    run = await _cell(loaded, "SELECT 1 AS one")
    assert capsys.readouterr().out.splitlines()[0] == REBUILT
    await run.wait(timeout=30)
    capsys.readouterr()
    await (await _cell(loaded, "SELECT 2 AS two")).wait(timeout=30)
    assert REBUILT not in capsys.readouterr().out
