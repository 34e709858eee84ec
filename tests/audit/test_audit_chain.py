"""Integrity (D8, D11): tampering with the store directly is found by ``verify()``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from audit_support import fresh_pg

from pi_notebook.audit import AuditLog
from pi_notebook.audit.chain import format_ts, record_hash
from pi_notebook.audit.schema import records


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'audit.sqlite'}"
    else:
        with fresh_pg(request.getfixturevalue("pg_url")) as pg:
            yield pg


@pytest.fixture
def log(url: str) -> Iterator[AuditLog]:
    audit = AuditLog(url, session_id="victim", user="ada")
    for i in range(1, 6):
        audit.record("tool_call", {"i": i}, tool_call_id=f"c{i}", tool_name="t")
    other = AuditLog(url, session_id="bystander")
    other.record("session_start", {"model": "m"})
    other.close()
    audit.flush()  # the tests below go to the store directly
    yield audit
    audit.close()


def run(log: AuditLog, statement: str, **params: object) -> None:
    with log.engine.begin() as conn:
        conn.execute(sa.text(statement), params)


def test_d8_an_untouched_store_verifies(log: AuditLog) -> None:
    report = log.verify()
    assert report.ok and report.problems == []
    assert (report.sessions, report.records) == (2, 6)
    assert log.verify(session_id="victim").records == 5


def test_d8_altered_payload_is_named(log: AuditLog) -> None:
    run(
        log,
        "UPDATE pi_audit_records SET payload = :p WHERE session_id = 'victim' AND seq = 3",
        p='{"i":333}',
    )
    report = log.verify()
    assert not report.ok
    assert report.problems[0].startswith("session victim seq 3: altered")
    assert len(report.problems) == 1


def test_d8_altered_and_rehashed_record_is_named(log: AuditLog) -> None:
    # A forger who knows the algorithm re-hashes the record; the next link still breaks.
    with log.engine.connect() as conn:
        row = conn.execute(
            sa.select(records).where(records.c.session_id == "victim", records.c.seq == 2)
        ).one()
    forged = record_hash(
        session_id="victim",
        seq=2,
        ts=format_ts(row.ts),
        kind=row.kind,
        tool_call_id=row.tool_call_id,
        tool_name=row.tool_name,
        user=row.user,
        policy_version=row.policy_version,
        payload='{"i":222}',
        prev_hash=row.prev_hash,
    )
    run(
        log,
        "UPDATE pi_audit_records SET payload = :p, hash = :h "
        "WHERE session_id = 'victim' AND seq = 2",
        p='{"i":222}',
        h=forged,
    )
    assert log.verify().problems[0].startswith("session victim seq 2: altered")


def test_d8_removed_middle_record_is_named(log: AuditLog) -> None:
    run(log, "DELETE FROM pi_audit_records WHERE session_id = 'victim' AND seq = 3")
    report = log.verify()
    assert report.problems[0].startswith("session victim seq 3: removed")
    assert len(report.problems) == 1


def test_d11_removed_last_record_is_named(log: AuditLog) -> None:
    run(log, "DELETE FROM pi_audit_records WHERE session_id = 'victim' AND seq = 5")
    report = log.verify()
    assert report.problems == [
        "session victim seq 5: removed (the head records 5 records, the store ends at seq 4)"
    ]


def test_d11_removed_whole_session_is_named(log: AuditLog) -> None:
    run(log, "DELETE FROM pi_audit_records WHERE session_id = 'bystander'")
    assert log.verify().problems[0].startswith("session bystander seq 1: removed")


@pytest.mark.parametrize("valid_hash", [False, True])
def test_d8_inserted_forged_row_is_named(log: AuditLog, valid_hash: bool) -> None:
    with log.engine.connect() as conn:
        last = conn.execute(
            sa.select(records).where(records.c.session_id == "victim", records.c.seq == 5)
        ).one()
    ts = last.ts
    digest = (
        record_hash(
            session_id="victim",
            seq=6,
            ts=format_ts(ts),
            kind="approval",
            tool_call_id="c9",
            tool_name="t",
            user="ada",
            policy_version=None,
            payload='{"decision":"approved"}',
            prev_hash=last.hash,
        )
        if valid_hash
        else "f" * 64
    )
    with log.engine.begin() as conn:
        conn.execute(
            sa.insert(records).values(
                session_id="victim",
                seq=6,
                ts=ts,
                kind="approval",
                tool_call_id="c9",
                tool_name="t",
                user="ada",
                policy_version=None,
                payload='{"decision":"approved"}',
                prev_hash=last.hash,
                hash=digest,
            )
        )
    report = log.verify()
    assert report.problems[0].startswith("session victim seq 6: inserted")


def test_d8_forged_session_is_named(log: AuditLog) -> None:
    with log.engine.begin() as conn:
        conn.execute(
            sa.insert(records).values(
                session_id="ghost",
                seq=1,
                ts=sa.func.current_timestamp(),
                kind="approval",
                payload="{}",
                prev_hash="0" * 64,
                hash="0" * 64,
            )
        )
    assert log.verify().problems[0].startswith("session ghost seq 1: inserted")


def test_d8_verify_checks_every_session_by_default(log: AuditLog) -> None:
    run(log, "UPDATE pi_audit_records SET kind = 'x' WHERE session_id = 'bystander'")
    assert not log.verify().ok
    assert log.verify(session_id="victim").ok


@pytest.mark.parametrize("make_id", [lambda: "resumed"])
def test_d8_a_resumed_session_continues_its_chain(url: str, make_id: Callable[[], str]) -> None:
    with AuditLog(url, session_id=make_id()) as first:
        first.record("a", {})
    with AuditLog(url, session_id=make_id()) as second:
        second.record("b", {})
        frame = second.to_dataframe(session=make_id())
        assert frame["seq"].tolist() == [1, 2]
        assert second.verify().ok


def test_schema_version_is_recorded_and_a_newer_store_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'v.sqlite'}"
    with AuditLog(url) as log:
        with log.engine.begin() as conn:
            assert conn.exec_driver_sql("SELECT version FROM pi_audit_schema").scalar() == 1
            conn.exec_driver_sql("UPDATE pi_audit_schema SET version = 99")
    with pytest.raises(RuntimeError, match="schema version 99"):
        AuditLog(url)


def test_d8_garbage_payload_rows_do_not_break_reading(log: AuditLog) -> None:
    run(
        log,
        "UPDATE pi_audit_records SET payload = :p WHERE session_id = 'victim' AND seq = 1",
        p="[1, 2]",
    )
    run(
        log,
        "UPDATE pi_audit_records SET payload = :p WHERE session_id = 'victim' AND seq = 2",
        p="not json",
    )
    payloads = log.to_dataframe(session="victim")["payload"].tolist()
    assert payloads[:3] == [{"_not_an_object": [1, 2]}, {"_invalid_json": "not json"}, {"i": 3}]
    assert log.verify().problems[0].startswith("session victim seq 1: altered")


@pytest.mark.parametrize(
    "text",
    ["", "plain", 'quote " and \\ backslash', "é ü 漢", "\u2028\u2029\x00\x1f\n\t", "x" * 500],
)
def test_the_hash_is_sha256_of_the_canonical_json_of_the_fields(text: str) -> None:
    """``record_hash`` spells the canonical JSON out key by key: it must be the very text of
    ``json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False)``."""
    import hashlib
    import json

    from pi_notebook.audit.chain import record_hash

    for nullable in (None, text):
        fields = {
            "session_id": text or "s",
            "seq": 12,
            "ts": "2026-01-01T00:00:00.000000Z",
            "kind": text,
            "tool_call_id": nullable,
            "tool_name": nullable,
            "user": nullable,
            "policy_version": nullable,
            "payload": json.dumps({"t": text}),
            "prev_hash": "0" * 64,
        }
        canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        assert record_hash(**fields) == hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@pytest.mark.parametrize(
    "text",
    ["", "plain", 'quote " and \\ backslash', "é ü 漢", "\u2028\u2029\x00\x1f\n\t", "x" * 500],
)
def test_the_writers_hasher_gives_record_hash_exactly(text: str) -> None:
    """``record_hasher`` (what the writer uses: session and user fixed, the JSON text of kinds
    and names kept) is the very digest of ``record_hash`` for every field value."""
    import json

    from pi_notebook.audit.chain import record_hasher

    for session_id, user in ((text or "s", text), ("s", None)):
        hasher = record_hasher(session_id, user)
        for nullable in (None, text, "call_1"):
            for _ in range(2):  # the second time through its kept JSON texts
                fields = {
                    "seq": 12,
                    "ts": "2026-01-01T00:00:00.000001Z",
                    "kind": text or "k",
                    "tool_call_id": nullable,
                    "tool_name": nullable,
                    "policy_version": nullable,
                    "payload": json.dumps({"t": text}),
                    "prev_hash": "0" * 64,
                }
                assert hasher(*fields.values()) == record_hash(
                    session_id=session_id, user=user, **fields
                )


@pytest.mark.parametrize("micro", [0, 1, 999_999])
def test_format_ts_is_the_canonical_text(micro: int) -> None:
    ts = dt.datetime(2026, 1, 2, 3, 4, 5, micro, tzinfo=dt.UTC)
    expected = f"2026-01-02T03:04:05.{micro:06d}Z"
    assert format_ts(ts) == expected
    assert format_ts(ts.replace(tzinfo=None)) == expected
    east = dt.timezone(dt.timedelta(hours=2))
    assert format_ts(ts.astimezone(east)) == expected
