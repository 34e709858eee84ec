"""BigQuery through its official client, against the bqemulator emulator (DuckDB behind
BigQuery's REST API): end to end through the database extension with a scripted model and
approval UI, plus what the emulator cannot show (a dry run's bytes), answered honestly.

The emulator runs in its own virtual environment (``make`` builds ``.venv-bqemulator``: it
requires a sqlglot and a DuckDB other than the project's), found at ``PI_NOTEBOOK_BQEMULATOR``
or ``.venv-bqemulator/bin/bqemulator``. Each test gets a project of its own on it.
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

pytest.importorskip("google.cloud.bigquery")

import pi_notebook.database
from pi_notebook import AgentSession, create_agent_session
from pi_notebook.sql.backend import QueryError, QueryTimeout
from pi_notebook.sql.engines import BigQueryBackend, MissingExtra, create_backend, estimate_read
from pi_notebook.sql.engines.bigquery import (
    DEFAULT_MAXIMUM_BYTES_BILLED,
    bigquery_target,
    dry_run_estimate,
)
from pi_notebook.testing import ScriptedApprovalUI, ScriptedModel, text, tool_call

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fixtures" / "sql" / "bigquery" / "side_effects.sql"
SCHEMA = (
    "CREATE TABLE sales.orders AS SELECT x AS id, IF(MOD(x, 4) = 0, 'buy', 'view') AS kind, "
    "x / 10 AS amount, TIMESTAMP '2024-01-01' AS ts FROM UNNEST(GENERATE_ARRAY(0, 99)) AS x"
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
def bqemulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The REST endpoint of a bqemulator on 127.0.0.1 (in memory)."""
    program = os.environ.get(
        "PI_NOTEBOOK_BQEMULATOR", str(ROOT / ".venv-bqemulator/bin/bqemulator")
    )
    if not os.access(program, os.X_OK):
        _unavailable(f"the bqemulator emulator is not installed at {program} (make builds it)")
    port = _free_port()
    log = tmp_path_factory.mktemp("bqemulator") / "stderr.log"
    with log.open("wb") as errors:
        server = subprocess.Popen(
            [
                program,
                "start",
                "--rest-port",
                str(port),
                "--grpc-port",
                str(_free_port()),
                "--log-level",
                "error",
                "--log-format",
                "console",
            ],
            stdout=subprocess.DEVNULL,
            stderr=errors,
        )
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    last = log.read_text(errors="replace").strip().splitlines()[-1:]
                    _unavailable(f"the bqemulator emulator did not start: {' '.join(last)}")
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(10)


@pytest.fixture
def warehouse(bqemulator: str) -> str:
    """A fresh project on the emulator holding ``sales.orders`` (100 rows: 25 'buy')."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import bigquery

    project = f"p-{uuid.uuid4().hex[:8]}"
    client = bigquery.Client(
        project=project,
        client_options={"api_endpoint": bqemulator},
        credentials=AnonymousCredentials(),
    )
    client.create_dataset("sales")
    client.close()
    url = f"bigquery://{project}/sales?api_endpoint={bqemulator}"
    backend = create_backend(url)
    try:
        asyncio.run(backend._run_as("write", SCHEMA))
    finally:
        backend.dispose()
    return url


async def _count(url: str, sql: str = "SELECT count(*) FROM orders") -> int:
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


async def test_s1_a_bigquery_read_runs_at_once_with_the_frame_in_details(
    warehouse: str, session_on: Any
) -> None:
    ui = ScriptedApprovalUI("rejected")
    sql = "SELECT kind, count(*) AS n, min(ts) AS first FROM orders GROUP BY kind ORDER BY kind"
    session, ext = await session_on(warehouse, [sql], ui=ui)
    await session.prompt("go")
    [result] = _results(session)
    assert not result.is_error, _text(result)
    frame = result.details["dataframe"]
    assert list(frame["kind"]) == ["buy", "view"] and list(frame["n"]) == [25, 75]
    assert str(frame["first"].iloc[0]) == "2024-01-01 00:00:00+00:00"
    assert result.details["dialect"] == "bigquery" and ui.requests == []
    assert "final_args" in list(session.audit.to_dataframe()["kind"])
    schema = await ext.schema.get()
    assert [t.name for t in schema.tables] == ["orders"]
    assert [c.type for c in schema.tables[0].columns] == ["INT64", "STRING", "FLOAT64", "TIMESTAMP"]


async def test_a_bigquery_read_stops_at_the_row_cap_and_the_size_bound(warehouse: str) -> None:
    backend = create_backend(warehouse, row_cap=10)
    sized = create_backend(warehouse, max_result_bytes=2_000)
    try:
        capped = await backend.run("r1", "SELECT * FROM orders ORDER BY id")
        small = await sized.run("r2", "SELECT REPEAT('x', 100) AS s FROM orders")
    finally:
        backend.dispose()
        sized.dispose()
    assert list(capped.dataframe["id"]) == list(range(10)) and capped.truncated
    assert capped.row_count == 100 and capped.row_count_exact  # BigQuery's total_rows
    assert str(capped.dataframe["ts"].dtype).startswith("datetime64")
    assert small.size_capped and 0 < len(small.dataframe) < 100 and "size limit" in small.preview


async def test_s24_an_approved_bigquery_write_runs_after_a_derived_count(
    warehouse: str, session_on: Any
) -> None:
    ui = ScriptedApprovalUI("approved")
    sql = "UPDATE orders SET kind = 'refund' WHERE kind = 'buy'"
    session, _ = await session_on(warehouse, [sql], ui=ui)
    await session.prompt("go")
    [request] = ui.requests
    assert request.preview is not None and request.preview.affected_rows == 25
    assert "SELECT count(*)" in (request.preview.method or "")
    [result] = _results(session)
    assert not result.is_error, _text(result)
    assert "25 row(s) affected" in _text(result)
    await session.close()
    assert await _count(warehouse, "SELECT count(*) FROM orders WHERE kind = 'refund'") == 25


async def test_s24_a_rejected_bigquery_write_changes_nothing(
    warehouse: str, session_on: Any
) -> None:
    ui = ScriptedApprovalUI("rejected")
    session, _ = await session_on(warehouse, ["DELETE FROM orders WHERE kind = 'view'"], ui=ui)
    await session.prompt("go")
    [request] = ui.requests
    assert request.preview is not None and request.preview.affected_rows == 75
    [result] = _results(session)
    assert result.is_error
    await session.close()
    assert await _count(warehouse) == 100


async def test_a_write_whose_rows_cannot_be_derived_says_there_is_no_transaction(
    warehouse: str,
) -> None:
    backend = create_backend(warehouse)
    try:
        preview = await backend.preview(
            "m", "MERGE orders t USING orders s ON t.id = s.id WHEN MATCHED THEN DELETE"
        )
        rows = await backend._run_as("read", "SELECT count(*) FROM orders")
    finally:
        backend.dispose()
    assert preview.affected_rows is None
    assert "no multi-statement transaction" in (preview.note or "")
    assert rows.dataframe.iloc[0, 0] == 100


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
    assert await _count(warehouse, "SELECT count(*) FROM orders WHERE amount = 0") == 1


LONG_READ = (
    "SELECT count(*) FROM orders a, orders b, orders c, orders d "
    "WHERE MOD(a.id * b.id + c.id * d.id, 7) = 3"
)
"""A read of 10^8 joined rows: seconds on the emulator."""


async def test_s11_stop_ends_a_long_bigquery_read_with_no_answer(
    warehouse: str, session_on: Any
) -> None:
    """The emulator runs each job to its end before it answers: the answer is dropped."""
    session, _ = await session_on(warehouse, [LONG_READ], statement_timeout_s=120)
    run = asyncio.create_task(session.prompt("go"))
    await asyncio.sleep(1)
    session.abort()
    await run
    [result] = _results(session)
    assert result.is_error and "abort" in _text(result).lower()
    assert "dataframe" not in (result.details or {})


async def test_d6_the_statement_timeout_ends_a_long_bigquery_read(warehouse: str) -> None:
    backend = create_backend(warehouse, statement_timeout_s=1)
    try:
        with pytest.raises(QueryTimeout, match="statement timeout"):
            await backend.run("long", LONG_READ)
    finally:
        backend.dispose()


async def test_the_emulators_dry_run_is_no_estimate_and_says_so(warehouse: str) -> None:
    backend = create_backend(warehouse)
    try:
        estimate = await estimate_read(backend, "SELECT * FROM orders")
        broken = await estimate_read(backend, "SELECT * FROM no_such_table")
    finally:
        backend.dispose()
    assert estimate.rows is None and estimate.bytes is None
    assert "said 0 bytes: an emulator has no cost model" in estimate.source
    assert broken.bytes is None and broken.source.startswith("BigQuery dry run failed")


async def test_a_read_budget_on_the_emulator_says_there_is_no_estimate(
    warehouse: str, session_on: Any
) -> None:
    """The emulator's dry run says 0 bytes: the read runs within its own limits, and says why."""
    ui = ScriptedApprovalUI("rejected")
    session, _ = await session_on(
        warehouse, ["SELECT * FROM orders"], ui=ui, read_budget={"bytes": 1}
    )
    await session.prompt("go")
    [result] = _results(session)
    assert not result.is_error and ui.requests == []
    estimate = result.details["estimate"]
    assert estimate["bytes"] is None and "no cost model" in estimate["source"]
    assert len(result.details["dataframe"]) == 100


def test_a_dry_run_gives_the_bytes_bigquery_would_process() -> None:
    """Google's endpoint: the dry run's bytes are the estimate, 0 included (a cached or
    metadata-only read); towards an emulator 0 is no estimate."""
    real = dry_run_estimate(5_000_000, None)
    assert (real.rows, real.bytes) == (None, 5_000_000)
    assert real.source == "BigQuery dry run: total_bytes_processed"
    assert dry_run_estimate(0, None).bytes == 0
    assert dry_run_estimate(0, "http://127.0.0.1:9050").bytes is None
    assert dry_run_estimate(7, "http://127.0.0.1:9050").bytes == 7


def test_each_job_carries_standard_sql_the_dataset_the_byte_cap_and_the_timeout() -> None:
    backend = create_backend(
        "bigquery://proj/sales?maximum_bytes_billed=5000000", statement_timeout_s=2.5
    )
    assert isinstance(backend, BigQueryBackend)
    config, dry = backend.job_config(), backend.job_config(dry_run=True)
    assert (config.use_legacy_sql, config.maximum_bytes_billed, int(config.job_timeout_ms)) == (
        False,
        5_000_000,
        2500,
    )
    assert str(config.default_dataset) == "proj.sales" and not config.dry_run
    assert dry.dry_run and dry.use_query_cache is False
    bare = create_backend("bigquery://proj")
    assert isinstance(bare, BigQueryBackend)
    default = bare.job_config()
    assert default.maximum_bytes_billed == DEFAULT_MAXIMUM_BYTES_BILLED
    assert default.default_dataset is None


def test_the_url_names_project_dataset_and_two_options_only() -> None:
    target = bigquery_target("bigquery://my-proj/sales?api_endpoint=http://127.0.0.1:9050")
    assert (target.project, target.dataset, target.api_endpoint) == (
        "my-proj",
        "sales",
        "http://127.0.0.1:9050",
    )
    with pytest.raises(ValueError, match="unknown option"):
        bigquery_target("bigquery://proj/sales?credentials_path=/tmp/key.json")
    with pytest.raises(ValueError, match="credentials come from the environment"):
        bigquery_target("bigquery://user:key@proj/sales")
    with pytest.raises(ValueError, match="project is missing"):
        bigquery_target("bigquery:///sales")
    with pytest.raises(ValueError, match="positive integer"):
        bigquery_target("bigquery://proj/sales?maximum_bytes_billed=lots")
    with pytest.raises(ValueError, match="/DATASET at most"):
        bigquery_target("bigquery://proj/sales/orders")


def test_a_bigquery_url_without_the_extra_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name.startswith("google") else real(name, *a),
    )
    with pytest.raises(MissingExtra) as refused:
        create_backend("bigquery://proj/sales")
    assert str(refused.value) == (
        "bigquery needs the 'bigquery' extra: pip install \"pi-notebook[bigquery]\""
    )


async def test_without_credentials_in_the_environment_a_read_fails_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Credentials are Application Default Credentials, never the URL's: with none (and no
    metadata server asked), the error says how to set them up."""
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path))
    monkeypatch.setenv("NO_GCE_CHECK", "true")
    backend = create_backend("bigquery://proj/sales")
    try:
        with pytest.raises(QueryError) as failed:
            await backend.run("r", "SELECT 1")
    finally:
        backend.dispose()
    message = str(failed.value)
    assert "\n" not in message and "Application Default Credentials" in message
    assert message.startswith("Could not connect to bigquery://proj/sales")
