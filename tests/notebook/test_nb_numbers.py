"""Exact numbers (D7): the card, the durable record and the model's content write each cell of
a result as the same exact string, on SQLite and PostgreSQL: no digit the database returned
dropped, a numeric's scale kept, a float as its shortest round-trip text."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell

from pi_notebook import create_agent_session
from pi_notebook.database import database_extension
from pi_notebook.notebook import RunInfo, RunState, current, record_bundle, reduce
from pi_notebook.notebook.record import card_html
from pi_notebook.testing import ScriptedModel, text

# column -> the exact string every surface shows for it
SQLITE_SQL = (
    "SELECT 70131.16 AS revenue, 1234567.89 AS amount, 0.125 AS share, 1e-7 AS tiny, "
    "12345678901234 AS big, 10001 AS customer_id"
)
SQLITE_SHOWN = {
    "revenue": "70,131.16",
    "amount": "1,234,567.89",
    "share": "0.125",
    "tiny": "1e-07",
    "big": "12,345,678,901,234",
    "customer_id": "10001",
}
PG_SQL = (
    "SELECT 70131.16::float8 AS revenue, 1234567.89::numeric AS amount, "
    "0.125::float8 AS share, 1e-7::float8 AS tiny, 12345678901234::bigint AS big, "
    "70131.10::numeric(12,2) AS price, 0.0000001::numeric AS tiny_numeric, "
    "123456789012345678901234.5::numeric AS huge"
)
PG_SHOWN = {
    "revenue": "70,131.16",
    "amount": "1,234,567.89",
    "share": "0.125",
    "tiny": "1e-07",
    "big": "12,345,678,901,234",
    "price": "70,131.10",
    "tiny_numeric": "0.0000001",
    "huge": "123,456,789,012,345,678,901,234.5",
}
ROUNDED = ("70,131.2", "1,234,568", "1.235e+13", "70,131.1<", "1.235e+23")


async def _run(shell: InteractiveShell, url: str, sql: str) -> tuple[object, dict[str, str]]:
    shell.run_line_magic("pi_connect", url)
    shell.run_cell_magic("pi", "", sql)
    run = current().last_run
    assert run is not None
    state = await run.wait(timeout=60)
    assert state.status == "done", state
    assert run.record is not None
    return run, run.record


def _html_cells(html: str) -> list[str]:
    return re.findall(r"<td class='pi-num'[^>]*>([^<]*)</td>", html)


def _check(run: object, record: dict[str, str], shown: dict[str, str]) -> None:
    expected = list(shown.values())
    # The model's content: the tool result it was given, a pipe table of the same strings.
    results = [m for m in current().session.messages if getattr(m, "role", None) == "toolResult"]
    content = " ".join(p.text for p in results[-1].content)
    header, row = content.splitlines()[1:3]
    assert header.split(" | ") == list(shown)
    assert row.split(" | ") == expected
    # The live card: its table (HTML, right-aligned) and its text form.
    card = run.view.cards[0]  # type: ignore[attr-defined]
    (output,) = card.result.outputs
    assert _html_cells(output["data"]["text/html"]) == expected
    plain_rows = output["data"]["text/plain"].splitlines()
    assert plain_rows[1].split() == expected
    # The durable record: text/html and text/plain.
    assert _html_cells(record["text/html"]) == expected
    record_rows = [line.split() for line in record["text/plain"].splitlines()]
    assert expected in record_rows
    for rounded in ROUNDED:
        for surface in (
            content,
            output["data"]["text/html"],
            record["text/html"],
            record["text/plain"],
        ):
            assert rounded not in surface


async def test_d7_sqlite_numbers_are_exact_in_card_record_and_model_content(
    loaded: InteractiveShell, tmp_path: Path
) -> None:
    db = tmp_path / "numbers.db"
    sqlite3.connect(db).close()
    run, record = await _run(loaded, f"sqlite:///{db}", SQLITE_SQL)
    _check(run, record, SQLITE_SHOWN)


@pytest.mark.postgres
async def test_d7_postgres_numbers_are_exact_in_card_record_and_model_content(
    loaded: InteractiveShell, pg_url: str
) -> None:
    run, record = await _run(loaded, pg_url, PG_SQL)
    frame = run.view.cards[0].dataframe  # type: ignore[attr-defined]
    assert str(frame["amount"].dtype) == "float64"  # the analyst's DataFrame keeps its dtypes
    _check(run, record, PG_SHOWN)


@pytest.mark.parametrize("engine", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_d7_a_direct_session_call_and_its_record_write_the_same_exact_strings(
    engine: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """``AgentSession.call_tool`` through the database extension, its events reduced and
    rendered by the record renderer: the card, both record forms and the model's content."""
    if engine == "sqlite":
        db = tmp_path / "direct.db"
        sqlite3.connect(db).close()
        url, sql, shown = f"sqlite:///{db}", SQLITE_SQL, SQLITE_SHOWN
    else:
        url, sql, shown = str(request.getfixturevalue("pg_url")), PG_SQL, PG_SHOWN
    session = create_agent_session(
        model=ScriptedModel([text("unused")]), extensions=[database_extension(url)], audit=False
    )
    events: list[object] = []
    session.subscribe(events.append)
    try:
        result = await session.call_tool("query_database", {"sql": sql}, tool_call_id="n1")
    finally:
        await session.close()
    assert not result.is_error
    expected = list(shown.values())
    assert " ".join(p.text for p in result.content).splitlines()[2].split(" | ") == expected
    state = RunState()
    for i, event in enumerate(events):
        state = reduce(state, event, now=float(i))
    assert _html_cells(card_html(state.cards["n1"], "Query database")) == expected
    record = record_bundle(state, RunInfo(run_id="r", model="direct"))
    assert _html_cells(record["text/html"]) == expected
    assert expected in [line.split() for line in record["text/plain"].splitlines()]
