"""Scoped grants: what a statement's scope is, and which grants may exist."""

from __future__ import annotations

import pytest

from pi_notebook.approvals import Grant
from pi_notebook.database.grants import GrantStore, check_grant
from pi_notebook.database.scope import pattern_matches, statement_scope
from pi_notebook.errors import GrantError


@pytest.mark.parametrize(
    ("dialect", "sql", "operations", "tables"),
    [
        ("sqlite", "INSERT INTO staging_a (x) VALUES (1), (2)", {"INSERT"}, {"staging_a"}),
        (
            "sqlite",
            "insert into Staging_A select x from Orders",
            {"INSERT"},
            {"staging_a", "orders"},
        ),
        (
            "postgres",
            'UPDATE s.t SET a = lower(b) FROM "U" WHERE t.id = "U".id',
            {"UPDATE"},
            {"s.t", "U"},
        ),
        ("postgres", "DELETE FROM t USING u WHERE t.id = u.id", {"DELETE"}, {"t", "u"}),
        (
            "postgres",
            "INSERT INTO t (a) VALUES (1) ON CONFLICT (a) DO UPDATE SET a = 2",
            {"INSERT", "UPDATE"},
            {"t"},
        ),
        ("postgres", "INSERT INTO t (a) VALUES (1) ON CONFLICT DO NOTHING", {"INSERT"}, {"t"}),
        (
            "mysql",
            "INSERT INTO T (a) VALUES (1) ON DUPLICATE KEY UPDATE a = 2",
            {"INSERT", "UPDATE"},
            {"T"},
        ),
        ("duckdb", "INSERT OR REPLACE INTO t VALUES (1)", {"INSERT", "DELETE"}, {"t"}),
        ("postgres", "WITH x AS (SELECT 1 AS a) INSERT INTO t SELECT a FROM x", {"INSERT"}, {"t"}),
        ("mysql", "UPDATE t JOIN u ON t.id = u.id SET t.a = u.a", {"UPDATE"}, {"t", "u"}),
    ],
)
def test_the_scope_comes_from_the_parsed_statement(
    dialect: str, sql: str, operations: set[str], tables: set[str]
) -> None:
    scope = statement_scope(sql, dialect)
    assert scope is not None and (set(scope.operations), set(scope.tables)) == (operations, tables)


@pytest.mark.parametrize(
    ("dialect", "sql", "written", "read"),
    [
        ("sqlite", "INSERT INTO staging_x SELECT a FROM accounts", {"staging_x"}, {"accounts"}),
        ("postgres", "INSERT INTO staging_x (a) SELECT a FROM staging_x", {"staging_x"}, set()),
        (
            "postgres",
            "UPDATE staging_x SET a = (SELECT max(a) FROM accounts)",
            {"staging_x"},
            {"accounts"},
        ),
        ("postgres", "UPDATE t SET a = 1 FROM u WHERE t.id = u.id", {"t"}, {"u"}),
        ("postgres", "DELETE FROM t USING u WHERE t.id = u.id", {"t"}, {"u"}),
        (
            "mysql",
            "INSERT INTO t (a) VALUES (1) ON DUPLICATE KEY UPDATE a = (SELECT x FROM u)",
            {"t"},
            {"u"},
        ),
        # MySQL's multi-table forms may write every joined table: all count as written
        (
            "mysql",
            "UPDATE staging_x, accounts SET accounts.b = 0",
            {"staging_x", "accounts"},
            set(),
        ),
        (
            "mysql",
            "DELETE s FROM staging_x s JOIN accounts a ON s.id = a.id",
            {"staging_x", "accounts"},
            set(),
        ),
    ],
)
def test_written_tables_are_kept_apart_from_tables_only_read(
    dialect: str, sql: str, written: set[str], read: set[str]
) -> None:
    scope = statement_scope(sql, dialect)
    assert scope is not None and (set(scope.written), set(scope.read)) == (written, read)


def test_a_table_only_read_under_a_grant_is_never_writable_under_it() -> None:
    """Audit 12.1: approving INSERT INTO staging_x SELECT … FROM accounts must not let
    INSERT INTO accounts run unasked."""
    store = GrantStore("sqlite")
    store.create(
        Grant(operations=("INSERT", "UPDATE"), tables=("staging_x",), reads=("accounts",), ttl_s=60)
    )
    assert store.candidates(store.scope_of("INSERT INTO staging_x SELECT a FROM accounts"))
    assert store.candidates(
        store.scope_of("UPDATE staging_x SET a = (SELECT max(a) FROM accounts)")
    )
    assert store.candidates(store.scope_of("INSERT INTO staging_x VALUES (1)"))
    for sql in [
        "INSERT INTO accounts VALUES (666)",
        "INSERT INTO accounts SELECT a FROM staging_x",
        "UPDATE accounts SET a = 0",
        "INSERT INTO staging_x SELECT a FROM orders",
    ]:
        assert store.candidates(store.scope_of(sql)) == [], sql
    # a written table may also be read; a pattern in ``tables`` covers reading it
    store2 = GrantStore("sqlite")
    store2.create(Grant(operations=("INSERT",), tables=("staging_*",), ttl_s=60))
    assert store2.candidates(store2.scope_of("INSERT INTO staging_a SELECT a FROM staging_b"))
    assert check_grant(Grant(operations=("INSERT",), tables=("t",), reads=("u", "u"))).reads == (
        "u",
    )
    with pytest.raises(GrantError, match="not only wildcards"):
        check_grant(Grant(operations=("INSERT",), tables=("t",), reads=("*",)))


@pytest.mark.parametrize(
    ("dialect", "sql"),
    [
        ("sqlite", "CREATE TABLE staging_a (x INTEGER)"),  # DDL
        ("postgres", "DROP TABLE staging_a"),
        ("postgres", "TRUNCATE staging_a"),
        ("postgres", "GRANT ALL ON staging_a TO bob"),  # privileges
        ("postgres", "SET search_path = staging"),  # settings
        ("postgres", "COPY staging_a FROM '/tmp/x.csv'"),  # files
        ("duckdb", "INSERT INTO staging_a SELECT * FROM read_csv('/etc/passwd')"),
        ("postgres", "INSERT INTO staging_a SELECT pg_read_file('/etc/passwd')"),
        ("mysql", "INSERT INTO staging_a SELECT * FROM mysql.user"),  # credentials
        ("postgres", "INSERT INTO staging_a VALUES (nextval('s'))"),  # a side effect
        ("postgres", "INSERT INTO staging_a SELECT * FROM generate_series(1, 3)"),  # no name
        (
            "postgres",
            "WITH d AS (DELETE FROM orders RETURNING *) INSERT INTO staging_a SELECT * FROM d",
        ),
        ("sqlite", "INSERT INTO staging_a VALUES (1); DELETE FROM orders"),  # stacked
        ("postgres", "EXPLAIN ANALYZE DELETE FROM staging_a"),
        ("sqlite", "SELECT * FROM staging_a"),  # a read needs no grant
    ],
)
def test_statements_outside_every_scope(dialect: str, sql: str) -> None:
    assert statement_scope(sql, dialect) is None


def test_patterns_never_cross_a_dot_and_follow_the_engines_case() -> None:
    assert pattern_matches("staging_*", "staging_orders", "postgres")
    assert not pattern_matches("staging_*", "staging_x.secrets", "postgres")
    assert not pattern_matches("staging_*", "public.staging_x", "postgres")
    assert pattern_matches("public.staging_*", "public.staging_x", "postgres")
    assert pattern_matches("Staging_*", "staging_x", "sqlite")  # SQLite ignores case
    assert not pattern_matches("Staging_*", "staging_x", "mysql")  # MySQL does not


@pytest.mark.parametrize(
    ("grant", "problem"),
    [
        (Grant(operations=("CREATE",), tables=("staging_*",)), "never CREATE"),
        (Grant(operations=("INSERT", "GRANT"), tables=("staging_*",)), "never GRANT"),
        (Grant(operations=(), tables=("staging_*",)), "names its operations"),
        (Grant(operations=("INSERT",), tables=()), "names its tables"),
        (Grant(operations=("INSERT",), tables=("*",)), "not only wildcards"),
        (Grant(operations=("INSERT",), tables=("t; DROP",)), "must name tables"),
        (Grant(operations=("INSERT",), tables=("t",), max_rows=0), "positive"),
        (Grant(operations=("INSERT",), tables=("t",), ttl_s=0), "ttl_s"),
        (Grant(operations=("INSERT",), tables=("t",), ttl_s=10**6), "ttl_s"),
        (Grant(operations=("INSERT",), tables=("t",), tool_name="shell"), "for 'shell'"),
    ],
)
def test_grants_that_may_not_exist_are_refused(grant: Grant, problem: str) -> None:
    with pytest.raises(GrantError, match=problem):
        check_grant(grant)


def test_a_grant_matches_by_operation_table_and_expires_or_is_revoked() -> None:
    now = [1000.0]
    store = GrantStore("sqlite", clock=lambda: now[0])
    small = store.create(Grant(operations=("insert",), tables=("staging_*",), max_rows=5, ttl_s=60))
    assert small.grant.operations == ("INSERT",)
    inside = store.scope_of("INSERT INTO staging_a VALUES (1)")
    assert [g.grant_id for g in store.candidates(inside)] == [small.grant_id]
    assert store.candidates(store.scope_of("DELETE FROM staging_a")) == []  # operation
    assert store.candidates(store.scope_of("INSERT INTO orders VALUES (1)")) == []  # table
    assert store.candidates(store.scope_of("INSERT INTO staging_a SELECT * FROM orders")) == []
    big = store.create(Grant(operations=("INSERT",), tables=("staging_*",), ttl_s=600))
    assert [g.grant_id for g in store.candidates(inside)] == [big.grant_id, small.grant_id]
    assert store.revoke(big.grant_id) and not store.revoke(big.grant_id)
    now[0] += 60
    assert store.list() == [] and store.candidates(inside) == []  # expired
