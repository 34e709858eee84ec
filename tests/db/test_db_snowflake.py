"""Snowflake through its official client, against the fakesnow emulator's server (DuckDB
behind Snowflake's REST API): end to end through the database extension with a scripted
model and approval UI, plus what the emulator cannot show (EXPLAIN), answered honestly.

The emulator runs in its own virtual environment (``make`` builds ``.venv-fakesnow``:
fakesnow pins a sqlglot other than the project's), found at ``PI_NOTEBOOK_FAKESNOW`` or
``.venv-fakesnow/bin/fakesnow``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import socket
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("snowflake.connector")

import pi_notebook.database
from pi_notebook import AgentSession, create_agent_session
from pi_notebook.sql.backend import QueryError, QueryTimeout
from pi_notebook.sql.engines import MissingExtra, SnowflakeBackend, create_backend, estimate_read
from pi_notebook.sql.engines.snowflake import explain_estimate, snowflake_connect_args
from pi_notebook.testing import ScriptedApprovalUI, ScriptedModel, text, tool_call

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fixtures" / "sql" / "snowflake" / "side_effects.sql"
SCHEMA = (
    "CREATE SCHEMA IF NOT EXISTS SALES",
    "CREATE OR REPLACE TABLE SALES.ORDERS (ID INT, KIND VARCHAR, AMOUNT FLOAT, TS TIMESTAMP_NTZ)",
    "INSERT INTO SALES.ORDERS SELECT seq4(), IFF(seq4() % 4 = 0, 'buy', 'view'), seq4() / 10, "
    "'2024-01-01'::TIMESTAMP_NTZ FROM TABLE(GENERATOR(ROWCOUNT => 100))",
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _unavailable(reason: str) -> None:
    if os.environ.get("PI_NOTEBOOK_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{reason}; PI_NOTEBOOK_REQUIRE_SERVICES=1 requires it", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def fakesnow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """The port of a fakesnow server on 127.0.0.1, its databases in a temporary directory."""
    program = os.environ.get("PI_NOTEBOOK_FAKESNOW", str(ROOT / ".venv-fakesnow/bin/fakesnow"))
    if not os.access(program, os.X_OK):
        _unavailable(f"the fakesnow emulator is not installed at {program} (make builds it)")
    port = _free_port()
    data = tmp_path_factory.mktemp("fakesnow")
    server = subprocess.Popen(
        [program, "-s", "-p", str(port), "-d", str(data)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    _unavailable("the fakesnow emulator did not start")
                time.sleep(0.2)
        yield port
    finally:
        server.terminate()
        server.wait(10)


@pytest.fixture
def warehouse(fakesnow: int) -> str:
    """A fresh database on the emulator holding ``SALES.ORDERS`` (100 rows: 25 'buy')."""
    database = f"DB_{uuid.uuid4().hex[:8].upper()}"
    url = (
        f"snowflake://analyst:s3cret-pw@fakesnow/{database}/SALES?warehouse=WH&role=READER"
        f"&host=127.0.0.1&port={fakesnow}&protocol=http"
    )
    backend = create_backend(url)
    try:
        for sql in SCHEMA:
            asyncio.run(backend._run_as("write", sql))
    finally:
        backend.dispose()
    return url


async def _count(url: str, sql: str = "SELECT count(*) FROM ORDERS") -> int:
    backend = create_backend(url)
    try:
        return int((await backend._run_as("read", sql)).dataframe.iloc[0, 0])
    finally:
        backend.dispose()


@pytest.fixture
async def session_on(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """``await session_on(url, sqls, ui=...)``: a session whose model sends ``sqls``."""
    sessions: list[AgentSession] = []
    audit = f"sqlite:///{tmp_path / 'audit.sqlite'}"

    async def make(url: str, sqls: list[str], *, ui: Any = None, **options: Any) -> Any:
        steps: list[Any] = [
            [tool_call("query_database", {"sql": s}, id=f"q{i}")] for i, s in enumerate(sqls)
        ]
        ext = pi_notebook.database.database_extension(url, **options)
        session = create_agent_session(
            model=ScriptedModel([*steps, text("done")]), ui=ui, audit=audit, extensions=[ext]
        )
        sessions.append(session)
        return session, ext

    yield make
    for session in sessions:
        await session.close()


def _results(session: AgentSession) -> list[Any]:
    return [m for m in session.messages if m.role == "toolResult"]


def _text(message: Any) -> str:
    return " ".join(getattr(p, "text", "") for p in message.content)


async def test_s1_a_snowflake_read_runs_at_once_with_the_frame_in_details(
    warehouse: str, session_on: Any
) -> None:
    ui = ScriptedApprovalUI("rejected")
    sql = "SELECT KIND, count(*) AS N, min(TS) AS FIRST FROM ORDERS GROUP BY KIND ORDER BY KIND"
    session, ext = await session_on(warehouse, [sql], ui=ui)
    await session.prompt("go")
    [result] = _results(session)
    assert not result.is_error, _text(result)
    frame = result.details["dataframe"]
    assert list(frame["KIND"]) == ["buy", "view"] and list(frame["N"]) == [25, 75]
    assert str(frame["FIRST"].iloc[0]) == "2024-01-01 00:00:00"
    assert result.details["dialect"] == "snowflake" and ui.requests == []
    assert "final_args" in list(session.audit.to_dataframe()["kind"])
    schema = await ext.schema.get()
    assert [t.name for t in schema.tables] == ["ORDERS"]
    assert [c.type for c in schema.tables[0].columns] == [
        "NUMBER",
        "TEXT",
        "FLOAT",
        "TIMESTAMP_NTZ",
    ]
    assert "s3cret-pw" not in session.audit.to_dataframe().astype(str).to_csv()


async def test_a_snowflake_read_stops_at_the_row_cap_and_the_size_bound(warehouse: str) -> None:
    backend = create_backend(warehouse, row_cap=10)
    sized = create_backend(warehouse, max_result_bytes=2_000)
    try:
        capped = await backend.run("r1", "SELECT * FROM ORDERS ORDER BY ID")
        counted = await backend.run("r2", "SELECT * FROM ORDERS", count_rows=True)
        small = await sized.run("r3", "SELECT repeat('x', 100) AS S FROM ORDERS")
    finally:
        backend.dispose()
        sized.dispose()
    assert len(capped.dataframe) == 10 and capped.truncated and not capped.row_count_exact
    assert str(capped.dataframe["TS"].dtype).startswith("datetime64")
    assert counted.row_count == 100 and counted.row_count_exact
    assert small.size_capped and 0 < len(small.dataframe) < 100 and "size limit" in small.preview


async def test_s24_an_approved_snowflake_write_runs_after_a_derived_count(
    warehouse: str, session_on: Any
) -> None:
    ui = ScriptedApprovalUI("approved")
    sql = "UPDATE ORDERS SET KIND = 'refund' WHERE KIND = 'buy'"
    session, _ = await session_on(warehouse, [sql], ui=ui)
    await session.prompt("go")
    [request] = ui.requests
    assert request.preview is not None and request.preview.affected_rows == 25
    assert "SELECT count(*)" in (request.preview.method or "")
    [result] = _results(session)
    assert not result.is_error, _text(result)
    assert "25 row(s) affected" in _text(result)
    await session.close()
    assert await _count(warehouse, "SELECT count(*) FROM ORDERS WHERE KIND = 'refund'") == 25


async def test_s24_a_rejected_snowflake_write_changes_nothing(
    warehouse: str, session_on: Any
) -> None:
    ui = ScriptedApprovalUI("rejected")
    session, _ = await session_on(warehouse, ["DELETE FROM ORDERS WHERE KIND = 'view'"], ui=ui)
    await session.prompt("go")
    [request] = ui.requests
    assert request.preview is not None and request.preview.affected_rows == 75
    [result] = _results(session)
    assert result.is_error
    await session.close()
    assert await _count(warehouse) == 100


def _corpus() -> list[str]:
    entries = CORPUS.read_text(encoding="utf-8").split("\n-- ;;\n")
    lines = [[ln for ln in e.splitlines() if not ln.startswith("-- ")] for e in entries]
    return [s for s in ("\n".join(ls).strip() for ls in lines) if "sales.orders" in s]


async def test_d1_side_effects_from_the_corpus_never_auto_run(
    warehouse: str, session_on: Any
) -> None:
    """Each is refused or asked (and rejected); none runs, the table keeps its rows."""
    effects = _corpus()
    assert len(effects) >= 15
    ui = ScriptedApprovalUI("rejected")
    session, _ = await session_on(warehouse, effects, ui=ui)
    await session.prompt("go")
    results = _results(session)
    assert len(results) == len(effects) and all(r.is_error for r in results)
    asked = {r.args["sql"] for r in ui.requests}
    assert all(
        sql in asked or "Refused" in _text(r) for sql, r in zip(effects, results, strict=True)
    )
    await session.close()
    assert await _count(warehouse) == 100
    assert await _count(warehouse, "SELECT count(*) FROM ORDERS WHERE AMOUNT = 0") == 1


LONG_READ = (
    "SELECT count(*) FROM ORDERS a, ORDERS b, ORDERS c, ORDERS d "
    "WHERE MOD(a.ID * b.ID + c.ID * d.ID, 7) = 3"
)
"""A read of 10^8 joined rows: seconds on the emulator."""


async def test_s11_stop_ends_a_long_snowflake_read_with_no_answer(
    warehouse: str, session_on: Any
) -> None:
    """The emulator has no abort request: the read's answer is dropped when it comes."""
    session, _ = await session_on(warehouse, [LONG_READ], statement_timeout_s=120)
    run = asyncio.create_task(session.prompt("go"))
    await asyncio.sleep(1)
    session.abort()
    await run
    [result] = _results(session)
    assert result.is_error and "abort" in _text(result).lower()
    assert "dataframe" not in (result.details or {})


async def test_d6_the_statement_timeout_ends_a_long_snowflake_read(warehouse: str) -> None:
    backend = create_backend(warehouse, statement_timeout_s=1)
    try:
        with pytest.raises(QueryTimeout, match="statement timeout"):
            await backend.run("long", LONG_READ)
    finally:
        backend.dispose()


async def test_the_estimate_says_the_emulator_cannot_explain(warehouse: str) -> None:
    backend = create_backend(warehouse)
    try:
        estimate = await estimate_read(backend, "SELECT * FROM ORDERS")
    finally:
        backend.dispose()
    assert estimate.rows is None and estimate.bytes is None
    assert estimate.source.startswith("Snowflake EXPLAIN USING JSON failed")


async def test_a_read_budget_on_the_emulator_says_there_is_no_estimate(
    warehouse: str, session_on: Any
) -> None:
    """fakesnow has no EXPLAIN: the read runs within its own limits, and says why."""
    ui = ScriptedApprovalUI("rejected")
    session, _ = await session_on(
        warehouse, ["SELECT * FROM ORDERS"], ui=ui, read_budget={"bytes": 1}
    )
    await session.prompt("go")
    [result] = _results(session)
    assert not result.is_error and ui.requests == []
    estimate = result.details["estimate"]
    assert estimate["bytes"] is None
    assert estimate["source"].startswith("Snowflake EXPLAIN USING JSON failed")
    assert len(result.details["dataframe"]) == 100


def test_an_explain_plan_gives_the_bytes_snowflake_assigns() -> None:
    plan = (
        '{"GlobalStats": {"partitionsTotal": 40, "partitionsAssigned": 3, '
        '"bytesAssigned": 1048576}, "Operations": [[]]}'
    )
    estimate = explain_estimate(plan)
    assert (estimate.rows, estimate.bytes) == (None, 1048576)
    assert "3 of 40 partitions" in estimate.source
    assert explain_estimate("{}").bytes is None


def test_the_url_is_parsed_as_snowflake_sqlalchemy_writes_it() -> None:
    args = snowflake_connect_args(
        "snowflake://ana:p%40ss@xy12345.eu-west-1/ANALYTICS/SALES?warehouse=WH&role=READER"
    )
    assert args == {
        "account": "xy12345.eu-west-1",
        "user": "ana",
        "password": "p@ss",
        "database": "ANALYTICS",
        "schema": "SALES",
        "warehouse": "WH",
        "role": "READER",
    }
    with pytest.raises(ValueError, match="unknown option"):
        snowflake_connect_args("snowflake://ana@acct/DB?authenticator=externalbrowser")
    with pytest.raises(ValueError, match="account is missing"):
        snowflake_connect_args("snowflake:///DB")
    assert isinstance(create_backend("snowflake://ana@acct/DB"), SnowflakeBackend)


def test_a_snowflake_url_without_the_extra_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name.startswith("snowflake") else real(name, *a),
    )
    with pytest.raises(MissingExtra) as refused:
        create_backend("snowflake://ana@acct/DB/SALES")
    assert str(refused.value) == (
        "snowflake needs the 'snowflake' extra: pip install \"pi-notebook[snowflake]\""
    )


async def test_a_snowflake_connection_failure_names_no_password() -> None:
    backend = create_backend(
        "snowflake://ana:s3cret-pw@acct/DB/S?host=127.0.0.1&port=9&protocol=http",
        statement_timeout_s=1,
    )
    try:
        with pytest.raises(QueryError) as failed:
            await backend.run("r", "SELECT 1")
    finally:
        backend.dispose()
    assert "s3cret-pw" not in str(failed.value) and "snowflake://ana:***@acct" in str(failed.value)


async def test_pi_connect_takes_a_snowflake_url_and_refuses_one_that_does_not_answer(
    warehouse: str, fakesnow: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from IPython.core.error import UsageError
    from IPython.core.interactiveshell import InteractiveShell

    from pi_notebook.notebook import current

    shell = InteractiveShell.instance()
    monkeypatch.setenv("PI_NOTEBOOK_DATA_DIR", str(tmp_path))
    shell.run_line_magic("load_ext", "pi_notebook")
    state = current()
    try:
        shell.run_line_magic("pi_connect", warehouse)  # checked by SELECT 1 on the emulator
        assert state.database_url == warehouse
        shell.run_cell_magic("pi", "", "SELECT count(*) AS N FROM ORDERS")
        run = state.last_run
        assert run is not None and (await run.wait(timeout=60)).status == "done"
        frame = shell.run_line_magic("pi_result", "")
        assert frame is not None and list(frame["N"]) == [100]
        closed = warehouse.replace(f"port={fakesnow}", f"port={_free_port()}")
        with pytest.raises(
            UsageError, match=r"^cannot connect to snowflake://analyst:\*\*\*@"
        ) as info:
            shell.run_line_magic("pi_connect", closed)
        assert "s3cret-pw" not in str(info.value) and "\n" not in str(info.value)
        assert state.database_url == warehouse  # the session keeps its database
    finally:
        shell.run_line_magic("unload_ext", "pi_notebook")
        shell.config.pop("PiNotebook", None)
        for task in list(state._background):  # pyright: ignore[reportPrivateUsage]
            await task
