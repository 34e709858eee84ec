"""The canonical form of a statement and the approval hash built on it (D2).

The canonical form is a comparison key, not SQL to run: the statement's tokens joined
by single spaces, with comments dropped, keywords in upper case and unquoted identifiers
folded as the dialect folds them. String literals and quoted identifiers are kept byte
for byte, so two statements share a canonical form only when they tokenise the same,
and therefore mean the same to the engine.

Where our tokens may not be what the engine sees (MySQL executable comments, comments
nested in comments) or the text does not tokenise at all, the canonical form is the
text itself, unchanged: hashes then differ for every textual difference.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from sqlglot.tokenizer_core import Token, TokenType

from pi_notebook.sql import lexical

# PostgreSQL, SQLite and DuckDB fold unquoted identifiers (ASCII letters only, which is
# what PostgreSQL does in UTF-8 and SQLite always does). MySQL table names may be case
# sensitive (lower_case_table_names=0), so MySQL identifiers are left as written.
_FOLDS_IDENTIFIERS = frozenset({"postgres", "sqlite", "duckdb"})
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_BIND_MARKERS = frozenset({TokenType.COLON, TokenType.PARAMETER})


def canonicalize(sql: str, dialect: str) -> str:
    """The form the approval hash is computed over.

    Equal for statements that differ only in whitespace, comments, keyword case and
    (where the dialect folds it) unquoted-identifier case; different whenever the
    effect could differ. Never raises for text input.

    >>> canonicalize("select  *\\nFROM Users -- all", "postgres")
    'SELECT * FROM users'
    """
    if not isinstance(sql, str):
        raise TypeError(f"sql must be str, not {type(sql).__name__}")
    name = lexical.DIALECTS.get(dialect.lower()) if isinstance(dialect, str) else None
    if name is None or lexical.input_problem(sql, name) is not None:
        return sql
    return _canonical_cached(sql, name)


@lru_cache(maxsize=4096)
def _canonical_cached(sql: str, dialect: str) -> str:
    try:
        tokens = lexical.tokenize(sql, dialect)
    except Exception:
        return sql
    if lexical.comment_findings(tokens, dialect):
        return sql
    # A trailing semicolon changes nothing; one between statements is kept.
    while tokens and tokens[-1].token_type == TokenType.SEMICOLON:
        tokens.pop()
    parts: list[str] = []
    previous: Token | None = None
    for token in tokens:
        parts.append(_token_form(token, sql, dialect, previous))
        previous = token
    return " ".join(parts)


def _token_form(token: Token, sql: str, dialect: str, previous: Token | None) -> str:
    raw = (
        sql[token.start : token.end + 1] if 0 <= token.start <= token.end < len(sql) else token.text
    )
    if token.token_type in lexical.LITERAL_TYPES or not lexical.word(token):
        return raw
    # Bind-parameter names (:name, @name) are matched case-sensitively by drivers.
    if (
        previous is not None
        and previous.token_type in _BIND_MARKERS
        and previous.end + 1 == token.start
    ):
        return raw
    if token.token_type != TokenType.VAR:
        keyword = " ".join(raw.split()).translate(_ASCII_UPPER)
        # Only real keywords are case-insensitive; other words stay as written.
        return keyword if keyword in _keywords(dialect) else raw
    if dialect in _FOLDS_IDENTIFIERS:
        return raw.translate(_ASCII_LOWER)
    return raw


@lru_cache(maxsize=8)
def _keywords(dialect: str) -> frozenset[str]:
    return frozenset(lexical.dialect_of(dialect).tokenizer_class.KEYWORDS)


def args_hash(args: Mapping[str, Any], dialect: str, *, sql_key: str = "sql") -> str:
    """SHA-256 hex of the canonical JSON of ``args``, with ``args[sql_key]`` canonicalised.

    Canonical JSON: ``sort_keys=True``, ``separators=(",", ":")``, ``ensure_ascii=False``.
    The gate hashes the arguments it approved and the backend hashes the arguments it is
    about to run (S26, D2); any difference that could change the effect changes the hash.

    Raises:
        TypeError: when a value is not JSON-serialisable.
    """
    canonical = dict(args)
    value = canonical.get(sql_key)
    if isinstance(value, str):
        canonical[sql_key] = canonicalize(value, dialect)
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
