"""One bad record never stops the writer, on SQLite and PostgreSQL.

Awkward values (lone surrogates, NUL, ids longer than their column) are made storable before
they are queued; a record the store still refuses is isolated by bisecting its batch and
replaced by an ``audit_record_rejected`` stub, so the rest commits, and a durable waiter for it
gets ``AuditUnavailableError``.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from audit_support import fresh_pg

from pi_notebook.audit import AuditLog
from pi_notebook.errors import AuditUnavailableError


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'audit.sqlite'}"
    else:
        with fresh_pg(request.getfixturevalue("pg_url")) as pg:
            yield pg


def ten_good(log: AuditLog) -> None:
    for i in range(10):
        log.record("good", {"i": i}, tool_call_id=f"g{i}", tool_name="t")


AWKWARD: list[tuple[str, dict[str, Any]]] = [
    ("surrogate in args", {"payload": {"sql": "SELECT '\ud800'"}}),
    ("surrogate in call id", {"tool_call_id": "call-\udc80"}),
    ("call id longer than its column", {"tool_call_id": "c" * 300}),
    ("tool name longer than its column", {"tool_name": "t" * 300}),
    ("NUL in tool name", {"tool_name": "bad\x00name"}),
    ("kind longer than its column", {"kind": "k" * 100}),
]


@pytest.mark.parametrize("case", AWKWARD, ids=[name for name, _ in AWKWARD])
def test_an_awkward_record_and_ten_good_ones_are_all_stored(
    url: str, case: tuple[str, dict[str, Any]]
) -> None:
    _, fields = case
    with AuditLog(url, session_id="p1", durable_timeout_s=2) as log:
        log.record(
            fields.get("kind", "tool_execution_start"),
            fields.get("payload", {"args": {}}),
            tool_call_id=fields.get("tool_call_id", "call-1"),
            tool_name=fields.get("tool_name", "query_database"),
        )
        ten_good(log)
        log.record("last", {}, durable=True)  # raises if anything before it is stuck
        frame = log.to_dataframe()
        assert len(frame) == 12 and frame["kind"].iloc[1:].tolist() == ["good"] * 10 + ["last"]
        first = frame.iloc[0]
        for column in ("kind", "tool_call_id", "tool_name"):
            assert len(first[column]) <= (64 if column == "kind" else 255)
            assert "\x00" not in first[column]
            first[column].encode("utf-8")  # valid text
        if "payload" in fields:
            assert first["payload"] == {"sql": "SELECT '\ud800'"}  # escaped, not lost
        if len(str(fields.get("tool_call_id", ""))) > 255:
            assert first["payload"]["_cut_fields"] == {"tool_call_id": 300}
            assert first["tool_call_id"].startswith("c" * 200)
        assert log.verify().ok


def test_a_cut_id_stays_distinct_and_stable(tmp_path: Path) -> None:
    with AuditLog(f"sqlite:///{tmp_path / 'a.sqlite'}") as log:
        for suffix in ("a", "b", "a"):
            log.record("x", {}, tool_call_id="c" * 300 + suffix)
        ids = log.to_dataframe()["tool_call_id"].tolist()
    assert ids[0] == ids[2] != ids[1] and len(ids[0]) == 255


def poison(log: AuditLog, *, durable: bool) -> int:
    """Queue a record the store cannot take, past the encoder (as a bug there would)."""
    return log._writer.submit(  # pyright: ignore[reportPrivateUsage]
        dt.datetime.now(dt.UTC),
        "approval",
        "call-p",
        "query_database",
        None,
        json.dumps({"sql": "SELECT '\ud800'"}, ensure_ascii=False),
        durable,
    )


def test_a_poison_record_is_replaced_and_the_ten_after_it_are_stored(url: str) -> None:
    with AuditLog(url, session_id="p2", durable_timeout_s=5) as log:
        log.record("first", {}, durable=True)
        ticket = poison(log, durable=True)
        ten_good(log)
        with pytest.raises(AuditUnavailableError, match="refused the 'approval' record"):
            log._writer.outcome(ticket, 5)  # pyright: ignore[reportPrivateUsage]
        log.record("after", {}, durable=True)
        frame = log.to_dataframe()
        kinds = frame["kind"].tolist()
        assert kinds == ["first", "audit_record_rejected"] + ["good"] * 10 + ["after"]
        stub = frame["payload"].iloc[1]
        assert stub["rejected_kind"] == "approval" and stub["payload_chars"] > 0
        assert "\\ud800" in stub["payload_preview"]
        assert frame["tool_call_id"].iloc[1] == "call-p"
        assert log.verify().ok


async def test_a_durable_poison_record_raises_through_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with AuditLog(f"sqlite:///{tmp_path / 'a.sqlite'}", durable_timeout_s=5) as log:
        # A payload the encoder let through unescaped (as a bug there would).
        monkeypatch.setattr(log, "_payload_text", lambda payload: '{"sql":"\ud800"}')
        with pytest.raises(AuditUnavailableError, match="refused"):
            await log.commit("final_args", {"sql": "x"}, tool_call_id="c1")
        with pytest.raises(AuditUnavailableError, match="refused"):
            log.record("approval", {"sql": "x"}, tool_call_id="c2", durable=True)
        monkeypatch.undo()
        log.record("later", {}, durable=True)
        assert log.to_dataframe()["kind"].tolist() == [
            "audit_record_rejected",
            "audit_record_rejected",
            "later",
        ]


def test_a_store_error_is_retried_not_bisected_away(tmp_path: Path) -> None:
    path = tmp_path / "a.sqlite"
    with AuditLog(f"sqlite:///{path}", durable_timeout_s=0.5) as log:
        log.record("first", {}, durable=True)
        engine = sa.create_engine(f"sqlite:///{path}")
        with engine.begin() as conn:
            conn.exec_driver_sql("ALTER TABLE pi_audit_records RENAME TO hidden")
        ten_good(log)
        with pytest.raises(AuditUnavailableError):
            log.record("durable", {}, durable=True)
        with engine.begin() as conn:
            conn.exec_driver_sql("ALTER TABLE hidden RENAME TO pi_audit_records")
        engine.dispose()
        assert log.flush(10)
        kinds = log.to_dataframe()["kind"].tolist()
        # Nothing was replaced by a stub: the store was the problem, not the records.
        assert kinds == ["first"] + ["good"] * 10 + ["durable"]
        assert log.verify().ok


def test_a_poison_record_in_a_large_batch_is_isolated(url: str) -> None:
    """Large batches go in as multi-row INSERTs on SQLite: one poison record among them
    still costs only itself, and every record keeps its place in the chain."""
    with AuditLog(url, session_id="p3", durable_timeout_s=10, linger_s=1.0) as log:
        log.record("first", {}, durable=True)
        for i in range(1500):
            log.record("good", {"i": i}, tool_call_id=f"g{i}", tool_name="t")
        ticket = poison(log, durable=True)
        for i in range(37):
            log.record("good", {"i": 1500 + i}, tool_call_id=f"h{i}", tool_name="t")
        with pytest.raises(AuditUnavailableError, match="refused the 'approval' record"):
            log._writer.outcome(ticket, 10)  # pyright: ignore[reportPrivateUsage]
        assert log.flush()
        frame = log.to_dataframe()
        kinds = frame["kind"].tolist()
        assert kinds == ["first"] + ["good"] * 1500 + ["audit_record_rejected"] + ["good"] * 37
        assert [p["i"] for p in frame["payload"].iloc[1:1501]] == list(range(1500))
        assert frame["seq"].tolist() == list(range(1, 1540))
        assert log.verify().ok
