"""Statements that look like reads but are not: keyword lookalikes that would stack
statements, a backslash quote hiding a semicolon, a MySQL column default, a built-in name
with a space before its parenthesis, aggregates that build huge values; and the real reads
and routine bodies next to them that stay approvable.

Each engine claim behind them (PostgreSQL runs all three statements, MariaDB evaluates a
column default, a stored function named ``count``...) is checked on the engine in
``test_sql_redteam_engines.py``.
"""

from __future__ import annotations

import pytest

from pi_notebook.sql import classify
from pi_notebook.sql.statements import STACKED

# -- 1. Anything that may be more than one statement is a reject ----------------------------

STACKED_LOOKALIKES = [
    # BEGIN ATOMIC / END as aliases around a DELETE (the audit's PostgreSQL example).
    (
        "postgres",
        "CREATE VIEW v1 AS SELECT begin atomic FROM (SELECT 1 AS begin) s; "
        "DELETE FROM victim; CREATE VIEW v2 AS SELECT 1 AS end",
    ),
    (
        "postgres",
        "CREATE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; END; "
        "CREATE FUNCTION g() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; END",
    ),
    (
        "postgres",
        "CREATE FUNCTION f() RETURNS int LANGUAGE sql RETURN 1; DELETE FROM victim; "
        "CREATE FUNCTION g() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; END",
    ),
    (
        "postgres",
        "CREATE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC CREATE FUNCTION g() "
        "RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; END; END",
    ),
    ("postgres", "CREATE TABLE rule (a int); DELETE FROM victim"),
    # MySQL: BEGIN/END are not reserved, a column type or an alias can be named so.
    (
        "mysql",
        "CREATE TABLE x (a int, begin SET('a','b')); DELETE FROM victim; CREATE TABLE y (end int)",
    ),
    (
        "mysql",
        "CREATE PROCEDURE p() BEGIN SELECT a FROM t GROUP BY begin WITH ROLLUP; END; "
        "DELETE FROM victim; SELECT 1 end",
    ),
    (
        "mysql",
        "CREATE PROCEDURE p() BEGIN DECLARE CONTINUE HANDLER FOR SQLEXCEPTION "
        "SELECT 'x' begin; SELECT 1; END; DELETE FROM victim; SELECT 1 end",
    ),
    (
        "mysql",
        "CREATE TRIGGER begin BEFORE INSERT ON t FOR EACH ROW BEGIN SET @a = 1; END; "
        "DELETE FROM victim; SELECT 1 end",
    ),
    ("mysql", "CREATE PROCEDURE p() BEGIN SELECT 1 AS end; END"),
    ("mysql", "CREATE PROCEDURE p() BEGIN SELECT 1; END; DELETE FROM victim"),
    # SQLite: a type name may be any words.
    ("sqlite", "CREATE TABLE t(a begin insert); DELETE FROM victim; CREATE TABLE u(end)"),
    ("sqlite", "CREATE TRIGGER trg AFTER INSERT ON t BEGIN DELETE FROM log; END; DELETE FROM t"),
]


@pytest.mark.parametrize(("dialect", "sql"), STACKED_LOOKALIKES)
def test_keyword_lookalikes_never_make_stacked_statements_approvable(
    dialect: str, sql: str
) -> None:
    verdict = classify(sql, dialect)
    assert verdict.kind == "reject", verdict
    assert verdict.reasons == (STACKED,)


@pytest.mark.parametrize("dialect", ["postgres", "mysql"])
def test_a_backslash_quote_with_a_semicolon_is_rejected(dialect: str) -> None:
    # With NO_BACKSLASH_ESCAPES (MySQL) or standard_conforming_strings (PostgreSQL) the
    # string ends at the second quote and DELETE is a second statement.
    for sql in ("SELECT 'a\\'; DELETE FROM t; --'", "SELECT 'a\\'';' AS x"):
        assert classify(sql, dialect).kind == "reject", sql
    assert classify("SELECT 'a\\'' AS x", "mysql").kind == "write"  # no semicolon: approvable


REAL_BODIES = [
    (
        "postgres",
        "CREATE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; "
        "SELECT CASE WHEN true THEN 2 END; END",
    ),
    (
        "postgres",
        "CREATE OR REPLACE PROCEDURE p() LANGUAGE sql BEGIN ATOMIC "
        "INSERT INTO t VALUES (1); SELECT 1 AS end; END",
    ),
    (
        "postgres",
        "CREATE RULE r AS ON INSERT TO t DO ALSO (INSERT INTO a VALUES (1); "
        "INSERT INTO b VALUES (2))",
    ),
    (
        "mysql",
        "CREATE PROCEDURE p() BEGIN DECLARE x INT; SET x = 1; IF x > 0 THEN SELECT x; END IF; END",
    ),
    ("mysql", "CREATE TRIGGER trg BEFORE INSERT ON t FOR EACH ROW BEGIN SET NEW.s = 'n'; END"),
    ("mysql", "CREATE EVENT e ON SCHEDULE EVERY 1 DAY DO BEGIN DELETE FROM log; END"),
    ("mysql", "CREATE FUNCTION f(x INT) RETURNS varchar(10) DETERMINISTIC BEGIN RETURN 'a'; END;"),
    (
        "mysql",
        "CREATE DEFINER=root@localhost PROCEDURE p(IN a INT) lbl: BEGIN "
        "DECLARE done INT DEFAULT 0; DECLARE CONTINUE HANDLER FOR NOT FOUND SET done = 1; "
        "DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; END; "
        "w: WHILE done = 0 DO SET a = a + 1; IF a > 3 THEN LEAVE w; "
        "ELSEIF a > 2 THEN SET a = CASE WHEN a > 1 THEN 2 ELSE 3 END; ELSE ITERATE w; "
        "END IF; END WHILE w; REPEAT SET a = a - 1; UNTIL a < 0 END REPEAT; "
        "CASE a WHEN 1 THEN SELECT 1; ELSE BEGIN SELECT 2; END; END CASE; "
        "LOOP LEAVE lbl; END LOOP; END lbl",
    ),
    (
        "sqlite",
        "CREATE TEMP TRIGGER trg AFTER INSERT ON t WHEN new.a > 1 BEGIN "
        "DELETE FROM log; SELECT 1 AS end; END",
    ),
]


@pytest.mark.parametrize(("dialect", "sql"), REAL_BODIES)
def test_real_routine_bodies_stay_approvable(dialect: str, sql: str) -> None:
    assert classify(sql, dialect).kind == "write"


# -- 3. MariaDB DEFAULT(col) evaluates the column's default ----------------------------------


def test_mysql_default_of_a_column_is_not_a_read() -> None:
    for sql in ("SELECT DEFAULT(u) FROM t", "SELECT DEFAULT (u) FROM t"):
        verdict = classify(sql, "mysql")
        assert verdict.kind == "write", sql
        assert "default" in verdict.reasons[0].lower()
    assert classify("SELECT a FROM t WHERE b = DEFAULT(u)", "mysql").kind != "read"
    assert classify("SELECT `default` FROM t", "mysql").kind == "read"


# -- 4. MySQL: a space before the parenthesis calls a stored function -------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT count (x) FROM t",
        "SELECT sum\t(x) FROM t",
        "SELECT now/**/() FROM t",
        "SELECT a FROM t WHERE lower (a) = 'x'",
        "SELECT group_concat (a) FROM t",
    ],
)
def test_mysql_builtin_name_with_a_space_before_its_parenthesis_needs_approval(
    sql: str,
) -> None:
    verdict = classify(sql, "mysql")
    assert verdict.kind == "write", verdict
    assert "stored function" in verdict.reasons[0]
    joined = sql.replace(" (", "(").replace("\t(", "(").replace("/**/(", "(")
    assert classify(joined, "mysql").kind == "read", joined


def test_spaces_before_parentheses_that_are_no_call_stay_reads() -> None:
    for sql in (
        "SELECT a FROM t WHERE a IN (1, 2)",
        "SELECT IF (a > 1, 1, 2) FROM t",
        "SELECT CAST(a AS CHAR (10)) FROM t",
        "SELECT * FROM JSON_TABLE('[1]', '$[*]' COLUMNS (a INT PATH '$')) AS j",
        "SELECT a FROM t WHERE MATCH (a) AGAINST ('x')",
        "SELECT count(x) FROM t",
    ):
        assert classify(sql, "mysql").kind == "read", sql
    assert classify("SELECT count (x) FROM t", "postgres").kind == "read"


# -- 2. DuckDB: a building aggregate's value is never copied or replicated ----------------------

COPIED_AGGREGATES = [
    # The audit's example: 100 MB from string_agg, copied 32 times by concat.
    "SELECT length(concat(" + ", ".join(["s"] * 32) + ")) FROM "
    "(SELECT string_agg('xxxxxxxxxx', '') AS s FROM range(10000000))",
    # Replicated by a join, a scalar subquery, a window, a CTE; copied by || or a lambda.
    "SELECT s FROM (SELECT string_agg('xxxxxxxxxx', '') AS s FROM t) CROSS JOIN range(300)",
    "SELECT (SELECT string_agg(name, ',') FROM t) FROM range(10000)",
    "SELECT string_agg(name, ',') OVER () FROM t",
    "WITH c AS (SELECT list(id) AS l FROM t) SELECT l, l, l FROM c",
    "SELECT string_agg(name, ',') || string_agg(name, ',') FROM t",
    "SELECT list_transform(list(id), x -> repeat('y', 60)) FROM t",
    "SELECT unnest(list(id)) FROM t",
    # One value packed from more generated rows than a read may hold.
    "SELECT list(i) FROM range(30000000) t(i)",
    "SELECT length(string_agg('x', '')) FROM range(1000) a(i), range(100000) b(j)",
    "SELECT list(i) FROM range(n) t(i)",
]


@pytest.mark.parametrize("sql", COPIED_AGGREGATES)
def test_duckdb_building_aggregate_copied_or_over_many_generated_rows_needs_approval(
    sql: str,
) -> None:
    verdict = classify(sql, "duckdb")
    assert verdict.kind == "write", verdict
    assert "memory" in verdict.reasons[-1]


def test_duckdb_building_aggregates_handed_to_the_result_stay_reads() -> None:
    for sql in (
        "SELECT category, string_agg(name, ', ' ORDER BY name), listagg(sku, '|') "
        "FROM products GROUP BY category",
        "SELECT c, list(id ORDER BY id) FILTER (WHERE status = 'paid') FROM o GROUP BY c",
        "SELECT a, length(string_agg(x, ',')) AS n FROM t GROUP BY a "
        "HAVING length(string_agg(x, ',')) > 3 ORDER BY string_agg(x, ',')",
        "SELECT list(x) FROM t UNION ALL SELECT list(y) FROM u",
        "SELECT list(i)[1:3], CAST(list(i) AS VARCHAR) FROM range(1000) t(i)",
        "SELECT histogram(status) FROM orders",
    ):
        assert classify(sql, "duckdb").kind == "read", sql


def test_sqlite_value_sent_once_per_row_is_bounded_like_duckdb() -> None:
    # zeroblob(1000000) on 1,000 rows took 1.1 GB in the kernel (10 GB at the row cap).
    per_row = (
        "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 10000) "
        "SELECT {} AS b FROM c"
    )
    assert classify(per_row.format("zeroblob(1000000)"), "sqlite").kind == "write"
    assert classify(per_row.format("printf('%100000d', n)"), "sqlite").kind == "write"
    assert classify(per_row.format("zeroblob(4096)"), "sqlite").kind == "read"
