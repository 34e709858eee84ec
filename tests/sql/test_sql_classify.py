"""D1 and D10: the classifier's contract beyond the fixture file."""

from __future__ import annotations

import dataclasses
import sys

import pytest

from pi_notebook.sql import POLICY_VERSION, Verdict, classify
from pi_notebook.sql.classify import classify_uncached

MAX_CALLS_FOR_BAD_INPUT = 200_000
"""Python-level calls one bad input may cost (today: under 100 once the dialect is loaded,
about 22,000 when the first call loads it): deep nesting and huge text stop early."""


def test_d1_verdict_is_frozen_with_reasons() -> None:
    verdict = classify("DELETE FROM t", "sqlite")
    assert isinstance(verdict, Verdict)
    assert verdict.kind == "write"
    assert isinstance(verdict.reasons, tuple) and verdict.reasons
    with pytest.raises(dataclasses.FrozenInstanceError):
        verdict.kind = "read"  # type: ignore[misc]


def test_policy_version_is_exported() -> None:
    assert POLICY_VERSION.startswith("sql-policy/")


@pytest.mark.parametrize(
    ("sql", "reason_part"),
    [
        ("", "empty"),
        ("   \n\t ", "empty"),
        ("-- just a comment", "no statement"),
        ("/* a */ /* b */", "no statement"),
        ("SELECT 1\x00", "NUL"),
        ("SELECT '\ud800'", "surrogate"),
        ("SELECT " + "1 + " * 60_000 + "1", "too long"),
        ("SELECT " + "(" * 5000 + "1" + ")" * 5000, "nested"),
        ("SELECT " + "NOT " * 5000 + "1", "nested"),
        ("SELECT " + "- " * 9000 + "1", "nested"),
        (";;;", "no statement"),
        ("SELECT 'open", "tokenized"),
    ],
)
def test_d10_bad_input_is_rejected_quickly_with_a_reason(sql: str, reason_part: str) -> None:
    # "Quickly" is checked as a bound on the work done (function calls), never on wall time,
    # which depends on the machine's load.
    calls = 0

    def count(frame: object, event: str, arg: object) -> None:
        nonlocal calls
        calls += event in ("call", "c_call")

    sys.setprofile(count)
    try:
        verdict = classify_uncached(sql, "postgres")
    finally:
        sys.setprofile(None)
    assert verdict.kind == "reject"
    assert any(reason_part in reason for reason in verdict.reasons), verdict.reasons
    assert calls < MAX_CALLS_FOR_BAD_INPUT, calls


def test_d10_non_text_and_unknown_dialect_are_rejected() -> None:
    assert classify(b"SELECT 1", "sqlite").kind == "reject"  # type: ignore[arg-type]
    assert classify(None, "sqlite").kind == "reject"  # type: ignore[arg-type]
    verdict = classify("SELECT 1", "oracle")
    assert verdict.kind == "reject" and "unknown SQL dialect" in verdict.reasons[0]
    assert classify("SELECT 1", "PostgreSQL").kind == "read"
    assert classify("SELECT 1", "mariadb").kind == "read"


@pytest.mark.parametrize(
    "sql", ["", "SELECT 1\x00", "SELECT '\ud800'", "SELECT " + "1 + " * 60_000 + "1"]
)
def test_d10_unusable_text_is_refused_every_time_and_as_a_str_subclass(sql: str) -> None:
    """The cached path checks the input too: a refusal stays a refusal when repeated (then
    remembered), in any spelling of the dialect, and for a ``str`` subclass."""

    class Text(str):
        pass

    for dialect in ("sqlite", "SQLite", "postgresql"):
        for _ in range(2):
            assert classify(sql, dialect).kind == "reject"
        assert classify(Text(sql), dialect).kind == "reject"
    assert classify(Text("SELECT 1"), "sqlite").kind == "read"


@pytest.mark.parametrize("dialect", ["sqlite", "postgres", "mysql", "duckdb"])
def test_d1_trailing_semicolon_and_comment_is_one_statement(dialect: str) -> None:
    for sql in ("SELECT 1;", "SELECT 1; -- done", "SELECT 1 ; /* done */", "SELECT 1;;"):
        assert classify(sql, dialect).kind == "read", sql


@pytest.mark.parametrize("dialect", ["sqlite", "postgres", "mysql", "duckdb"])
def test_d1_stacked_statements_are_rejected(dialect: str) -> None:
    for sql in ("SELECT 1; COMMIT; DROP TABLE t", "SELECT 1; DELETE FROM t", "SELECT 1;\nSELECT 2"):
        verdict = classify(sql, dialect)
        assert verdict.kind == "reject", sql
        assert "more than one statement" in verdict.reasons[0]


def test_d1_mysql_comment_rules_follow_the_server() -> None:
    # "--" without a space is two minus signs in MySQL, a comment elsewhere.
    assert classify("SELECT 1 --1", "mysql").kind == "read"
    assert classify("SELECT 1 --; DROP TABLE t", "postgres").kind == "read"
    assert classify("SELECT 1 --; DROP TABLE t", "mysql").kind == "reject"
    assert classify("SELECT 1 /*!, SLEEP(9) */", "mysql").kind == "reject"
    # Outside MySQL, /*! is an ordinary comment.
    assert classify("SELECT 1 /*! hello */", "postgres").kind == "read"


def test_d1_side_effects_hidden_anywhere_are_found() -> None:
    places = [
        "SELECT {f} AS x",
        "SELECT 1 FROM t WHERE {f} IS NULL",
        "SELECT * FROM (SELECT {f}) s",
        "SELECT (SELECT {f})",
        "VALUES ({f})",
        "WITH c AS (SELECT {f}) SELECT * FROM c",
        "SELECT 1 UNION SELECT {f}",
        "SELECT 1 FROM t GROUP BY 1 HAVING max({f}) > 0",
        "SELECT 1 FROM t ORDER BY {f}",
        "SELECT coalesce(NULL, {f})",
        "SELECT CASE WHEN true THEN {f} END",
    ]
    for call in ("set_config('a.b', 'c', false)", "pg_catalog.nextval('s')", "pg_advisory_lock(1)"):
        for place in places:
            sql = place.format(f=call)
            assert classify(sql, "postgres").kind == "write", sql


def test_d1_explain_analyze_of_a_write_is_a_write_and_plain_explain_a_read() -> None:
    assert classify("EXPLAIN ANALYZE DELETE FROM t", "postgres").kind == "write"
    assert classify("EXPLAIN (ANALYZE false) DELETE FROM t", "postgres").kind == "write"
    assert classify("EXPLAIN DELETE FROM t", "postgres").kind == "read"
    assert classify("EXPLAIN ANALYZE SELECT * FROM t", "postgres").kind == "read"
    assert classify("EXPLAIN EXPLAIN SELECT 1", "postgres").kind == "write"


def test_d10_reject_reasons_read_as_refusals() -> None:
    for sql, dialect in [
        ("COPY t TO PROGRAM 'id'", "postgres"),
        ("SELECT * FROM t INTO OUTFILE '/tmp/x'", "mysql"),
        ("VACUUM INTO '/tmp/x.db'", "sqlite"),
        ("EXPORT DATABASE '/tmp/d'", "duckdb"),
    ]:
        verdict = classify(sql, dialect)
        assert verdict.kind == "reject"
        assert verdict.reasons and all(len(reason) < 200 for reason in verdict.reasons)


def test_d1_repeated_statement_is_answered_from_the_cache() -> None:
    sql = "SELECT a, b, c FROM t WHERE a = 1 /* cache probe */"
    first = classify(sql, "sqlite")
    assert classify(sql, "sqlite") is first


def test_d1_classifier_never_raises_on_odd_text() -> None:
    odd = [
        "\\",
        "$$",
        "$1",
        "?",
        "`",
        '"',
        "'",
        "/*",
        "*/",
        "((",
        "))",
        "SELECT $$ unterminated",
        "\u202e SELECT 1",
        "SELECT 1 \u2028",
        "\ufeffSELECT 1",
        "SELECT * FROM t WHERE a = ?",
        "EXPLAIN",
        "SHOW",
        "PRAGMA",
        "DESCRIBE",
        "SUMMARIZE",
        "EXPLAIN (",
        "PRAGMA (",
        "COPY",
        "COPY t TO",
        "CREATE FUNCTION f LANGUAGE",
        "SELECT 1 INTO",
    ]
    for dialect in ("sqlite", "postgres", "mysql", "duckdb"):
        for sql in odd:
            verdict = classify_uncached(sql, dialect)
            assert verdict.kind in ("read", "write", "reject")
            if verdict.kind != "read":
                assert verdict.reasons
