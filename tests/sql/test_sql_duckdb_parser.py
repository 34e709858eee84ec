"""D1: a DuckDB statement sqlglot cannot parse is put to DuckDB's own parser.

A single ``SELECT`` DuckDB parses, of built-in functions on the allow-list, whose DuckDB
rendering the whole classifier calls a read, is a read; a refused function is refused; any
other rule found in the rendering asks; what DuckDB cannot parse either stays refused.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pi_notebook.sql import classify
from pi_notebook.sql.classify import classify_uncached
from pi_notebook.sql.duckdb_parser import READ_REASON, duckdb_tree, function_names

duckdb = pytest.importorskip("duckdb")

# sqlglot cannot parse a comma after the last CTE; DuckDB can.
TRAILING = "WITH paid AS (SELECT * FROM orders WHERE status = 'paid'),\nSELECT {} FROM paid"


def test_d1_a_read_only_duckdb_parses_is_a_read() -> None:
    verdict = classify(TRAILING.format("customer_id, sum(total)") + " GROUP BY ALL", "duckdb")
    assert verdict.kind == "read" and verdict.reasons == (READ_REASON,)
    dotted = 'WITH "stg.orders" AS (FROM orders SELECT id),\nSELECT count(*) FROM "stg.orders"'
    assert classify(dotted, "duckdb").reasons == (READ_REASON,)


@pytest.mark.parametrize(
    ("select", "kind", "reason"),
    [
        ("write_csv(total)", "reject", "reaches outside the database"),
        ("getvariable('x')", "write", "not known to be free of side effects"),
        ("evil.f(total)", "write", "user-defined or unknown"),
        ("(SELECT count(*) FROM read_csv('/etc/passwd'))", "write", "reads host files"),
        ("current_setting('s3_secret_access_key')", "write", "password"),
    ],
)
def test_d1_duckdb_parses_it_but_the_policy_still_holds(
    select: str, kind: str, reason: str
) -> None:
    verdict = classify(TRAILING.format(select), "duckdb")
    assert verdict.kind == kind, verdict
    assert any(reason in r for r in verdict.reasons), verdict


def test_d1_a_file_named_like_the_cte_it_defines_still_asks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.csv").write_text("secret\nhunter2\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    sql = 'WITH "a.csv" AS (SELECT * FROM "a.csv"),\nSELECT * FROM "a.csv"'
    conn = duckdb.connect()
    try:
        assert conn.execute(sql).fetchall() == [("hunter2",)]  # DuckDB reads the file
    finally:
        conn.close()
    assert classify(sql, "duckdb").kind == "write"


def test_d1_the_memory_rules_apply_to_what_duckdb_parses() -> None:
    sql = (
        "WITH l AS (SELECT customer_id, list(total) AS t FROM orders GROUP BY 1),\nSELECT * FROM l"
    )
    assert classify(sql, "duckdb").kind == "write"
    assert classify(sql, "duckdb", memory_bounded=True).reasons == (READ_REASON,)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT list(total) FILTER total > 1 FROM orders",  # neither parser reads it
        "WITH a AS (SELECT 1 AS x),\nDELETE FROM orders",  # not a SELECT
        "WITH a AS (SELECT 1 AS x),\nSELECT * FROM a; SELECT 2",  # two statements
    ],
)
def test_d1_what_duckdb_cannot_read_as_one_select_stays_refused(sql: str) -> None:
    assert classify(sql, "duckdb").kind == "reject"


def test_d1_without_duckdb_installed_it_stays_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "duckdb", None)
    verdict = classify_uncached(TRAILING.format("*"), "duckdb")
    assert verdict.kind == "reject" and "cannot be parsed" in verdict.reasons[0]


def test_d1_other_dialects_never_ask_duckdb() -> None:
    assert classify(TRAILING.format("*"), "postgres").kind == "reject"


def test_d1_the_function_names_of_duckdbs_tree_are_every_call() -> None:
    [tree] = duckdb_tree(
        "SELECT sum(x) + 1, list(y) OVER (), s.f(z) FROM range(3) t, main.g() WHERE a LIKE 'b'"
    ) or [None]
    assert tree is not None
    names = function_names(tree)
    assert ("", "", "sum") in names and ("", "", "list") in names and ("", "", "range") in names
    assert ("", "s", "f") in names and ("", "main", "g") in names
    assert all(name != "+" for _c, _s, name in names)  # operators are left out
    assert duckdb_tree("SELECT FROM WHERE") is None
    assert duckdb_tree("DELETE FROM t") is None


def test_d1_a_pragma_table_duckdb_parses_is_judged_by_the_pragma_table() -> None:
    report = classify(
        TRAILING.format("(SELECT count(*) FROM pragma_table_info('orders'))"), "duckdb"
    )
    assert report.reasons == (READ_REASON,)
    other = classify(TRAILING.format("(SELECT count(*) FROM pragma_nonsense())"), "duckdb")
    assert other.kind == "write"
