"""D2: canonical form and the canonical-argument hash."""

from __future__ import annotations

import hashlib
import json

import pytest

from pi_notebook.sql import args_hash, canonicalize


@pytest.mark.parametrize("dialect", ["sqlite", "postgres", "mysql", "duckdb"])
def test_d2_whitespace_comments_and_keyword_case_do_not_matter(dialect: str) -> None:
    variants = [
        "SELECT a FROM t WHERE b = 'X'",
        "select a from t where b = 'X'",
        "SELECT   a\n FROM t -- note\n WHERE b='X'",
        "/* hi */ SeLeCt a FROM t WHERE b = 'X' ;",
    ]
    forms = {canonicalize(sql, dialect) for sql in variants}
    assert len(forms) == 1, forms


def test_d2_unquoted_identifier_case_folds_where_the_dialect_folds() -> None:
    assert canonicalize("SELECT Name FROM Users", "postgres") == canonicalize(
        "select name from users", "postgres"
    )


@pytest.mark.parametrize("dialect", ["sqlite", "duckdb"])
def test_sqlite_and_duckdb_identifiers_keep_their_case(dialect: str) -> None:
    # Both match names without regard to case but keep them as written in the catalog and
    # in result columns (checked on the engines in test_sql_redteam_engines.py).
    for left, right in [
        ("CREATE TABLE Foo (a int)", "CREATE TABLE foo (a int)"),
        ("CREATE VIEW v AS SELECT 1 AS Total", "CREATE VIEW v AS SELECT 1 AS total"),
        ("CREATE TABLE Key (a int)", "CREATE TABLE key (a int)"),
        ("CREATE TABLE t (Date int)", "CREATE TABLE t (date int)"),
    ]:
        assert canonicalize(left, dialect) != canonicalize(right, dialect), left


def test_d2_mysql_identifiers_keep_their_case() -> None:
    # MySQL table names can be case-sensitive (lower_case_table_names=0).
    assert canonicalize("SELECT a FROM Users", "mysql") != canonicalize(
        "SELECT a FROM users", "mysql"
    )
    assert canonicalize("select a from Users", "mysql") == canonicalize(
        "SELECT a FROM Users", "mysql"
    )


@pytest.mark.parametrize(
    ("left", "right", "dialect"),
    [
        ("SELECT 'a'", "SELECT 'A'", "postgres"),
        ("SELECT 'a  b'", "SELECT 'a b'", "sqlite"),
        ('SELECT "Name" FROM t', 'SELECT "name" FROM t', "postgres"),
        ("DELETE FROM t WHERE id = 1", "DELETE FROM t WHERE id = 2", "sqlite"),
        ("SELECT 1 --x", "SELECT 1", "mysql"),
        ("SELECT 1 /*! , SLEEP(1) */", "SELECT 1", "mysql"),
        ("SELECT :Name", "SELECT :name", "postgres"),
        ("SELECT $$a$$", "SELECT $$A$$", "postgres"),
        ("SELECT 1.0", "SELECT 1", "duckdb"),
        ("SELECT `A` FROM t", "SELECT `a` FROM t", "mysql"),
        ("SELECT 'open", "SELECT 'open ", "sqlite"),
    ],
)
def test_d2_different_effects_keep_different_forms(left: str, right: str, dialect: str) -> None:
    assert canonicalize(left, dialect) != canonicalize(right, dialect)


def test_d2_unparseable_text_keeps_its_own_form() -> None:
    assert canonicalize("  SELECT 'open  ", "sqlite") == "  SELECT 'open  "
    assert canonicalize("SELECT 1\x00", "sqlite") == "SELECT 1\x00"
    assert canonicalize("SELECT 1", "nope") == "SELECT 1"


def test_d2_args_hash_is_sha256_of_canonical_json() -> None:
    args = {"sql": "select  1 -- x", "limit": 10, "note": "é"}
    expected_json = json.dumps(
        {"limit": 10, "note": "é", "sql": "SELECT 1"},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    assert args_hash(args, "sqlite") == hashlib.sha256(expected_json.encode()).hexdigest()
    assert args_hash({"sql": "SELECT 1", "limit": 10, "note": "é"}, "sqlite") == args_hash(
        args, "sqlite"
    )
    assert args_hash({**args, "limit": 11}, "sqlite") != args_hash(args, "sqlite")
    assert args_hash({"query": "select 1"}, "sqlite", sql_key="query") == args_hash(
        {"query": "SELECT 1"}, "sqlite", sql_key="query"
    )


def test_d2_args_hash_changes_when_the_statement_changes() -> None:
    approved = args_hash({"sql": "DELETE FROM t WHERE id = 1"}, "postgres")
    assert args_hash({"sql": "DELETE FROM t WHERE id = 1 OR 1=1"}, "postgres") != approved
    assert args_hash({"sql": "delete from T where ID = 1"}, "postgres") == approved


# Red team: statements that differ on the engine (checked there in
# test_sql_redteam_engines.py) never share a canonical form.
COLLISIONS = [
    ("DELETE FROM json", "DELETE FROM JSON", "mysql"),
    ("SELECT * FROM Date", "SELECT * FROM date", "mysql"),
    ("UPDATE Text SET a = 1", "UPDATE text SET a = 1", "mysql"),
    ("DELETE FROM t\u00a0", "DELETE FROM t", "postgres"),
    ("DELETE FROM t\u00a0", "DELETE FROM t", "mysql"),
    ("DELETE FROM t\u00a0", "DELETE FROM t", "sqlite"),
    ("DELETE FROM t\u00a0", "DELETE FROM t", "duckdb"),
    ("SELECT a\u2000FROM t", "SELECT a FROM t", "postgres"),
    ("INSERT INTO t SELECT 0o17", "INSERT INTO t SELECT 0 o17", "postgres"),
    ("INSERT INTO t SELECT 0x1F", "INSERT INTO t SELECT 0 x1F", "postgres"),
    ("INSERT INTO t SELECT 1_000", "INSERT INTO t SELECT 1 _000", "postgres"),
    ("INSERT INTO t SELECT 1_000", "INSERT INTO t SELECT 1 _000", "duckdb"),
    ("INSERT INTO t SELECT .5", "INSERT INTO t SELECT . 5", "postgres"),
    ("INSERT INTO t VALUES ('a'\n'b')", "INSERT INTO t VALUES ('a' 'b')", "postgres"),
    ("UPDATE t SET j = j #- '{a}'", "UPDATE t SET j = j # - '{a}'", "postgres"),
    ("SELECT :name", "SELECT : name", "postgres"),
    # A reserved word after a dot is a (case-sensitive) table name;
    # ``count (x)`` calls a stored function named count, ``count(x)`` the built-in.
    ("DELETE FROM test.Select", "DELETE FROM test.SELECT", "mysql"),
    ("DELETE FROM test.Select", "DELETE FROM test.select", "mysql"),
    ("INSERT INTO t SELECT count(x) FROM u", "INSERT INTO t SELECT count (x) FROM u", "mysql"),
    ("INSERT INTO t SELECT sum(x) FROM u", "INSERT INTO t SELECT sum/**/(x) FROM u", "mysql"),
]


@pytest.mark.parametrize(("left", "right", "dialect"), COLLISIONS)
def test_d2_statements_the_engine_reads_differently_keep_different_forms(
    left: str, right: str, dialect: str
) -> None:
    assert canonicalize(left, dialect) != canonicalize(right, dialect)


@pytest.mark.parametrize(
    ("left", "right", "dialect"),
    [
        ("select a from t order by a", "SELECT a FROM t ORDER BY a", "mysql"),
        ("SELECT a=1", "SELECT a = 1", "postgres"),
        ("SELECT 'a'  'b'", "SELECT 'a' 'b'", "mysql"),
        ("SELECT * FROM Json", "SELECT * FROM json", "postgres"),
        ("SELECT x::int", "SELECT x :: int", "duckdb"),
    ],
)
def test_d2_what_the_engine_reads_alike_still_shares_a_form(
    left: str, right: str, dialect: str
) -> None:
    assert canonicalize(left, dialect) == canonicalize(right, dialect)


def test_d2_canonical_form_is_computed_from_the_classifier_tokens() -> None:
    from pi_notebook.sql import lexical
    from pi_notebook.sql.canonical import canonicalize_uncached
    from pi_notebook.sql.classify import classify_uncached

    sql = "SELECT id, name FROM customers WHERE id = 987654321 /* tokens probe */"
    lexical.tokens_of.cache_clear()
    classify_uncached(sql, "postgres")
    canonicalize_uncached(sql, "postgres")
    info = lexical.tokens_of.cache_info()
    assert (info.misses, info.hits) == (1, 1)  # tokenised once for both


def test_d2_classifying_first_does_not_change_the_canonical_form() -> None:
    """The gate may canonicalise before or after the backend classifies: same tokens, same form."""
    from sql_fixture_cases import load_cases

    from pi_notebook.sql import lexical
    from pi_notebook.sql.canonical import canonicalize_uncached
    from pi_notebook.sql.classify import classify_uncached

    for case in load_cases():
        lexical.tokens_of.cache_clear()
        fresh = canonicalize_uncached(case.sql, case.dialect)
        lexical.tokens_of.cache_clear()
        classify_uncached(case.sql, case.dialect)
        assert canonicalize_uncached(case.sql, case.dialect) == fresh, case.id


def test_d2_postgres_folds_only_ascii_letters_of_a_name() -> None:
    # PostgreSQL lowers A-Z in an unquoted name and keeps every other letter as written
    # (verified on PostgreSQL 15, UTF-8: ``SELECT 1 AS ÉCOLE, 2 AS Straße`` labels ``École``
    # and ``straße``).
    assert canonicalize("SELECT Nom FROM ÉCOLE", "postgres") == "SELECT nom FROM École"
    assert canonicalize("SELECT x FROM Straße", "postgres") == "SELECT x FROM straße"
    assert canonicalize("SELECT x FROM ÉCOLE", "postgres") != canonicalize(
        "SELECT x FROM école", "postgres"
    )


def test_d2_reused_tokenizers_and_parsers_give_every_thread_its_own_results() -> None:
    """The tokenizer and parser are made once per thread and dialect; tokenising and
    parsing start afresh each time, also after a failure, and threads never share one."""
    import threading

    from pi_notebook.sql import classify, lexical

    assert lexical.tokenizer_of("postgres") is lexical.tokenizer_of("postgres")
    assert lexical.parser_of("postgres") is lexical.parser_of("postgres")
    first = lexical.tokenize("SELECT a FROM t", "postgres")
    assert classify("SELECT (", "postgres").kind == "reject"  # a parse that fails midway
    assert [t.text for t in first] == ["SELECT", "a", "FROM", "t"]  # not overwritten
    assert classify("SELECT a FROM t", "postgres").kind == "read"

    made: dict[int, tuple[object, str]] = {}
    failures: list[str] = []

    def work(i: int) -> None:
        for j in range(200):
            sql = f"SELECT c{i}_{j} FROM t{i} WHERE x = {j}"
            lexical.tokens_of.cache_clear()
            form = canonicalize(sql, "postgres")
            if (
                form
                != sql.lower()
                .replace("select", "SELECT")
                .replace("from", "FROM")
                .replace("where", "WHERE")
                or classify(sql, "postgres").kind != "read"
            ):
                failures.append(form)
        made[i] = (lexical.tokenizer_of("postgres"), "done")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert len({id(tokenizer) for tokenizer, _ in made.values()}) == 4
