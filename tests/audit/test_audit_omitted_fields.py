"""A record's optional fields (``omitted_at_default``) are left out of its payload while they
hold their default, and written when set: the stored payload text is exactly the text written
before the rule was one declaration on the base (the chain hashes that text, so a changed byte
would break every verification of an older log)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from pi_notebook.audit import AuditLog
from pi_notebook.audit.records import (
    AuditRecord,
    CapabilityMismatch,
    FinalArgs,
    NotebookOutput,
    ToolExecutionEnd,
    ToolExecutionStart,
    WritePreviewRecord,
)

CASES: list[tuple[AuditRecord, str]] = [
    (
        FinalArgs(sql="SELECT 1", args_hash="h", verdict="read"),
        '{"args_hash":"h","dialect":"","reasons":[],"sql":"SELECT 1","verdict":"read"}',
    ),
    (
        FinalArgs(sql="SELECT 1", args_hash="h", verdict="read", db_role="ann"),
        '{"args_hash":"h","db_role":"ann","dialect":"","reasons":[],"sql":"SELECT 1",'
        '"verdict":"read"}',
    ),
    (
        CapabilityMismatch(approved_hash=None, final_hash="f", reason="none"),
        '{"approved_hash":null,"final_hash":"f","reason":"none"}',
    ),
    (
        CapabilityMismatch(sql="DELETE FROM t", approved_hash="a", final_hash="f", reason="x"),
        '{"approved_hash":"a","final_hash":"f","reason":"x","sql":"DELETE FROM t"}',
    ),
    (
        WritePreviewRecord(sql="DELETE FROM t", args_hash="h", operation=None, phase="start"),
        '{"affected_rows":null,"args_hash":"h","error":null,"method":null,"note":null,'
        '"operation":null,"phase":"start","sql":"DELETE FROM t"}',
    ),
    (
        WritePreviewRecord(
            sql="DELETE FROM t", args_hash="h", operation="DELETE", phase="start", db_role="r"
        ),
        '{"affected_rows":null,"args_hash":"h","db_role":"r","error":null,"method":null,'
        '"note":null,"operation":"DELETE","phase":"start","sql":"DELETE FROM t"}',
    ),
    (ToolExecutionStart(args={"sql": "SELECT 1"}), '{"args":{"sql":"SELECT 1"}}'),
    (
        ToolExecutionStart(args={"sql": "SELECT 1"}, code_argument="sql"),
        '{"args":{"sql":"SELECT 1"},"code_argument":"sql"}',
    ),
    (
        ToolExecutionStart(args={}, code="SELECT 1"),
        '{"args":{},"code":"SELECT 1"}',
    ),
    (
        ToolExecutionEnd(duration_ms=2.0),
        '{"duration_ms":2.0,"is_error":false,"result":{}}',
    ),
    (
        ToolExecutionEnd(duration_ms=2.0, updates=3, last_update={"rows": 1}),
        '{"duration_ms":2.0,"is_error":false,"last_update":{"rows":1},"result":{},"updates":3}',
    ),
    (
        NotebookOutput(run_id="r", output_digest="d"),
        '{"calls":[],"output_digest":"d","run_id":"r"}',
    ),
    (
        NotebookOutput(run_id="r", output_digest="d", prompt_digest="p"),
        '{"calls":[],"output_digest":"d","prompt_digest":"p","run_id":"r"}',
    ),
]


async def test_stored_payload_text_is_unchanged_with_the_field_unset_and_set(
    tmp_path: Path,
) -> None:
    path = tmp_path / "a.db"
    log = AuditLog(f"sqlite:///{path}")
    try:
        for record, _ in CASES:
            await log.commit(record)
    finally:
        log.close()
    with sqlite3.connect(path) as db:
        stored = db.execute("SELECT kind, payload FROM pi_audit_records ORDER BY id").fetchall()
    assert stored == [(record.kind, text) for record, text in CASES]


def test_payload_keeps_field_order_and_leaves_out_only_what_holds_its_default() -> None:
    end = ToolExecutionEnd(is_error=True, updates=0, last_update={})
    assert list(end.payload()) == ["is_error", "duration_ms", "result", "last_update"]
    start = ToolExecutionStart(args=None, code_argument="sql", code=None)
    assert start.payload() == {"args": None, "code_argument": "sql"}


def test_a_name_that_is_no_field_with_a_default_is_refused() -> None:
    @dataclass(frozen=True, kw_only=True)
    class Misnamed(AuditRecord):
        kind: ClassVar[str] = "misnamed"
        text: str
        omitted_at_default: ClassVar[tuple[str, ...]] = ("text",)

    with pytest.raises(TypeError, match="'text' has no default"):
        Misnamed(text="x").payload()
