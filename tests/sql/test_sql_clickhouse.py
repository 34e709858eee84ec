"""D1 for ClickHouse: the policy corpus under ``tests/fixtures/sql/clickhouse/``.

Every ordinary read classifies ``read`` and runs on chDB with ``readonly=1`` changing nothing;
no side effect classifies ``read`` (0 false auto-runs), and each one chDB can run is run
through the engine's read path (``readonly=1``, the read's bounds) to show the backstop
stops it too.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pi_notebook.sql import classify

CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "sql" / "clickhouse"
SEPARATOR = "-- ;;"


def load(name: str) -> list[str]:
    """The entries of ``name``: separated by ``-- ;;`` lines, comment lines dropped."""
    entries, current = [], []
    for line in [*(CORPUS / name).read_text(encoding="utf-8").splitlines(), SEPARATOR]:
        if line.strip() != SEPARATOR:
            if not line.startswith("-- "):
                current.append(line)
            continue
        entry = "\n".join(current).strip()
        current = []
        if entry:
            entries.append(entry)
    return entries


READS = load("reads.sql")
SIDE_EFFECTS = load("side_effects.sql")


def test_d1_clickhouse_corpus_sizes() -> None:
    assert len(READS) >= 50 and len(SIDE_EFFECTS) >= 80
    assert len(set(READS)) == len(READS) and len(set(SIDE_EFFECTS)) == len(SIDE_EFFECTS)


def test_d1_every_clickhouse_corpus_read_is_classified_read() -> None:
    refused = {sql: classify(sql, "clickhouse").reasons for sql in READS}
    assert {
        sql: r for sql, r in refused.items() if classify(sql, "clickhouse").kind != "read"
    } == {}


def test_d1_no_clickhouse_side_effect_is_classified_read() -> None:
    false_reads = [sql for sql in SIDE_EFFECTS if classify(sql, "clickhouse").kind == "read"]
    assert false_reads == []


@pytest.mark.parametrize(
    ("sql", "kind"),
    [
        ("SELECT * FROM executable('id', 'TSV', 'a String')", "reject"),
        ("SELECT * FROM Python(df)", "reject"),
        ("SYSTEM SHUTDOWN", "reject"),
        ("KILL QUERY WHERE 1", "reject"),
        ("SELECT 1 INTO OUTFILE '/tmp/x.csv'", "reject"),
        ("INSERT INTO FUNCTION file('/tmp/x.csv') SELECT 1", "reject"),
        ("SELECT 1 FORMAT JSON", "reject"),
        ("SELECT * FROM file('/etc/hostname', 'LineAsString')", "write"),
        ("SELECT * FROM system.users", "write"),
        ("SELECT 1 SETTINGS readonly = 0", "write"),
        ("ALTER TABLE t UPDATE x = 1 WHERE 1", "write"),
        ("OPTIMIZE TABLE t FINAL", "write"),
        ("SELECT groupArray(x) FROM t", "write"),
        ("SELECT groupArray(100)(x) FROM t", "read"),
        ("SELECT range(100000000000)", "write"),
        ("SELECT range(10)", "read"),
        ("SELECT unknownFunction(1)", "write"),
        ("SELECT * FROM system.tables", "read"),
        ("SELECT executable FROM t", "read"),
    ],
)
def test_d1_clickhouse_verdicts(sql: str, kind: str) -> None:
    assert classify(sql, "clickhouse").kind == kind


# -- on the engine: chDB with the tool's own read path (readonly=1 and the read's bounds) -----

SCHEMA = (
    "CREATE TABLE events (ts DateTime, user_id UInt64, kind String, amount Float64, "
    "props String, tags Array(String)) ENGINE = ReplacingMergeTree ORDER BY (user_id, ts)",
    "CREATE TABLE users (id UInt64, name String, country String, signup Date) "
    "ENGINE = MergeTree ORDER BY id",
    "INSERT INTO events SELECT now() - number * 3600, number % 5, "
    "['view', 'purchase', 'signup'][number % 3 + 1], number * 7.5, "
    'concat(\'{"source": "ad", "page": \', toString(number), \'}\'), '
    "if(number % 2 = 0, ['new'], ['old', 'vip']) FROM numbers(50)",
    "INSERT INTO users VALUES (0, 'Ann', 'DE', '2024-01-01'), (1, 'Bob', 'FR', '2024-02-01'), "
    "(2, 'ali', 'DE', '2024-03-01'), (3, 'Bea', 'US', '2024-04-01'), (4, 'Cy', 'DE', '2024-05-01')",
)
STATE = (
    "SELECT (SELECT count() FROM events), (SELECT sum(amount) FROM events), "
    "(SELECT count() FROM users), (SELECT groupArraySorted(100)(name) FROM system.tables "
    "WHERE database = currentDatabase())"
)
CLASSIFIER_ONLY = {
    # Reads of the engine's own catalogue and settings: readonly=1 allows them (the classifier
    # asks: they expose settings, processes, disks, clusters, named collections).
    "SELECT * FROM system.named_collections",
    "SELECT * FROM system.settings",
    "SELECT * FROM system.server_settings",
    "SELECT * FROM system.processes",
    "SELECT * FROM system.disks",
    "SELECT * FROM system.clusters",
    "SELECT * FROM system.macros",
    "SELECT getSetting('readonly')",
    # file() as a scalar reads a host file even with readonly=1: the classifier is the wall.
    "SELECT file('/etc/hostname')",
    # KILL is allowed in readonly mode (it can stop the session's own queries): refused by the
    # classifier.
    "KILL QUERY WHERE 1",
    "KILL MUTATION WHERE 1",
    # A subquery's SETTINGS clause parses but is not applied (verified: getSetting() inside it
    # still reports the session's limits, and the memory limit still stops it).
    "SELECT * FROM (SELECT count() FROM events SETTINGS max_memory_usage = 0)",
    # The tool's DataFrame stream overrides the format; no file is written (checked below).
    "SELECT 1 FORMAT JSON",
    "SELECT * FROM events INTO OUTFILE '/tmp/pi_notebook_chdb_outfile.csv'",
    # Metadata reads readonly=1 allows; the classifier asks (grants, other sessions' queries,
    # settings, a host file's columns).
    "SHOW GRANTS",
    "SHOW PROCESSLIST",
    "SHOW SETTINGS LIKE '%'",
    "DESCRIBE file('/etc/hostname', 'LineAsString')",
    # EXPLAIN runs scalar subqueries while it plans: a read of system.processes.
    "EXPLAIN SYNTAX SELECT (SELECT groupArray(query) FROM system.processes)",
    # Bounded by max_memory_usage, max_result_rows and max_execution_time.
    "SELECT randomString(number) FROM numbers(10)",
    "SELECT groupArray(amount) FROM events",
}
FILES = (
    "/tmp/pi_notebook_chdb_outfile.csv",
    "/tmp/pi_notebook_chdb_insert.csv",
    "/tmp/pi_notebook_chdb_backup",
)


@pytest.fixture(scope="module")
def chdb_backend() -> Iterator[Any]:
    pytest.importorskip("chdb")
    from pi_notebook.sql.engines import create_backend

    backend = create_backend("chdb://", row_cap=1000, statement_timeout_s=3)
    try:
        for sql in SCHEMA:
            asyncio.run(backend._run_as("write", sql))
        yield backend
    finally:
        backend.dispose()


def _state(backend: Any) -> tuple[Any, ...]:
    return tuple(asyncio.run(backend._run_as("read", STATE)).dataframe.iloc[0].map(str))


def test_d1_clickhouse_corpus_reads_run_read_only_on_chdb(chdb_backend: Any) -> None:
    before = _state(chdb_backend)
    failures: dict[str, str] = {}
    for sql in READS:
        try:
            asyncio.run(chdb_backend.run("read", sql))
        except Exception as exc:
            failures[sql] = str(exc)[:200]
    assert failures == {}
    assert _state(chdb_backend) == before


def test_d1_clickhouse_side_effects_forced_as_reads_change_nothing(chdb_backend: Any) -> None:
    """The classifier refuses every side effect; forced past it, the read-only session stops
    each one but exactly the reads listed in ``CLASSIFIER_ONLY`` (which change nothing)."""
    before = _state(chdb_backend)
    ran = set()
    for sql in SIDE_EFFECTS:
        try:
            asyncio.run(chdb_backend._run_as("read", sql))
        except Exception:
            continue
        ran.add(sql)
    assert ran == CLASSIFIER_ONLY, (ran - CLASSIFIER_ONLY, CLASSIFIER_ONLY - ran)
    assert _state(chdb_backend) == before
    assert [path for path in FILES if os.path.exists(path)] == []
