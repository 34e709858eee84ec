"""Acceptance: the notebook surfaces (``%load_ext``, the magics, ``%%pi``) through an in-process
IPython shell."""

from __future__ import annotations

import asyncio

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell


@pytest.fixture
def shell():
    InteractiveShell.clear_instance()
    sh = InteractiveShell.instance()
    try:
        yield sh
    finally:
        try:
            sh.run_line_magic("unload_ext", "pi_notebook")
        except Exception:
            pass
        InteractiveShell.clear_instance()


def test_nb_load_ext_and_pi_tools_columns(shell, capsys):
    shell.run_line_magic("load_ext", "pi_notebook")
    out = capsys.readouterr().out
    assert out.strip() and len(out.strip().splitlines()) == 1  # one short line
    df = shell.run_line_magic("pi_tools", "")
    assert {"name", "source", "active"} <= set(df.columns)
    names = set(df["name"])
    assert {"query_database", "read", "ls", "inspect_variable"} <= names
    row = df[df["name"] == "query_database"].iloc[0]
    assert bool(row["active"]) is True


def test_nb_pi_audit_columns(shell):
    shell.run_line_magic("load_ext", "pi_notebook")
    df = shell.run_line_magic("pi_audit", "")
    assert {"tool_call_id", "tool_name", "kind", "timestamp"} <= set(df.columns)


async def test_nb_cell_magic_while_running_raises_usage_error(shell):
    # a kernel runs cells inside its asyncio loop; an async test gives the same
    shell.run_line_magic("load_ext", "pi_notebook")
    shell.run_cell_magic("pi", "", "List the tables in the database.")  # returns at once
    with pytest.raises(UsageError) as info:
        shell.run_cell_magic("pi", "", "And again.")
    assert "still going" in str(info.value).lower()  # spec: "while a run is still going"
    me = asyncio.current_task()
    for _ in range(100):  # let the first run finish before the loop closes
        if all(t.done() for t in asyncio.all_tasks() if t is not me):
            break
        await asyncio.sleep(0.05)
