"""The event recorder (D8, S27, S28): the exact records a call leaves, through a fake ``pi``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace as NS
from typing import Any

import pytest
from audit_support import FakePi, snapshot
from pydantic import BaseModel

from pi_notebook.audit import AuditLog, audit_extension
from pi_notebook.audit import recorder as recorder_module
from pi_notebook.database import call_views


class QueryParams(BaseModel):
    sql: str
    limit: int = 100


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(recorder_module, "_clock", fake)
    return fake


@pytest.fixture
def log(tmp_path: Path) -> Iterator[AuditLog]:
    # Its summaries show the database tool's calls as that tool describes them.
    audit = AuditLog(
        f"sqlite:///{tmp_path / 'audit.sqlite'}", session_id="s1", user="ada", call_views=call_views
    )
    yield audit
    audit.close()


@pytest.fixture
def pi(log: AuditLog) -> FakePi:
    fake = FakePi()
    audit_extension(log)(fake)
    return fake


def result(text: str, details: Any = None) -> NS:
    return NS(content=[NS(type="text", text=text)], details=details)


def start(call_id: str, tool: str, args: Any) -> NS:
    return NS(type="tool_execution_start", tool_call_id=call_id, tool_name=tool, args=args)


def test_d8_registers_every_event_and_the_error_listener(pi: FakePi) -> None:
    assert sorted(pi.handlers) == sorted(
        [
            "session_start",
            "tool_execution_start",
            "tool_execution_update",
            "tool_result",
            "tool_execution_end",
            "session_shutdown",
        ]
    )
    assert len(pi.error_handlers) == 1


def test_d8_s27_s28_exact_records_of_a_read_call(pi: FakePi, log: AuditLog, clock: Clock) -> None:
    pi.emit(NS(type="session_start", model="scripted"))
    # Raw args from before preparation: a string limit, validated into an int later (S28).
    pi.emit(start("c1", "query_database", {"sql": "SELECT 1", "limit": "5"}))
    params = QueryParams(sql="SELECT 1", limit=5)
    pi.emit(NS(type="tool_call", tool_call_id="c1", tool_name="query_database", input=params))
    params.sql = "SELECT 2"  # a later handler mutates the input: the record keeps what it saw
    log.record(
        "final_args",
        {"sql": "SELECT 2", "args_hash": "h2"},
        tool_call_id="c1",
        tool_name="query_database",
        policy_version="p1",
        durable=True,
    )
    clock.now += 0.1
    pi.emit(
        NS(
            type="tool_execution_update",
            tool_call_id="c1",
            tool_name="query_database",
            partial_result=result("running"),
        )
    )
    clock.now += 0.15
    returned = result("1 row", {"rows": 1})
    pi.emit(
        NS(
            type="tool_result",
            tool_call_id="c1",
            tool_name="query_database",
            input=params,
            content=list(returned.content),
            details=returned.details,
            is_error=False,
        )
    )
    # No handler changed the result: the end record holds it, no tool_result record.
    pi.emit(
        NS(
            type="tool_execution_end",
            tool_call_id="c1",
            tool_name="query_database",
            result=returned,
            is_error=False,
        )
    )
    pi.emit(NS(type="session_shutdown"))

    assert snapshot(log) == [
        (
            "session_start",
            None,
            None,
            {"model": "scripted", "active_tools": ["read", "query_database"]},
        ),
        (
            "tool_execution_start",
            "c1",
            "query_database",
            # the argument the tool shows as code, for readers without the tool
            {"args": {"sql": "SELECT 1", "limit": "5"}, "code_argument": "sql"},
        ),
        ("final_args", "c1", "query_database", {"sql": "SELECT 2", "args_hash": "h2"}),
        # The update came 0.1 s after the start and the call ended 0.15 s later, within the
        # update interval: it is kept in the end record, not as a record of its own.
        (
            "tool_execution_end",
            "c1",
            "query_database",
            {
                "is_error": False,
                "duration_ms": "<ms>",
                "result": {"text": "1 row", "text_chars": 5, "details": {"rows": 1}},
                "updates": 1,
                "last_update": {"text": "running", "text_chars": 7},
            },
        ),
        ("session_shutdown", None, None, {"open_calls": []}),
    ]
    frame = log.to_dataframe(kind="tool_execution_end")
    assert frame["payload"].iloc[0]["duration_ms"] == pytest.approx(250.0)
    assert log.to_dataframe(kind="final_args")["policy_version"].tolist() == ["p1"]
    assert set(log.to_dataframe()["user"]) == {"ada"}
    assert log.verify().ok


def test_d8_exact_records_of_an_execute_error(pi: FakePi, log: AuditLog, clock: Clock) -> None:
    pi.emit(start("c2", "query_database", {"sql": "SELECT * FROM nope"}))
    pi.emit(
        NS(
            type="tool_call",
            tool_call_id="c2",
            tool_name="query_database",
            input=QueryParams(sql="SELECT * FROM nope"),
        )
    )
    clock.now += 0.004
    # execute raised: no tool_result event, an error result at the end (S30).
    pi.emit(
        NS(
            type="tool_execution_end",
            tool_call_id="c2",
            tool_name="query_database",
            result=result("no such table: nope", None),
            is_error=True,
        )
    )
    pi.error(
        {
            "extension_path": "extensions/broken.py",
            "event": "tool_execution_end",
            "error": RuntimeError("handler broke"),
        }
    )

    assert snapshot(log) == [
        (
            "tool_execution_start",
            "c2",
            "query_database",
            {"args": {"sql": "SELECT * FROM nope"}, "code_argument": "sql"},
        ),
        (
            "tool_execution_end",
            "c2",
            "query_database",
            {
                "is_error": True,
                "duration_ms": "<ms>",
                "result": {"text": "no such table: nope", "text_chars": 19},
            },
        ),
        (
            "extension_error",
            None,
            None,
            {
                "extension_path": "extensions/broken.py",
                "event": "tool_execution_end",
                "error": {"_type": "exception", "type": "RuntimeError", "message": "handler broke"},
            },
        ),
    ]
    calls = log.calls_dataframe()
    row = calls.astype(object).where(calls.notna(), None).to_dict("records")[0]
    assert row | {"started_at": None, "ended_at": None} == {
        "session_id": "s1",
        "sql": "SELECT * FROM nope",
        "rows": None,
        "approval_wait_ms": None,
        "execution_ms": 4.0,
        "tool_call_id": "c2",
        "tool_name": "query_database",
        "args_hash": None,
        "decision": None,
        "outcome": "error",
        "is_error": True,
        "duration_ms": 4.0,
        "started_at": None,
        "ended_at": None,
    }


def test_d8_updates_are_recorded_once_per_second_while_the_call_runs_and_the_last_at_its_end(
    pi: FakePi, log: AuditLog, clock: Clock
) -> None:
    pi.emit(start("c3", "slow", {}))
    for i in range(25):  # 25 updates, 0.1 s apart: 2.4 s in all
        pi.emit(
            NS(
                type="tool_execution_update",
                tool_call_id="c3",
                tool_name="slow",
                partial_result=result(f"step {i}"),
            )
        )
        clock.now += 0.1
    pi.emit(
        NS(
            type="tool_execution_end",
            tool_call_id="c3",
            tool_name="slow",
            result=result("done"),
            is_error=False,
        )
    )
    updates = [p for kind, _, _, p in snapshot(log) if kind == "tool_execution_update"]
    # None in the first second (a call that ends sooner has no update record), then one per
    # second; the last one, held back by the interval, is in the end record.
    assert [(u["partial_result"]["text"], u["update"], u["skipped_before"]) for u in updates] == [
        ("step 10", 11, 10),
        ("step 20", 21, 9),
    ]
    kinds = [kind for kind, *_ in snapshot(log)]
    assert kinds[-2:] == ["tool_execution_update", "tool_execution_end"]
    end = snapshot(log)[-1][3]
    assert (end["updates"], end["last_update"]["text"]) == (25, "step 24")


def test_d8_a_broken_event_never_raises_into_the_runner(pi: FakePi, log: AuditLog) -> None:
    class Exploding:
        def __getattr__(self, name: str) -> Any:
            raise RuntimeError(name)

    class BadRepr:
        def __repr__(self) -> str:
            raise ValueError("no repr")

    pi.emit(NS(type="tool_execution_start", tool_call_id="c4", tool_name="t", args=BadRepr()))
    for handlers in pi.handlers.values():
        for handler in handlers:
            assert handler(Exploding(), None) is None
    args = snapshot(log)[0][3]["args"]
    assert args["_type"] == f"{__name__}.{BadRepr.__qualname__}"
    assert "BadRepr" in args["repr"]


def test_s29_recorded_events_are_redacted(pi: FakePi, log: AuditLog) -> None:
    pi.emit(
        start(
            "c5",
            "query_database",
            {
                "url": "postgresql://bob:hunter2@db:5432/x",
                "headers": {"Authorization": "Bearer abcdefghijklmnop"},
            },
        )
    )
    (payload,) = [p for *_, p in snapshot(log)]
    assert payload == {
        "args": {"url": "postgresql://bob:***@db:5432/x", "headers": {"Authorization": "***"}}
    }
    assert "hunter2" not in str(log.to_dataframe().to_dict())


def test_d8_a_result_changed_by_a_handler_keeps_what_execute_returned(
    pi: FakePi, log: AuditLog
) -> None:
    pi.emit(start("c6", "query_database", {"sql": "SELECT 1"}))
    returned = result("raw rows", {"rows": 1})
    pi.emit(
        NS(
            type="tool_result",
            tool_call_id="c6",
            tool_name="query_database",
            input=QueryParams(sql="SELECT 1"),
            content=list(returned.content),
            details=returned.details,
            is_error=False,
        )
    )
    patched = NS(content=[NS(type="text", text="[withheld]")], details=returned.details)
    pi.emit(
        NS(
            type="tool_execution_end",
            tool_call_id="c6",
            tool_name="query_database",
            result=patched,
            is_error=False,
        )
    )
    kinds = [(kind, payload.get("result", {}).get("text")) for kind, _, _, payload in snapshot(log)]
    assert kinds == [
        ("tool_execution_start", None),
        ("tool_result", "raw rows"),
        ("tool_execution_end", "[withheld]"),
    ]


def test_an_image_is_summarised_by_type_and_size_never_its_data() -> None:
    from pi_notebook import ImageContent, TextContent, ToolResult

    data = "iVBORw0KGgo" + "A" * 4000  # base64 of about 3 kB
    shot = ToolResult(
        content=[TextContent(text="a chart"), ImageContent(data=data, mime_type="image/png")],
        details={"server": "toy"},
    )
    summary = recorder_module.summarise_result(shot)
    assert summary == {
        "text": "a chart",
        "text_chars": 7,
        "images": [{"mime_type": "image/png", "bytes": len(data) * 3 // 4}],
        "details": {"server": "toy"},
    }
    as_dict = recorder_module.summarise_result(
        {"content": [{"type": "image", "data": "AAAA", "mime_type": "image/gif"}]}
    )
    assert as_dict["images"] == [{"mime_type": "image/gif", "bytes": 3}]
    assert data not in repr(summary)
