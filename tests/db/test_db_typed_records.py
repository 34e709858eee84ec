"""Typed audit records: every record the backend writes is one of the typed
kinds in ``pi_notebook.audit.records``, with exactly that class's payload fields (a field
that only some deployments fill, the PostgreSQL role, is left out when it is ``None``)."""

from __future__ import annotations

import dataclasses

import pytest
from dbtest_support import FakeAudit

from pi_notebook.audit import records
from pi_notebook.sql.backend import DatabaseBackend, QueryError, QueryRefused, query_args_hash

OMITTED_WHEN_NONE = {"final_args": {"db_role"}, "write_preview": {"db_role"}}


def _typed_kinds() -> dict[str, set[str]]:
    ids = {"tool_call_id", "tool_name", "policy_version"}
    kinds: dict[str, set[str]] = {}
    for name in records.__all__:
        cls = getattr(records, name)
        if isinstance(cls, type) and issubclass(cls, records.AuditRecord) and cls.kind:
            kinds[cls.kind] = {f.name for f in dataclasses.fields(cls)} - ids
    return kinds


async def test_every_backend_record_is_typed() -> None:
    audit = FakeAudit()
    backend = DatabaseBackend("sqlite://", audit=audit)
    try:
        with pytest.raises(QueryRefused):
            await backend.run("c0", "CREATE TABLE t (a INTEGER)")  # no capability: refused
        with pytest.raises(QueryRefused):
            await backend.run("c1", "SELECT 1; SELECT 2")  # stacked: refused outright
        await backend.run("r1", "SELECT 1 AS one")
        with pytest.raises(QueryError):
            await backend.run("r2", "SELECT * FROM missing_table")
        ddl = "CREATE TABLE t (a INTEGER)"
        backend.capabilities.grant("w0", query_args_hash(ddl, backend.dialect))
        await backend.run("w0", ddl)
        write = "INSERT INTO t VALUES (1)"
        preview = await backend.preview("w1", write)
        backend.capabilities.grant(
            "w1", query_args_hash(write, backend.dialect), expected_rows=preview.affected_rows
        )
        await backend.run("w1", write)
        drift = "DELETE FROM t"
        backend.capabilities.grant("w2", query_args_hash(drift, backend.dialect), expected_rows=5)
        with pytest.raises(QueryRefused):
            await backend.run("w2", drift)  # 1 row, not the 5 approved: rolled back
    finally:
        backend.dispose()
    typed = _typed_kinds()
    written = {r["kind"] for r in audit.records}
    assert {
        "capability_mismatch",
        "query_refused",
        "final_args",
        "query_result",
        "query_error",
        "write_preview",
        "preview_drift",
    } <= written
    for record in audit.records:
        kind = record["kind"]
        assert kind in typed, f"{kind} has no typed record class"
        optional = OMITTED_WHEN_NONE.get(kind, set())
        assert typed[kind] - optional <= set(record["payload"]) <= typed[kind], kind
