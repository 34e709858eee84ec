"""``%pi_connect`` takes every URL the database tool runs, checked through the engine seam
(not SQLAlchemy alone): a chDB directory connects and the next query runs on it, leaving no
probe worker behind; an engine the tool does not run, a ``dialect only`` engine, a missing
extra, a chDB directory that does not exist and a server that does not answer are each
refused in one credential-free line, and the session keeps its database."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path
from typing import Any

import psutil
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

import pi_notebook.sql.engines as engines
from pi_notebook.notebook import current


async def _ask(shell: InteractiveShell, sql: str) -> Any:
    shell.run_cell_magic("pi", "", sql)
    run = current().last_run
    assert run is not None
    await run.wait(timeout=60)
    return run


def _children() -> set[int]:
    return {child.pid for child in psutil.Process().children() if child.is_running()}


def _refused(shell: InteractiveShell, url: str, match: str) -> str:
    """Run ``%pi_connect url``; check it is refused in one line, the session unchanged."""
    state = current()
    session, database_url = state.session, state.database_url
    with pytest.raises(UsageError, match=match) as info:
        shell.run_line_magic("pi_connect", url)
    message = str(info.value)
    assert "\n" not in message and "secret" not in message
    assert "still connected to sqlite:///" in message
    assert state.session is session and state.database_url == database_url
    return message


async def _still_works(shell: InteractiveShell) -> None:
    run = await _ask(shell, "SELECT 1 AS one")
    assert run.state.status == "done"


async def test_a_chdb_directory_connects_and_the_next_query_runs_on_it(
    loaded: InteractiveShell, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("chdb")
    directory = tmp_path / "ch"
    directory.mkdir()
    before = _children()
    loaded.run_line_magic("pi_connect", f"chdb:///{directory}")
    assert f"chdb:///{directory}" in capsys.readouterr().out
    assert current().database_url == f"chdb:///{directory}"
    # toTypeName is ClickHouse's own: the read ran on chDB, not the previous SQLite file.
    run = await _ask(loaded, "SELECT toTypeName(42) AS t, 41 + 1 AS answer")
    assert run.state.status == "done"
    frame = loaded.run_line_magic("pi_result", "")
    assert frame is not None and frame.to_dict("records") == [{"t": "UInt8", "answer": 42}]
    database = current().database
    assert database is not None and database.backend is not None
    worker = database.backend.worker_pid
    # The probe's worker was stopped: the only new process is the session's own worker.
    assert worker is not None and _children() - before == {worker}
    state = current()
    sample = tmp_path / "back.db"
    sample.write_bytes(b"")
    loaded.run_line_magic("pi_connect", f"sqlite:///{sample}")
    for task in list(state._background):  # pyright: ignore[reportPrivateUsage]
        await task  # the replaced session closes, its backend disposed
    assert _children() - before == set()  # nothing of chDB outlives its session


async def test_a_missing_chdb_directory_is_refused_and_not_created(
    loaded: InteractiveShell, tmp_path: Path
) -> None:
    missing = tmp_path / "not_there"
    _refused(loaded, f"chdb:///{missing}", f"no chDB database directory at {missing}")
    assert not missing.exists()  # chDB would have created an empty database there
    relative = "chdb:///data/ch"  # three slashes: a path relative to the working directory
    _refused(loaded, relative, r"no chDB database directory at /\S*data/ch")
    await _still_works(loaded)


@pytest.mark.parametrize(
    ("url", "module", "extra"),
    [
        ("clickhousedb://u:secret@127.0.0.1:1/db", "clickhouse_connect", "clickhouse"),
        ("chdb://", "chdb", "clickhouse"),
        ("sc://127.0.0.1:1", "pyspark", "spark"),
        ("trino://u@127.0.0.1:1/c/s", "trino", "trino"),
    ],
)
async def test_a_missing_extra_is_refused_naming_it(
    loaded: InteractiveShell, monkeypatch: pytest.MonkeyPatch, url: str, module: str, extra: str
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == module else real(name, *a)
    )
    _refused(loaded, url, rf'needs the {extra!r} extra: pip install "pi-notebook\[{extra}\]"')
    await _still_works(loaded)


async def test_a_dialect_only_engine_is_refused(
    loaded: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No engine is 'dialect only' today: Trino is made one for this test.
    marked = tuple(
        dataclasses.replace(info, connects=False) if info is engines.trino.ENGINE else info
        for info in engines.ENGINES
    )
    monkeypatch.setattr(engines, "ENGINES", marked)
    _refused(loaded, "trino://u@127.0.0.1:1/c/s", "'dialect only' so far")
    await _still_works(loaded)


async def test_an_engine_the_tool_does_not_run_is_refused_listing_those_it_runs(
    loaded: InteractiveShell,
) -> None:
    message = _refused(loaded, "oracle://u:secret@db.example/orcl", "no driver for 'oracle'")
    for scheme in ("sqlite:///PATH", "chdb:///PATH", "clickhousedb://", "sc://HOST", "trino://"):
        assert scheme in message
    await _still_works(loaded)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("clickhousedb://u:secret@127.0.0.1:1/db", "clickhousedb://u:***@127.0.0.1:1/db"),
        ("trino://u@127.0.0.1:1/c/s", "trino://u@127.0.0.1:1/c/s"),
        ("sc://127.0.0.1:1", "sc://127.0.0.1:1"),
    ],
)
async def test_a_server_that_does_not_answer_is_refused_without_the_password(
    loaded: InteractiveShell, url: str, shown: str
) -> None:
    pytest.importorskip(engines.engine_for_url(url).modules[0])
    _refused(loaded, url, rf"^cannot connect to {shown.replace('*', '[*]')} \(")
    await _still_works(loaded)


async def test_a_probe_whose_backend_fails_to_close_refuses_without_a_traceback(
    loaded: InteractiveShell,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("clickhouse_connect")

    def broken(self: object) -> None:
        raise RuntimeError("close failed for u:secret@127.0.0.1 password=secret")

    monkeypatch.setattr(engines.ClickHouseServerBackend, "dispose", broken)
    _refused(loaded, "clickhousedb://u:secret@127.0.0.1:1/db", r"^cannot use .*RuntimeError")
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and "secret" not in captured.err + captured.out
    await _still_works(loaded)
