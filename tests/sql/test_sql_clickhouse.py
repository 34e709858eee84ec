"""D1 for ClickHouse: the policy corpus under ``tests/fixtures/sql/clickhouse/``.

Every ordinary read classifies ``read`` and runs on chDB with ``readonly=1`` changing nothing;
no side effect classifies ``read`` (0 false auto-runs), and each one chDB can run is run
through the engine's read path (``readonly=1``, the read's bounds) to show the backstop
stops it too.
"""

from __future__ import annotations

from pathlib import Path

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
