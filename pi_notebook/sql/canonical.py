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

# PostgreSQL folds unquoted identifiers (ASCII letters only, as it does in UTF-8): ``Foo``
# and ``foo`` are the same name to it and in its catalog. SQLite and DuckDB match names
# without regard to case but keep them as written in the catalog (``CREATE TABLE Foo``
# lists ``Foo``, a view's column ``AS Total`` comes back as ``Total``), and MySQL table
# names may be case sensitive (lower_case_table_names=0): their identifiers stay as written.
_FOLDS_IDENTIFIERS = frozenset({"postgres"})
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_BIND_MARKERS = frozenset({TokenType.COLON, TokenType.PARAMETER, TokenType.SESSION_PARAMETER})
_SEPARATORS = frozenset(
    {
        TokenType.L_PAREN,
        TokenType.R_PAREN,
        TokenType.COMMA,
        TokenType.SEMICOLON,
        TokenType.L_BRACKET,
        TokenType.R_BRACKET,
        TokenType.L_BRACE,
        TokenType.R_BRACE,
    }
)
_STRINGS = frozenset(lexical.LITERAL_TYPES - {TokenType.IDENTIFIER, TokenType.NUMBER})

MYSQL_RESERVED = lexical.MYSQL_RESERVED
"""Words reserved in both MySQL and MariaDB, so never a table name there: only these lose
their case in MySQL's canonical form. Every other word (``json``, ``date``, ``text``, which
sqlglot knows as keywords) may name a case-sensitive table and stays as written. A reserved
word right after or before a dot, or after ``AS``, is a name (``test.Select``) and keeps its
case too."""

SQLITE_RESERVED = frozenset(
    """ADD ALL ALTER AND AS AUTOINCREMENT BETWEEN CASE CHECK COLLATE COMMIT CONSTRAINT CREATE
    DEFAULT DEFERRABLE DELETE DISTINCT DROP ELSE ESCAPE EXCEPT EXISTS FOREIGN FROM GROUP
    HAVING IN INDEX INDEXED INSERT INTERSECT INTO IS ISNULL JOIN LIMIT NOT NOTNULL NULL ON OR
    ORDER PRIMARY REFERENCES ROLLBACK SELECT SET TABLE THEN TO UNION UNIQUE UPDATE USING
    VALUES WHEN WHERE""".split()
)
"""SQLite keywords that cannot be a name (no fallback to an identifier in its grammar)."""

DUCKDB_RESERVED = frozenset(
    """ALL ANALYSE ANALYZE AND ANY ARRAY AS ASC ASYMMETRIC BOTH CASE CAST CHECK COLLATE COLUMN
    CONSTRAINT CREATE DEFAULT DEFERRABLE DESC DESCRIBE DISTINCT DO ELSE END EXCEPT FALSE FETCH
    FOR FOREIGN FROM GROUP HAVING IN INITIALLY INTERSECT INTO LAMBDA LATERAL LEADING LIMIT NOT
    NULL OFFSET ON ONLY OR ORDER PIVOT PIVOT_LONGER PIVOT_WIDER PLACING PRIMARY QUALIFY
    REFERENCES RETURNING SELECT SHOW SOME SUMMARIZE SYMMETRIC TABLE THEN TO TRAILING TRUE UNION
    UNIQUE UNPIVOT USING VARIADIC WHEN WHERE WINDOW WITH""".split()
)
"""DuckDB's reserved keywords (``duckdb_keywords()``): every other keyword may name a table
or column, whose case DuckDB keeps."""


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


_RESERVED = {"mysql": MYSQL_RESERVED, "sqlite": SQLITE_RESERVED, "duckdb": DUCKDB_RESERVED}


def _keyword_form(raw: str, dialect: str, forms: dict[str, str]) -> str:
    keywords = _RESERVED.get(dialect) or _keywords(dialect)
    keyword = " ".join(raw.split()).translate(_ASCII_UPPER)
    # Only real keywords are case-insensitive; other words stay as written. A keyword of
    # several words (ORDER BY) is one token only where it is a keyword.
    words = keyword.split()
    known = keyword in keywords or (len(words) > 1 and not keywords.isdisjoint(words))
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
    spaced_calls = dialect == "mysql"
    forms = _FORMS.setdefault(dialect, {})
    codes, group, markers, strings = _CODES, _GROUP, _BIND_MARKERS, _STRINGS
    size = len(sql)
    parts: list[str] = []
    append = parts.append
    previous_end = -2
    previous_type: TokenType | None = None
    previous_group = _SEPARATOR
    last = len(tokens) - 1
    for index, token in enumerate(tokens):
        kind = token.token_type
        start, end = token.start, token.end
        code = codes.get(kind)
        if code is None:
            code = _code(token)
        word_group = group[code]
        if code == _KEYWORD and not folds and _named(tokens, index, last, previous_type):
            code = _OPERATOR  # a keyword used as a name: as written
        if previous_type is not None:
            if previous_end + 1 == start:
                if previous_type in markers:
                    if code != _LITERAL:
                        code = _OPERATOR  # the name as written
                elif spaced_calls and kind == TokenType.L_PAREN and previous_group == 0:
                    pass  # MySQL: ``count(x)`` is the built-in, ``count (x)`` may not be
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
            name = token.text
            if folds:  # ASCII letters only; lower() is that fold for ASCII text, 10x faster
                name = name.lower() if name.isascii() else name.translate(_ASCII_LOWER)
            append(name)
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


def _named(tokens: Sequence[Token], index: int, last: int, previous: TokenType | None) -> bool:
    """Whether the keyword at ``index`` stands where only a name can (after or before a
    dot, after ``AS``): there it is an identifier, whose case the engine keeps."""
    if previous == TokenType.DOT or previous == TokenType.ALIAS:
        return True
    return index < last and tokens[index + 1].token_type == TokenType.DOT


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
