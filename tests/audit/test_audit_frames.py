"""Reading the audit (D9): typed record frames with filters, and the per-call summary."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pandas.api import types as ptypes

from pi_notebook.audit import AuditLog
from pi_notebook.database import call_views


@pytest.fixture
def log(tmp_path: Path) -> Iterator[AuditLog]:
    audit = AuditLog(f"sqlite:///{tmp_path / 'audit.sqlite'}", session_id="s1")
    yield audit
    audit.close()


COLUMNS = [
    "id",
    "session_id",
    "seq",
    "timestamp",
    "kind",
    "tool_call_id",
    "tool_name",
    "user",
    "policy_version",
    "payload",
    "prev_hash",
    "hash",
]


def _records(frame: pd.DataFrame) -> list[dict[str, object]]:
    """The frame's rows as plain dicts, missing values as ``None``."""
    return frame.astype(object).where(frame.notna(), None).to_dict("records")  # type: ignore[return-value]


def test_d9_columns_are_typed(log: AuditLog) -> None:
    before = pd.Timestamp.now(tz="UTC")
    log.record("tool_call", {"a": 1}, tool_call_id="c1", tool_name="t", policy_version="p1")
    frame = log.to_dataframe()
    assert list(frame.columns) == COLUMNS
    assert isinstance(frame["timestamp"].dtype, pd.DatetimeTZDtype)
    assert str(frame["timestamp"].dt.tz) == "UTC"
    assert frame["timestamp"].iloc[0] >= before.floor("us")
    assert ptypes.is_integer_dtype(frame["id"]) and ptypes.is_integer_dtype(frame["seq"])
    assert frame["payload"].iloc[0] == {"a": 1}
    assert frame.iloc[0][
        ["session_id", "seq", "kind", "tool_call_id", "tool_name", "policy_version"]
    ].tolist() == ["s1", 1, "tool_call", "c1", "t", "p1"]
    assert len(frame["hash"].iloc[0]) == 64 and frame["prev_hash"].iloc[0] == "0" * 64


def test_d9_empty_store_has_the_same_columns(log: AuditLog) -> None:
    frame = log.to_dataframe()
    assert list(frame.columns) == COLUMNS and len(frame) == 0
    assert isinstance(frame["timestamp"].dtype, pd.DatetimeTZDtype)
    assert ptypes.is_integer_dtype(frame["seq"])
    assert len(log.calls_dataframe()) == 0


def test_d9_filters(log: AuditLog, tmp_path: Path) -> None:
    log.record("tool_execution_start", {}, tool_call_id="c1", tool_name="read")
    log.record("tool_execution_start", {}, tool_call_id="c2", tool_name="query_database")
    log.record("tool_execution_end", {}, tool_call_id="c2", tool_name="query_database")
    log.flush()
    cut = pd.Timestamp.now(tz="UTC")
    log.record("session_shutdown", {})
    with AuditLog(log.engine, session_id="s2") as other:
        other.record("tool_call", {}, tool_call_id="c3", tool_name="read")

    def seqs(**filters: object) -> list[tuple[str, int]]:
        frame = log.to_dataframe(**filters)  # type: ignore[arg-type]
        return list(zip(frame["session_id"], frame["seq"], strict=True))

    assert seqs() == [("s1", 1), ("s1", 2), ("s1", 3), ("s1", 4), ("s2", 1)]
    assert seqs(session="s2") == [("s2", 1)]
    assert seqs(tool="read") == [("s1", 1), ("s2", 1)]
    assert seqs(tool_call_id="c2") == [("s1", 2), ("s1", 3)]
    assert seqs(kind="tool_execution_start") == [("s1", 1), ("s1", 2)]
    assert seqs(kind=["tool_call", "session_shutdown"]) == [("s1", 4), ("s2", 1)]
    assert seqs(since=cut) == [("s1", 4), ("s2", 1)]
    assert seqs(since=cut.to_pydatetime().astimezone(dt.timezone(dt.timedelta(hours=5)))) == [
        ("s1", 4),
        ("s2", 1),
    ]
    assert seqs(since=cut.tz_localize(None).isoformat()) == [("s1", 4), ("s2", 1)]
    assert seqs(session="s1", tool="query_database", kind="tool_execution_end") == [("s1", 3)]
    assert log.verify().ok


def test_d9_calls_dataframe(log: AuditLog) -> None:
    q = "query_database"
    # A read: no approval.
    log.record(
        "tool_execution_start", {"args": {"sql": "SELECT 1"}}, tool_call_id="r1", tool_name=q
    )
    log.record("tool_call", {"decision": "allowed"}, tool_call_id="r1", tool_name=q)
    log.record("final_args", {"args_hash": "hr", "sql": "SELECT 1"}, tool_call_id="r1", tool_name=q)
    log.record("query_result", {"row_count": 1, "duration_ms": 2.5}, tool_call_id="r1", tool_name=q)
    log.record(
        "tool_execution_end",
        {"is_error": False, "duration_ms": 12.5},
        tool_call_id="r1",
        tool_name=q,
    )
    # An approved write whose backend hash is the one that counts; the person took 2 s.
    log.record(
        "tool_execution_start", {"args": {"sql": "delete  from t"}}, tool_call_id="w1", tool_name=q
    )
    log.record(
        "approval",
        {"decision": "approved", "args_hash": "ha", "waited_ms": 2000},
        tool_call_id="w1",
        tool_name=q,
        policy_version="p1",
        durable=True,
    )
    log.record("tool_call", {"decision": "allowed"}, tool_call_id="w1", tool_name=q)
    log.record(
        "final_args",
        {"args_hash": "hf", "sql": "DELETE FROM t"},
        tool_call_id="w1",
        tool_name=q,
        durable=True,
    )
    log.record("query_result", {"row_count": 3, "duration_ms": 4.0}, tool_call_id="w1", tool_name=q)
    log.record(
        "tool_execution_end",
        {"is_error": False, "duration_ms": 2030},
        tool_call_id="w1",
        tool_name=q,
    )
    # A write blocked without UI, a refused one, and a call still running.
    log.record(
        "tool_execution_start", {"args": {"sql": "DROP TABLE t"}}, tool_call_id="b1", tool_name=q
    )
    log.record(
        "approval",
        {"decision": "no_ui", "args_hash": "hb", "waited_ms": 0},
        tool_call_id="b1",
        tool_name=q,
        durable=True,
    )
    log.record("tool_call", {"decision": "blocked"}, tool_call_id="b1", tool_name=q)
    log.record(
        "tool_execution_end", {"is_error": True, "duration_ms": 1}, tool_call_id="b1", tool_name=q
    )
    log.record(
        "tool_execution_start", {"args": {"sql": "DELETE FROM t"}}, tool_call_id="m1", tool_name=q
    )
    log.record("capability_mismatch", {"sql": "DELETE FROM t"}, tool_call_id="m1", tool_name=q)
    log.record(
        "tool_execution_end", {"is_error": True, "duration_ms": 1}, tool_call_id="m1", tool_name=q
    )
    log.record("tool_execution_start", {}, tool_call_id="p1", tool_name="slow")
    log.record("session_shutdown", {})

    # A call that never reached the backend shows the code its tool shows for its arguments:
    # a session tells its own log how its tools' calls read; a log opened by URL, with no
    # session, reads them by the describers the imported packages remembered (the database
    # tools' among them), so a lead reading the shared store sees the refused statement too.
    assert log.calls_dataframe()["sql"].iloc[2] == "DROP TABLE t"
    assert AuditLog(log.engine).calls_dataframe()["sql"].iloc[2] == "DROP TABLE t"
    calls = log.calls_dataframe(call_views=call_views)
    shown = calls.drop(columns=["started_at", "ended_at"])
    assert _records(shown) == [
        {
            "session_id": "s1",
            "tool_call_id": "r1",
            "tool_name": q,
            "sql": "SELECT 1",
            "args_hash": "hr",
            "decision": "allowed",
            "outcome": "ok",
            "rows": 1,
            "is_error": False,
            "approval_wait_ms": None,
            "execution_ms": 2.5,
            "duration_ms": 12.5,
        },
        {
            "session_id": "s1",
            "tool_call_id": "w1",
            "tool_name": q,
            "sql": "DELETE FROM t",
            "args_hash": "hf",
            "decision": "approved",
            "outcome": "ok",
            "rows": 3,
            "is_error": False,
            "approval_wait_ms": 2000.0,
            "execution_ms": 4.0,
            "duration_ms": 30.0,
        },
        {
            "session_id": "s1",
            "tool_call_id": "b1",
            "tool_name": q,
            "sql": "DROP TABLE t",
            "args_hash": "hb",
            "decision": "no_ui",
            "outcome": "blocked",
            "rows": None,
            "is_error": True,
            "approval_wait_ms": 0.0,
            "execution_ms": 1.0,
            "duration_ms": 1.0,
        },
        {
            "session_id": "s1",
            "tool_call_id": "m1",
            "tool_name": q,
            "sql": "DELETE FROM t",
            "args_hash": None,
            "decision": None,
            "outcome": "refused",
            "rows": None,
            "is_error": True,
            "approval_wait_ms": None,
            "execution_ms": 1.0,
            "duration_ms": 1.0,
        },
        {
            "session_id": "s1",
            "tool_call_id": "p1",
            "tool_name": "slow",
            "sql": None,
            "args_hash": None,
            "decision": None,
            "outcome": "incomplete",
            "rows": None,
            "is_error": None,
            "approval_wait_ms": None,
            "execution_ms": None,
            "duration_ms": None,
        },
    ]
    assert isinstance(calls["started_at"].dtype, pd.DatetimeTZDtype)
    assert calls["ended_at"].isna().tolist() == [False, False, False, False, True]
    assert (calls["ended_at"].iloc[:4] >= calls["started_at"].iloc[:4]).all()
    assert list(log.calls_dataframe(session="other").columns) == list(calls.columns)


def test_d9_calls_are_keyed_by_session_and_call_id(log: AuditLog) -> None:
    # Model-issued ids repeat across sessions (kernels): each (session, id) is its own call.
    for sid in ("s2", "s3"):
        with AuditLog(log.engine, session_id=sid) as other:
            for i in range(16):
                other.record(
                    "tool_execution_start",
                    {"args": {"sql": f"SELECT {i}"}},
                    tool_call_id=f"call_{i}",
                    tool_name="query_database",
                )
                other.record(
                    "tool_execution_end",
                    {"is_error": False, "duration_ms": 1},
                    tool_call_id=f"call_{i}",
                    tool_name="query_database",
                )
    log.call_views = call_views
    calls = log.calls_dataframe()
    assert len(calls) == 32
    assert calls.groupby("session_id").size().to_dict() == {"s2": 16, "s3": 16}
    assert calls["sql"].iloc[17] == "SELECT 1" and calls["session_id"].iloc[17] == "s3"
    assert len(log.calls_dataframe(session="s2")) == 16


def test_d9_payloads_can_stay_json_text(log: AuditLog) -> None:
    from pi_notebook.audit import decode_payloads

    log.record("tool_call", {"decision": "allowed", "n": 1}, tool_call_id="c1")
    text = log.to_dataframe(decode=False)
    assert text["payload"].iloc[0] == '{"decision":"allowed","n":1}'
    assert decode_payloads(text)["payload"].iloc[0] == {"decision": "allowed", "n": 1}
    assert log.to_dataframe()["payload"].iloc[0] == {"decision": "allowed", "n": 1}


@pytest.mark.postgres
def test_d9_postgres_reads_through_arrow_as_the_driver_path_does(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from audit_support import fresh_pg

    from pi_notebook.readers.postgres import PostgresReader

    served: list[bool] = []
    real = PostgresReader.read_arrow

    def read_arrow(reader: PostgresReader, *args: Any, **kwargs: Any) -> Any:
        read = real(reader, *args, **kwargs)
        served.append(read is not None)
        return read

    monkeypatch.setattr(PostgresReader, "read_arrow", read_arrow)
    with fresh_pg(pg_url) as url, AuditLog(url, session_id="a1") as log:
        log.record(
            "tool_execution_start",
            {"args": {"sql": "SELECT 1"}},
            tool_call_id="c1",
            tool_name="query_database",
        )
        log.flush()
        cut = pd.Timestamp.now(tz="UTC")
        log.record("tool_execution_end", {"is_error": False}, tool_call_id="c1", tool_name="q")
        log.record("session_shutdown", {})
        filters: list[dict[str, object]] = [
            {},
            {"since": cut},
            {"kind": ["tool_execution_end", "session_shutdown"]},
            {"session": "a1", "tool_call_id": "c1"},
            {"session": "nobody"},
        ]
        arrow = [log.to_dataframe(**f) for f in filters]  # type: ignore[arg-type]
        assert all(served)  # the frames above came through Arrow
        monkeypatch.setattr(PostgresReader, "read_arrow", lambda *args, **kwargs: None)
        plain = [log.to_dataframe(**f) for f in filters]  # type: ignore[arg-type]
    assert [len(f) for f in arrow] == [3, 2, 2, 2, 0]
    for a, b in zip(arrow, plain, strict=True):
        assert list(a.columns) == COLUMNS
        assert a["seq"].dtype == "int64" and str(a["timestamp"].dtype) == "datetime64[us, UTC]"
        assert _records(a) == _records(b)


def test_d9_sqlite_reads_through_the_arrow_process_as_the_driver_path_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pi_notebook.audit import frames
    from pi_notebook.readers.protocol import Query, arrow_available
    from pi_notebook.readers.sqlite import SqliteReader

    if not arrow_available("sqlite"):
        pytest.skip("no pyarrow/ADBC SQLite")
    served: list[str] = []
    real = SqliteReader.read_arrow

    def read_arrow(reader: SqliteReader, query: Query, *args: Any, **kwargs: Any) -> Any:
        served.append(query.sql)
        return real(reader, query, *args, **kwargs)

    monkeypatch.setattr(SqliteReader, "read_arrow", read_arrow)
    monkeypatch.setattr(frames, "SQLITE_ARROW_MIN_RECORDS", 0)
    with AuditLog(f"sqlite:///{tmp_path / 'audit.sqlite'}", session_id="a1") as log:
        log.record(
            "tool_execution_start",
            {"args": {"sql": "SELECT 'ü'"}},
            tool_call_id="c1",
            tool_name="query_database",
        )
        log.flush()
        cut = pd.Timestamp.now(tz="UTC")
        log.record("tool_execution_end", {"is_error": False}, tool_call_id="c1", tool_name="q")
        log.record("session_shutdown", {})
        filters: list[dict[str, object]] = [
            {},
            {"since": cut},
            {"kind": ["tool_execution_end", "session_shutdown"]},
            {"session": "a1", "tool_call_id": "c1"},
            {"session": "nobody"},
            {"decode": False},
        ]
        arrow = [log.to_dataframe(**f) for f in filters]  # type: ignore[arg-type]
        assert len(served) == len(filters)  # every frame above came through the process
        monkeypatch.setattr(frames, "SQLITE_ARROW_MIN_RECORDS", 10**12)
        plain = [log.to_dataframe(**f) for f in filters]  # type: ignore[arg-type]
        assert len(served) == len(filters)
        monkeypatch.setattr(frames, "SQLITE_ARROW_MIN_RECORDS", 0)
        log.record("note", {"later": True})
        assert len(log.to_dataframe()) == 4  # the process sees what was committed since
        assert len(served) == len(filters) + 1
    assert [len(f) for f in arrow] == [3, 2, 2, 2, 0, 3]
    for a, b in zip(arrow, plain, strict=True):
        assert list(a.columns) == COLUMNS
        assert a["seq"].dtype == "int64" and str(a["timestamp"].dtype) == str(b["timestamp"].dtype)
        assert _records(a) == _records(b)


@pytest.mark.parametrize(
    "texts",
    [
        # Ordinary payloads: nested, Unicode, an integer past 64 bits (kept exact).
        ['{"a":{"b":[1,2]}}', '{"s":"ü ☃"}', '{"n":1180591620717411303424}'],
        # Tampered rows: each is shown on its own row, wrapped, and the others are untouched.
        ['{"a":1}', "[1, 2]", "not json", '{"b":2}'],
        ['{"a":1},{"b":2}', '{"c":3}'],  # one text holding two objects
        ['{"a":[1', '{"b":2}]}', '{"c":3}'],  # two texts that join into one object
    ],
)
def test_d9_arrow_payloads_decode_as_the_plain_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, texts: list[str]
) -> None:
    """Decoded payloads on the Arrow path are exactly the plain path's, row by row."""
    import sqlalchemy as sa

    from pi_notebook.audit import frames
    from pi_notebook.readers.protocol import arrow_available

    if not arrow_available("sqlite"):
        pytest.skip("no pyarrow/ADBC SQLite")
    with AuditLog(f"sqlite:///{tmp_path / 'audit.sqlite'}", session_id="p") as log:
        for i in range(len(texts)):
            log.record("note", {"i": i})
        log.flush()
        with log.engine.begin() as conn:
            for seq, text in enumerate(texts, start=1):
                conn.execute(
                    sa.text("UPDATE pi_audit_records SET payload = :p WHERE seq = :s"),
                    {"p": text, "s": seq},
                )
        monkeypatch.setattr(frames, "SQLITE_ARROW_MIN_RECORDS", 0)
        arrow = log.to_dataframe()["payload"].tolist()
        monkeypatch.setattr(frames, "SQLITE_ARROW_MIN_RECORDS", 10**12)
        plain = log.to_dataframe()["payload"].tolist()
    expected = [frames.decode_payloads(pd.DataFrame({"payload": [t]}))["payload"][0] for t in texts]
    assert arrow == plain == expected
    assert len(arrow) == len(texts)
