"""Values bound to secret-named columns, masked in SQL text (S29).

``INSERT INTO users (name, password) VALUES ('bob', 'hunter2')`` names no secret the way a
``password=...`` pair or a key of the payload does: the value's meaning comes from its
column. This module parses the statement (sqlglot) and masks each literal bound to a column
whose name is a secret key name (the audit redactor's rule: ``password``, ``api_key``,
``user_token``...):

* the values of an INSERT's (or MERGE's) column list, row by row, and the matching output
  column of an ``INSERT ... SELECT``; MySQL's ``INSERT ... SET col = value`` parses as a column
  list;
* the other side of a comparison or assignment with the column: ``UPDATE ... SET password =
  '...'``, ``ON CONFLICT ... DO UPDATE SET``, ``ON DUPLICATE KEY UPDATE``, ``WHERE token =
  '...'``, ``password IN (...)``;
* a literal given a secret name: ``SELECT 'x' AS password``.

Only the stored text changes: whoever hashes the arguments (the approval's binding) hashes
them before redaction. The text is parsed in each dialect the backend knows and the literals
any parse binds to a secret column are masked (whichever dialect wrote it, its literals are
covered). Text no dialect parses, which still names a secret column, has every literal token
masked; text no dialect can even tokenize, or longer than :data:`PARSE_LIMIT`, has every
quoted text and number masked: fail closed.

Not covered (no column name in the text): ``INSERT INTO users VALUES (...)`` without a column
list, and positional bind of a function's arguments.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from functools import lru_cache

import sqlglot
from sqlglot import exp
from sqlglot.tokenizer_core import TokenType

__all__ = ["PARSE_LIMIT", "looks_like_sql", "redact_sql"]

_DIALECTS = ("postgres", "mysql", "duckdb", "sqlite")
_LITERAL_NAMES = (
    "Literal",
    "HexString",
    "ByteString",
    "RawString",
    "BitString",
    "UnicodeString",
    "National",
)
_LITERALS: tuple[type[exp.Expr], ...] = tuple(
    getattr(exp, name) for name in _LITERAL_NAMES if hasattr(exp, name)
)
_LITERAL_TOKEN_NAMES = (
    "STRING",
    "NUMBER",
    "BIT_STRING",
    "HEX_STRING",
    "BYTE_STRING",
    "RAW_STRING",
    "NATIONAL_STRING",
    "NATIONAL_RAW_STRING",
    "HEREDOC_STRING",
    "UNICODE_STRING",
)
_LITERAL_TOKENS = frozenset(
    getattr(TokenType, name) for name in _LITERAL_TOKEN_NAMES if hasattr(TokenType, name)
)
_COMPARISONS = (
    exp.EQ,
    exp.NEQ,
    exp.NullSafeEQ,
    exp.NullSafeNEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
    exp.Like,
    exp.ILike,
    exp.PropertyEQ,
)
# A statement's first word (after comments): only such text is parsed as SQL.
_SQL_START = re.compile(
    r"\s*(?:(?:--[^\n]*(?:\n|$)|/\*[\s\S]*?\*/)\s*)*\(*\s*"
    r"(?:insert|update|upsert|replace|merge|select|with|values|delete|copy|call|set|table)\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"[^\W\d][\w$]*")
Span = tuple[int, int]

PARSE_LIMIT = 16 * 1024
"""Longest SQL text parsed (about 0.1 s in four dialects); a longer one naming a secret
column has every quoted text and number masked instead."""


def looks_like_sql(text: str) -> bool:
    """Whether ``text`` starts like a SQL statement (the only text :func:`redact_sql` parses)."""
    return _SQL_START.match(text) is not None


def redact_sql(text: str, is_secret: Callable[[str], bool], mask: str) -> str:
    """``text`` with every literal bound to a column ``is_secret`` names replaced by
    ``'mask'`` (see the module docstring); ``text`` itself when it names no secret column."""
    if not looks_like_sql(text) or not any(is_secret(w) for w in _WORD.findall(text)):
        return text
    if len(text) > PARSE_LIMIT:  # parsing would hold the caller for seconds: mask every literal
        return _apply(text, _quoted_and_numbers(text), f"'{mask}'")
    return _redacted(text, is_secret, mask)


@lru_cache(maxsize=512)
def _redacted(text: str, is_secret: Callable[[str], bool], mask: str) -> str:
    # One statement appears in several records of a call (its arguments, the final
    # arguments, the approval): parse it once.
    spans: set[Span] = set()
    parsed = False
    for dialect in _DIALECTS:
        try:
            statements = sqlglot.parse(text, read=dialect)
        except Exception:  # not this dialect's SQL (or not SQL at all)
            continue
        parsed = True
        for node in _bound_literals(statements, is_secret):
            start, end = node.meta.get("start"), node.meta.get("end")
            if not isinstance(start, int) or not isinstance(end, int):
                return mask  # a value without its place in the text: mask it all
            spans.add((start, end + 1))
    if not parsed:
        token_spans = _literal_tokens(text)
        spans = token_spans if token_spans is not None else _quoted_and_numbers(text)
    return _apply(text, spans, f"'{mask}'")


def _bound_literals(
    statements: Iterable[exp.Expr | None], is_secret: Callable[[str], bool]
) -> Iterator[exp.Expr]:
    for statement in statements:
        if statement is None:
            continue
        for insert in statement.find_all(exp.Insert):
            yield from _insert_values(insert, is_secret)
        for node in statement.find_all(*_COMPARISONS):
            left, right = node.this, node.expression
            if _secret_name(left, is_secret):
                yield from _literals(right)
            if _secret_name(right, is_secret):
                yield from _literals(left)
        for node in statement.find_all(exp.In):
            if _secret_name(node.this, is_secret):
                for item in node.expressions:
                    yield from _literals(item)
        for alias in statement.find_all(exp.Alias):
            if is_secret(alias.alias):
                yield from _literals(alias.this)


def _insert_values(insert: exp.Insert, is_secret: Callable[[str], bool]) -> Iterator[exp.Expr]:
    target = insert.this
    if not isinstance(target, exp.Schema | exp.Tuple):
        return  # no column list: nothing in the text says which value is whose
    secret = [i for i, col in enumerate(target.expressions) if _secret_name(col, is_secret)]
    if not secret:
        return
    source = insert.expression
    rows: list[list[exp.Expr]] = []
    if isinstance(source, exp.Values):
        rows = [r.expressions if isinstance(r, exp.Tuple) else [r] for r in source.expressions]
    elif isinstance(source, exp.Tuple):
        rows = [source.expressions]
    elif source is not None:
        rows = [s.expressions for s in _selects(source)]
    for row in rows:
        for i in secret:
            if i < len(row):
                yield from _literals(row[i])


def _selects(query: exp.Expr) -> Iterator[exp.Select]:
    if isinstance(query, exp.Subquery):
        yield from _selects(query.this)
    elif isinstance(query, exp.SetOperation):
        yield from _selects(query.this)
        yield from _selects(query.expression)
    elif isinstance(query, exp.Select):
        yield query


def _secret_name(node: exp.Expr | None, is_secret: Callable[[str], bool]) -> bool:
    if isinstance(node, exp.Column | exp.Identifier):
        return is_secret(node.name)
    return False


def _literals(node: exp.Expr | None) -> Iterator[exp.Expr]:
    if node is None:
        return
    if isinstance(node, _LITERALS):
        yield node
        return
    yield from (n for n in node.find_all(*_LITERALS))


def _literal_tokens(text: str) -> set[Span] | None:
    """The spans of every literal token of ``text`` in each dialect that tokenizes it
    (``None``: none does)."""
    spans: set[Span] = set()
    tokenized = False
    for dialect in _DIALECTS:
        try:
            tokens = sqlglot.Dialect.get_or_raise(dialect).tokenize(text)
        except Exception:
            continue
        tokenized = True
        spans.update((t.start, t.end + 1) for t in tokens if t.token_type in _LITERAL_TOKENS)
    return spans if tokenized else None


def _quoted_and_numbers(text: str) -> set[Span]:
    """Every quoted text and number of ``text`` under any dialect's quoting: the union of
    the spans of strings with and without backslash escapes (an unterminated one runs to the
    end), double-quoted and dollar-quoted texts, and numbers."""
    return {m.span() for rx in _QUICK for m in rx.finditer(text)}


_QUICK = (
    re.compile(r"'(?:[^'\\]|\\[\s\S]|'')*(?:'|$)"),  # backslash escapes (MySQL, E'')
    re.compile(r"'(?:[^']|'')*(?:'|$)"),  # standard strings
    re.compile(r'"(?:[^"\\]|\\[\s\S]|"")*(?:"|$)'),  # MySQL strings (and identifiers)
    re.compile(r"\$([A-Za-z_]\w*)?\$[\s\S]*?(?:\$\1\$|$)"),  # dollar quoting
    re.compile(r"(?<![\w$.])\d+(?:\.\d*)?(?:[eE][+-]?\d+)?"),
)


def _apply(text: str, spans: set[Span], replacement: str) -> str:
    """``text`` with the union of ``spans`` replaced (overlapping spans merge)."""
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    out: list[str] = []
    at = 0
    for start, end in merged:
        out.append(text[at:start])
        out.append(replacement)
        at = end
    out.append(text[at:])
    return "".join(out)
