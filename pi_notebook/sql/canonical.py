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
from collections.abc import Mapping, Sequence
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
_BIND_MARKERS = frozenset({TokenType.COLON, TokenType.PARAMETER, TokenType.SESSION_PARAMETER})
_SEPARATORS = frozenset(
    {TokenType.L_PAREN, TokenType.R_PAREN, TokenType.COMMA, TokenType.SEMICOLON,
     TokenType.L_BRACKET, TokenType.R_BRACKET, TokenType.L_BRACE, TokenType.R_BRACE}
)  # fmt: skip
_STRINGS = frozenset(lexical.LITERAL_TYPES - {TokenType.IDENTIFIER, TokenType.NUMBER})

MYSQL_RESERVED = frozenset(
    """ADD ALL ALTER AND AS ASC BETWEEN BY CALL CASE CHECK COLUMN CONSTRAINT CONVERT CREATE
    CROSS DEFAULT DELETE DESC DESCRIBE DISTINCT DIV DROP ELSE EXISTS EXPLAIN FALSE
    FOR FOREIGN FROM GRANT GROUP HAVING IF IGNORE IN INDEX INNER INSERT INTERVAL INTO IS JOIN
    KEY LEFT LIKE LIMIT LOCK MOD NATURAL NOT NULL ON OR ORDER OUTER PRIMARY READ REFERENCES
    REGEXP REPLACE REVOKE RIGHT RLIKE SELECT SET SHOW TABLE THEN TRUE UNION UNIQUE
    UNLOCK UPDATE USE USING VALUES WHEN WHERE WITH WRITE XOR""".split()
)
"""Words reserved in both MySQL and MariaDB, so never a table name there: only these lose
their case in MySQL's canonical form. Every other word (``json``, ``date``, ``text``, which
sqlglot knows as keywords) may name a case-sensitive table and stays as written."""


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


def canonicalize_uncached(sql: str, dialect: str) -> str:
    """:func:`canonicalize` without its own cache (for benchmarks and tests)."""
    name = lexical.DIALECTS.get(dialect.lower())
    if name is None or lexical.input_problem(sql, name) is not None:
        return sql
    return _canonical_cached.__wrapped__(sql, name)


@lru_cache(maxsize=4096)
def _canonical_cached(sql: str, dialect: str) -> str:
    try:
        tokens = lexical.tokens_of(sql, dialect)
    except Exception:
        return sql
    if lexical.comment_findings(tokens, dialect) or lexical.skipped_text(sql, tokens, dialect):
        return sql
    # A trailing semicolon changes nothing; one between statements is kept.
    end = len(tokens)
    while end and tokens[end - 1].token_type == TokenType.SEMICOLON:
        end -= 1
    return _joined(sql, tokens[:end], dialect)


_LITERAL, _OPERATOR, _SEPARATOR, _NAME, _KEYWORD = range(5)
"""How a token type is written in the canonical form (learnt once per type)."""
_GROUP = (0, 1, 2, 0, 0)
"""Literals, names and keywords are words (0); operator signs (1); separators (2)."""
_CODES: dict[TokenType, int] = dict.fromkeys(lexical.LITERAL_TYPES, _LITERAL)
_CODES.update(dict.fromkeys(_SEPARATORS, _SEPARATOR))
_CODES[TokenType.VAR] = _NAME
_FORMS: dict[str, dict[str, str]] = {}
"""Per dialect: keyword text as written -> its canonical form (bounded)."""


def _code(token: Token) -> int:
    code = _CODES.get(token.token_type)
    if code is None:
        code = _CODES[token.token_type] = _KEYWORD if _is_word(token.text) else _OPERATOR
    return code


def _is_word(text: str) -> bool:
    return text.replace(" ", "").replace("_", "a").isalnum()


def _keyword_form(raw: str, dialect: str, forms: dict[str, str]) -> str:
    keywords = MYSQL_RESERVED if dialect == "mysql" else _keywords(dialect)
    keyword = " ".join(raw.split()).translate(_ASCII_UPPER)
    # Only real keywords are case-insensitive; other words stay as written.
    known = keyword in keywords or (" " in keyword and keywords.issuperset(keyword.split()))
    form = keyword if known else raw
    if len(forms) < 8192:
        forms[raw] = form
    return form


def _joined(sql: str, tokens: Sequence[Token], dialect: str) -> str:
    """The tokens' canonical forms and what stands between them.

    Usually one space. Written together, two tokens of the same kind (two words, two
    operator signs) or a bind marker and its name keep nothing between them: engines
    lex ``0o17``, ``1_000``, ``#-`` or ``:name`` differently from ``0 o17``, ``1 _000``,
    ``# -`` or ``: name``. Two strings split by a line break stay split by one, as
    PostgreSQL joins ``'a'`` and ``'b'`` into one string only across a line break.
    Bind-parameter names (``:Name``, ``@Name``) keep their case: drivers match them so.
    This loop is the canonical form's whole cost: it is kept flat on purpose.
    """
    folds = dialect in _FOLDS_IDENTIFIERS
    forms = _FORMS.setdefault(dialect, {})
    codes, group, markers, strings = _CODES, _GROUP, _BIND_MARKERS, _STRINGS
    size = len(sql)
    parts: list[str] = []
    append = parts.append
    previous_end = -2
    previous_type: TokenType | None = None
    previous_group = _SEPARATOR
    for token in tokens:
        kind = token.token_type
        start, end = token.start, token.end
        code = codes.get(kind)
        if code is None:
            code = _code(token)
        word_group = group[code]
        if previous_type is not None:
            if previous_end + 1 == start:
                if previous_type in markers:
                    if code != _LITERAL:
                        code = _OPERATOR  # the name as written
                elif (word_group != previous_group or word_group == _SEPARATOR) and {
                    previous_type,
                    kind,
                } != _DOT_NUMBER:
                    append(" ")
            elif (
                previous_type in strings
                and kind in strings
                and _line_break(sql[previous_end + 1 : start])
            ):
                append("\n")
            else:
                append(" ")
        if code == _LITERAL:
            append(sql[start : end + 1] if 0 <= start <= end < size else token.text)
        elif code == _NAME:
            append(token.text.translate(_ASCII_LOWER) if folds else token.text)
        elif code == _KEYWORD:
            raw = token.text
            if " " in raw:  # sqlglot normalises multi-word keywords; use what was written
                raw = sql[start : end + 1] if 0 <= start <= end < size else raw
            append(forms.get(raw) or _keyword_form(raw, dialect, forms))
        else:
            append(token.text)
        previous_end, previous_type, previous_group = end, kind, word_group
    return "".join(parts)


_DOT_NUMBER = frozenset({TokenType.DOT, TokenType.NUMBER})


def _line_break(gap: str) -> bool:
    return "\n" in gap or "\r" in gap


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
