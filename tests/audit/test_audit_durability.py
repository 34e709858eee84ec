"""Durability and concurrency: durable records, retries, a killed writer, four writers at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from audit_support import fresh_pg

from pi_notebook.audit import AuditLog, default_audit_url
from pi_notebook.audit.schema import ensure_schema
from pi_notebook.errors import AuditUnavailableError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'audit.sqlite'}"
    else:
        with fresh_pg(request.getfixturevalue("pg_url")) as pg:
            yield pg


def count(url: str, session_id: str) -> int:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(
                sa.text("SELECT count(*) FROM pi_audit_records WHERE session_id = :s"),
                {"s": session_id},
            ).scalar_one()
    finally:
        engine.dispose()


def test_d8_durable_record_is_committed_before_it_returns(url: str) -> None:
    with AuditLog(url, session_id="d1") as log:
        for i in range(2000):
            log.record("tool_execution_update", {"i": i})
        log.record("approval", {"decision": "approved"}, durable=True)
        # Seen from a second engine: the approval and everything queued before it.
        assert count(url, "d1") == 2001
        for i in range(10):
            log.record("tool_execution_update", {"i": i})
        log.flush()
        assert count(url, "d1") == 2011


def test_default_store_is_a_wal_sqlite_file_in_the_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = Path(os.environ["PI_NOTEBOOK_DATA_DIR"])
    assert default_audit_url() == f"sqlite:///{data / 'audit.sqlite'}"
    with AuditLog() as log:
        log.record("x", {}, durable=True)
        assert (data / "audit.sqlite").exists()
        with log.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert len(log.session_id) == 32 and log.user
    monkeypatch.setenv("PI_NOTEBOOK_AUDIT_URL", f"sqlite:///{tmp_path / 'env.sqlite'}")
    with AuditLog() as log:
        log.record("x", {}, durable=True)
    assert (tmp_path / "env.sqlite").exists()


def test_close_is_idempotent_and_stops_the_writer(tmp_path: Path) -> None:
    log = AuditLog(f"sqlite:///{tmp_path / 'a.sqlite'}")
    log.record("x", {})
    log.close()
    log.close()
    log.record("after close", {})  # logged and dropped, never raised
    assert not [
        t
        for t in threading.enumerate()
        if t.name.startswith("pi-audit-") and t.name.endswith(log.session_id[:8])
    ]


def test_a_record_racing_close_is_refused_loudly_not_lost_silently(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = AuditLog(f"sqlite:///{tmp_path / 'a.sqlite'}", session_id="race")
    log._writer.close()  # pyright: ignore[reportPrivateUsage]  # close() overtakes a record()
    log.record("late", {})  # past the closed check, but the writer has stopped: never raised
    assert "record('late') failed" in caplog.text and "is closed" in caplog.text
    log.close()


def test_d8_a_failing_store_raises_for_durable_records_and_keeps_records_for_retry(
    tmp_path: Path,
) -> None:
    with AuditLog(
        f"sqlite:///{tmp_path / 'a.sqlite'}", session_id="r1", durable_timeout_s=0.3
    ) as log:
        log.record("before", {}, durable=True)
        with log.engine.begin() as conn:
            conn.exec_driver_sql("DROP TABLE pi_audit_records")
        log.record("queued while broken", {"n": 0})  # never raises
        started = time.monotonic()
        with pytest.raises(AuditUnavailableError, match=r"within 0\.3 s"):
            log.record("while broken", {"n": 1}, durable=True)
        assert time.monotonic() - started < 2
        assert log.last_error is not None
        ensure_schema(log.engine)  # the store comes back
        assert log.flush()
        frame = log.to_dataframe()
        # The old rows went with the table; the queued ones were written once it returned.
        assert frame["kind"].tolist() == ["queued while broken", "while broken"]
        assert frame["seq"].tolist() == [2, 3]


CRASH_CHILD = """
import sys
from pi_notebook.audit import AuditLog
log = AuditLog(sys.argv[1], session_id="crash")
i = 0
while True:
    i += 1
    durable = i % 25 == 0
    log.record("tick", {"i": i, "pad": "x" * 300}, durable=durable)
    if durable:
        print(i, flush=True)
"""


def test_d8_killed_writer_keeps_every_acknowledged_record(url: str) -> None:
    AuditLog(url).close()  # schema first, so the child starts writing at once
    child = subprocess.Popen(
        [sys.executable, "-c", CRASH_CHILD, url], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    acked = 0
    try:
        assert child.stdout is not None
        deadline = time.monotonic() + 30
        while acked < 1500 and time.monotonic() < deadline:
            line = child.stdout.readline()
            if not line:
                break
            acked = int(line)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    assert child.returncode == -signal.SIGKILL and acked >= 100
    with AuditLog(url) as log:
        frame = log.to_dataframe(session="crash")
        report = log.verify()
    seqs = frame["seq"].tolist()
    assert len(seqs) >= acked and seqs == list(range(1, len(seqs) + 1))
    assert [p["i"] for p in frame["payload"]] == seqs
    assert report.ok, report.problems


WRITER_CHILD = """
import sys
from pi_notebook.audit import AuditLog
with AuditLog(sys.argv[1]) as log:
    for i in range(1000):
        log.record("tool_call", {"i": i}, tool_call_id=f"c{i}", tool_name="t",
                   durable=(i % 100 == 99))
    print(log.session_id)
"""


@pytest.mark.postgres
def test_d8_four_processes_share_one_postgres_store(pg_url: str) -> None:
    with fresh_pg(pg_url) as url:
        started = time.monotonic()
        children = [
            subprocess.Popen(
                [sys.executable, "-c", WRITER_CHILD, url],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(4)
        ]
        sessions = []
        for child in children:
            out, _ = child.communicate(timeout=60)
            assert child.returncode == 0
            sessions.append(out.strip())
        elapsed = time.monotonic() - started
        with AuditLog(url) as log:
            report = log.verify()
            frame = log.to_dataframe()
        assert report.ok, report.problems
        assert (report.sessions, report.records) == (4, 4000)
        assert sorted(frame.groupby("session_id")["seq"].max().items()) == sorted(
            (s, 1000) for s in sessions
        )
        assert elapsed < 20


EXIT_CHILD = """
import sys
from pi_notebook.audit import AuditLog
log = AuditLog(sys.argv[1], session_id="exits")
for i in range(500):
    log.record("tick", {"i": i})
# no flush, no close: the atexit hook writes the queue
"""


def test_d8_queued_records_are_flushed_at_interpreter_exit(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.sqlite'}"
    subprocess.run([sys.executable, "-c", EXIT_CHILD, url], cwd=ROOT, check=True, timeout=60)
    assert count(url, "exits") == 500
