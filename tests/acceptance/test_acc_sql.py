"""Acceptance: classify / canonicalize (D1, D2)."""

from __future__ import annotations

import pytest

from pi_notebook.sql import canonicalize, classify

CASES = [
    ("sqlite", "SELECT * FROM t WHERE id = 1", "read"),
    ("sqlite", "INSERT INTO t VALUES (1)", "write"),
    ("sqlite", "PRAGMA journal_mode = WAL", "write"),
    ("sqlite", "ATTACH DATABASE '/tmp/x.db' AS x", "write"),
    ("sqlite", "SELECT 1; DELETE FROM t", "reject"),
    ("postgres", "SELECT a FROM t ORDER BY a LIMIT 5", "read"),
    ("postgres", "SELECT * FROM t FOR UPDATE", "write"),
    ("postgres", "WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d", "write"),
    ("postgres", "SELECT pg_read_file('/etc/passwd')", "write"),
    ("postgres", "BEGIN", "write"),
    ("mysql", "SELECT COUNT(*) FROM t", "read"),
    ("mysql", "SELECT LOAD_FILE('/etc/passwd')", "write"),
    ("mysql", "SET @a = 1", "write"),
    ("duckdb", "SELECT * FROM read_csv('/etc/passwd')", "write"),
    ("duckdb", "SELECT 1 + 1", "read"),
    ("sqlite", "SELEC FROM WHERE (((", "reject"),
]


@pytest.mark.parametrize(("dialect", "sql", "kind"), CASES)
def test_d1_classify(dialect, sql, kind):
    v = classify(sql, dialect)
    assert v.kind == kind, (sql, v.reasons)
    assert isinstance(v.reasons, tuple)
    if kind != "read":
        assert v.reasons and all(isinstance(r, str) and r for r in v.reasons)


def test_d2_canonicalize_equal_for_cosmetic_differences():
    a = "SELECT id, v FROM t WHERE id = 1"
    b = "select   id,\n  v -- the value\n FROM t /* c */ where id = 1"
    for d in ("sqlite", "postgres", "mysql", "duckdb"):
        assert canonicalize(a, d) == canonicalize(b, d), d


def test_d2_canonicalize_differs_when_effect_differs():
    d = "sqlite"
    assert canonicalize("UPDATE t SET v = 'a' WHERE id = 1", d) != canonicalize(
        "UPDATE t SET v = 'A' WHERE id = 1", d
    )
    assert canonicalize("DELETE FROM t WHERE id = 1", d) != canonicalize(
        "DELETE FROM t WHERE id = 2", d
    )
    assert canonicalize('SELECT "A" FROM t', "postgres") != canonicalize(
        'SELECT "a" FROM t', "postgres"
    )
