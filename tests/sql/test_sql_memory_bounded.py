"""D1 under an OS memory cap: ``classify(sql, dialect, memory_bounded=True)``.

When DuckDB runs in a worker process under an operating-system memory cap, the rules that
only keep a read from exhausting the kernel's memory (``sizes.py``: values built at once,
aggregates copied outside DuckDB's own limit) do not ask: the cap stops such a read. Every
rule that protects something else (side effects, files, catalogs, value channels) still
holds, and without the cap (the default) the memory rules still ask.
"""

from __future__ import annotations

import re

import pytest
from sql_fixture_cases import Case, load_cases
from test_sql_lookalikes_quotes_and_builders_need_approval import COPIED_AGGREGATES
from test_sql_redteam import LEXICAL_CASES

from pi_notebook.sql import classify

MEMORY_REASON = re.compile(r"may exhaust|multiplies the size of values")

_AGG = "(SELECT string_agg(name, '') AS s FROM customers)"
NESTED_HEX = "SELECT " + "hex(" * 8 + "s" + ")" * 8 + f" FROM {_AGG}"
CONCAT_128 = "SELECT concat(" + ", ".join(["s"] * 128) + f") FROM {_AGG}"
BOMBS = [
    NESTED_HEX,
    CONCAT_128,
    "SELECT length(repeat('x', 1000000000))",
    "SELECT len(range(1000000000))",
    "SELECT unnest(range(n)) FROM t",
    "SELECT repeat(name, 100000) FROM customers",
    "WITH RECURSIVE r(s, n) AS (SELECT 'x', 0 UNION ALL SELECT repeat(s, 2), n + 1 FROM r "
    "WHERE n < 40) SELECT length(s) FROM r",
    *COPIED_AGGREGATES,
]

DUCKDB_CASES = [case for case in load_cases() if case.dialect == "duckdb"]


@pytest.mark.parametrize("sql", BOMBS)
def test_d1_memory_bombs_ask_without_the_cap_and_run_under_it(sql: str) -> None:
    uncapped = classify(sql, "duckdb")
    assert uncapped.kind == "write", uncapped
    assert all(MEMORY_REASON.search(reason) for reason in uncapped.reasons), uncapped
    assert classify(sql, "duckdb", memory_bounded=False) == uncapped
    assert classify(sql, "duckdb", memory_bounded=True).is_read


def test_d1_only_a_true_memory_bounded_drops_the_rules() -> None:
    for value in (1, "yes", None):
        assert classify(CONCAT_128, "duckdb", memory_bounded=value).kind == "write"  # type: ignore[arg-type]


@pytest.mark.parametrize("case", DUCKDB_CASES, ids=[case.id for case in DUCKDB_CASES])
def test_d1_no_side_effect_case_runs_as_a_read_under_the_cap(case: Case) -> None:
    expected, sql = case.expected, case.sql
    uncapped = classify(sql, "duckdb")
    capped = classify(sql, "duckdb", memory_bounded=True)
    assert uncapped.kind == expected
    memory_only = expected == "write" and all(MEMORY_REASON.search(r) for r in uncapped.reasons)
    if expected == "read" or memory_only:
        assert capped.is_read, capped
    else:  # a side effect, a file, a catalog, a refusal: the cap changes nothing
        assert capped == uncapped


@pytest.mark.parametrize(("dialect", "sql", "expected"), LEXICAL_CASES)
def test_d1_lexical_tricks_are_judged_alike_under_the_cap(
    dialect: str, sql: str, expected: str
) -> None:
    assert classify(sql, dialect, memory_bounded=True).kind == expected


@pytest.mark.parametrize(
    "sql",
    [
        # a memory shape wrapped around something that is not a read for another reason
        "SELECT list(x) FROM (SELECT list(a) AS x FROM read_csv('/etc/passwd'))",
        "SELECT string_agg(s, ',') FROM (SELECT string_agg(x, '') AS s FROM 'data.csv')",
        "SELECT repeat(getenv('HOME'), 3)",
        "SELECT unnest(range(n)) FROM evil.t_func()",
        "SELECT list(name) FROM (SELECT list(name) AS name FROM duckdb_secrets())",
        "SELECT write_csv(list(x)) FROM (SELECT list(1) AS x)",
        "WITH c AS (SELECT list(id) AS l FROM t) DELETE FROM t",
    ],
)
def test_d1_the_cap_keeps_every_rule_that_protects_something_else(sql: str) -> None:
    assert not classify(sql, "duckdb", memory_bounded=True).is_read


def test_d1_verdicts_are_cached_apart_with_and_without_the_cap() -> None:
    sql = "SELECT customer_id, (SELECT list(total) FROM orders) AS all_totals FROM orders"
    assert classify(sql, "duckdb").kind == "write"
    assert classify(sql, "duckdb", memory_bounded=True).is_read
    assert classify(sql, "duckdb").kind == "write"


def test_d1_sqlite_values_stay_bounded_without_the_cap() -> None:
    per_row = "SELECT zeroblob(1000000000)"
    assert classify(per_row, "sqlite").kind == "write"
    assert classify(per_row, "sqlite", memory_bounded=True).is_read
