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


@pytest.mark.parametrize("dialect", ["sqlite", "postgres", "duckdb"])
def test_d2_unquoted_identifier_case_folds_where_the_dialect_folds(dialect: str) -> None:
    assert canonicalize("SELECT Name FROM Users", dialect) == canonicalize(
        "select name from users", dialect
    )


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
