"""Where one statement ends: exactly one statement, or a ``reject``.

A semicolon between two statements is always a ``reject`` (stacked statements are never
run, whatever they are). The only semicolons a single statement may hold are those inside
the body of a routine or trigger, and they are accepted only when the statement's
structure proves that the body ends where the text ends. Words near the start never
decide it (``begin``, ``end``, ``atomic``, ``event`` and ``function`` can all be column
names or aliases), and when the structure is not one of the forms below, or any word is
ambiguous, the text is treated as more than one statement (fail closed):

* PostgreSQL ``CREATE [OR REPLACE] FUNCTION/PROCEDURE ... BEGIN ATOMIC ...; END`` and
  SQLite ``CREATE [TEMP] TRIGGER ... BEGIN ...; END``: in both grammars the body is a list
  of ``statement ;`` that no statement inside may start with ``END``, so the body ends at
  the first ``; END`` (or ``ATOMIC END``) after it opens; that pair must be the end of the
  text. The body opens at the first ``BEGIN`` (``BEGIN ATOMIC``) outside parentheses, and
  it must come before the first semicolon. A second ``ATOMIC`` (a nested routine) is
  refused.
* PostgreSQL ``CREATE [OR REPLACE] RULE ... DO (stmt; stmt)``: every semicolon inside
  parentheses (the grammar balances parentheses within one statement, so a semicolon
  inside them cannot separate two).
* MySQL/MariaDB ``CREATE ... PROCEDURE/FUNCTION/TRIGGER/EVENT`` whose body is a
  ``[label:] BEGIN ... END [label]`` block, matched block by block: an opener (``BEGIN``,
  ``IF``, ``CASE``, ``LOOP``, ``WHILE``, ``REPEAT``, ``FOR``) counts only where a
  statement starts (after ``;``, ``THEN``, ``ELSE``, ``DO``, a label, another opener, or a
  handler's conditions), every ``END`` must close something, and a ``BEGIN`` or ``END``
  anywhere else (a column or alias named so) makes the text a ``reject``. Every way this
  can be wrong closes a block early (then the text goes on past it, a ``reject``) or is a
  syntax error on the server, never a second statement after an approved first.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot.tokenizer_core import Token, TokenType

from pi_notebook.sql.lexical import token_types, word

__all__ = ["STACKED", "one_statement"]

STACKED = "more than one statement (stacked statements are never run)"

_BLOCK_DIALECTS = frozenset({"sqlite", "mysql", "postgres"})
_MYSQL_ROUTINES = frozenset({"PROCEDURE", "FUNCTION", "TRIGGER", "EVENT"})
_MYSQL_OPENERS = frozenset({"BEGIN", "IF", "CASE", "LOOP", "WHILE", "REPEAT", "FOR"})
"""Words that open a construct closed by ``END`` when they start a statement."""
_MYSQL_CLOSED_BY_NAME = frozenset({"IF", "CASE", "LOOP", "WHILE", "REPEAT", "FOR"})
"""``END IF``, ``END CASE``...: the word after ``END`` that closes them."""
_MYSQL_BODY_AFTER = frozenset(
    """DETERMINISTIC SQL DATA DEFINER INVOKER INT INTEGER BIGINT SMALLINT TINYINT MEDIUMINT
    UNSIGNED SIGNED ZEROFILL TEXT TINYTEXT MEDIUMTEXT LONGTEXT BLOB DATE DATETIME TIMESTAMP
    TIME YEAR DOUBLE FLOAT REAL DECIMAL NUMERIC BOOLEAN BOOL JSON""".split()
)
"""Words a procedure's or function's header may end with, right before its body."""
_HANDLER_CONDITIONS_END = frozenset({"SQLEXCEPTION", "SQLWARNING", "FOUND"})
_HANDLER_CONDITION_WORDS = _HANDLER_CONDITIONS_END | {"SQLSTATE", "VALUE", "NOT"}


def one_statement(tokens: Sequence[Token], dialect: str) -> tuple[list[Token], str | None, bool]:
    """The tokens of the one statement, without trailing semicolons.

    Returns ``(tokens, problem, compound)``: ``problem`` says why the text is not exactly
    one statement; ``compound`` is True for a routine or trigger whose body holds
    semicolons (sqlglot would split it, so it is judged from its tokens).
    """
    body = list(tokens)
    while body and body[-1].token_type == TokenType.SEMICOLON:
        body.pop()
    if not body:
        return body, "the SQL holds no statement (empty or only comments)", False
    if TokenType.SEMICOLON not in token_types(body):
        return body, None, False
    if dialect not in _BLOCK_DIALECTS or word(body[0]) != "CREATE":
        return body, STACKED, False
    words = [word(token) for token in body]
    if dialect == "mysql":
        single = _mysql_routine(body, words)
    else:
        single = _listed_body(body, words, dialect)
    return (body, None, True) if single else (body, STACKED, False)


def _kind_index(words: Sequence[str]) -> int:
    """Index of the word after ``CREATE [OR REPLACE] [TEMP|TEMPORARY]``."""
    index = 1
    if words[index : index + 2] == ["OR", "REPLACE"]:
        index += 2
    if index < len(words) and words[index] in ("TEMP", "TEMPORARY"):
        index += 1
    return index


def _listed_body(tokens: Sequence[Token], words: Sequence[str], dialect: str) -> bool:
    """PostgreSQL routines and rules, SQLite triggers: see the module docstring."""
    at = _kind_index(words)
    kind = words[at] if at < len(words) else ""
    if dialect == "postgres" and kind == "RULE":
        return _semicolons_in_parentheses(tokens)
    wanted = ("FUNCTION", "PROCEDURE") if dialect == "postgres" else ("TRIGGER",)
    if kind not in wanted:
        return False
    atomic = dialect == "postgres"
    opened = _first_opener(tokens, words, atomic)
    if opened is None:
        return False
    inside = opened + (2 if atomic else 1)
    if atomic and "ATOMIC" in words[inside:]:
        return False
    for index in range(inside, len(tokens)):
        after_statement = tokens[index - 1].token_type == TokenType.SEMICOLON
        if words[index] == "END" and (index == inside or after_statement):
            return index == len(tokens) - 1
    return False


def _first_opener(tokens: Sequence[Token], words: Sequence[str], atomic: bool) -> int | None:
    """The first ``BEGIN`` (``BEGIN ATOMIC``) outside parentheses, if no semicolon and no
    other ``BEGIN`` comes before it."""
    depth = 0
    for index, token in enumerate(tokens):
        kind = token.token_type
        if kind == TokenType.SEMICOLON:
            return None
        depth += (kind == TokenType.L_PAREN) - (kind == TokenType.R_PAREN)
        if words[index] != "BEGIN" or depth:
            continue
        following = words[index + 1] if index + 1 < len(words) else ""
        if atomic and following != "ATOMIC":
            continue
        return index
    return None


def _semicolons_in_parentheses(tokens: Sequence[Token]) -> bool:
    depth = 0
    for token in tokens:
        kind = token.token_type
        if kind == TokenType.L_PAREN:
            depth += 1
        elif kind == TokenType.R_PAREN:
            depth -= 1
            if depth < 0:
                return False
        elif kind == TokenType.SEMICOLON and depth == 0:
            return False
    return depth == 0


def _mysql_routine(tokens: Sequence[Token], words: Sequence[str]) -> bool:
    """A MySQL/MariaDB routine, trigger or event whose body is one ``BEGIN ... END``."""
    kind_at = next(
        (index for index, name in enumerate(words[:12]) if name in _MYSQL_ROUTINES), None
    )
    if kind_at is None or "BEGIN" not in words:
        return False
    begin = words.index("BEGIN")
    types = token_types(tokens[:begin])
    if begin <= kind_at + 1 or TokenType.SEMICOLON in types or "END" in words[:begin]:
        return False
    if types.count(TokenType.L_PAREN) != types.count(TokenType.R_PAREN):
        return False
    start = begin
    if tokens[begin - 1].token_type == TokenType.COLON:
        start = begin - 2  # a labelled body: ``label: BEGIN``
    if start <= kind_at or not _body_may_follow(tokens, words, start, words[kind_at]):
        return False
    return _mysql_blocks(tokens, words, start)


def _body_may_follow(tokens: Sequence[Token], words: Sequence[str], at: int, kind: str) -> bool:
    """Whether the header can end right before ``tokens[at]`` (so the body starts there)."""
    before = tokens[at - 1]
    previous = words[at - 1]
    if kind == "TRIGGER":
        return previous == "ROW" or words[at - 2] in ("FOLLOWS", "PRECEDES")
    if kind == "EVENT":
        return previous == "DO"
    return (
        before.token_type in (TokenType.R_PAREN, TokenType.STRING) or previous in _MYSQL_BODY_AFTER
    )


def _mysql_blocks(tokens: Sequence[Token], words: Sequence[str], start: int) -> bool:
    """Whether the block opening at ``tokens[start]`` closes exactly at the last token."""
    scan = _BlockScan(tokens, words, start)
    while scan.index < scan.count:
        done = scan.step()
        if done is not None:
            return done
    return False


class _BlockScan:
    """The scan of a MySQL compound body, one token a step (see :func:`_mysql_blocks`).

    ``stack``: the constructs open (``CASE_EXPR``: a CASE expression, not a statement);
    ``at_start``: a statement starts at the next token; ``depth``: parentheses open;
    ``declare``: in a ``DECLARE``; ``conditions``: in a handler's ``FOR <conditions>``.
    """

    def __init__(self, tokens: Sequence[Token], words: Sequence[str], start: int) -> None:
        self.tokens, self.words, self.start = tokens, words, start
        self.stack: list[str] = []
        self.at_start = True
        self.depth = 0
        self.declare = self.conditions = False
        self.index, self.count = start, len(tokens)

    def step(self) -> bool | None:
        """Read the token at ``index``: ``None`` to go on, else the answer."""
        index = self.index
        token = self.tokens[index]
        kind = token.token_type
        name = self.words[index]
        if kind == TokenType.SEMICOLON:
            if self.depth or not self.stack or self.stack[-1] == "CASE_EXPR":
                return False
            self.at_start, self.declare, self.conditions = True, False, False
            self.index += 1
            return None
        if kind in (TokenType.L_PAREN, TokenType.R_PAREN):
            self.depth += 1 if kind == TokenType.L_PAREN else -1
            if self.depth < 0:
                return False
            self.at_start = self.conditions = False
            self.index += 1
            return None
        if name == "BEGIN" and not self.at_start:
            if not (
                self.conditions and _ends_condition(self.tokens[index - 1], self.words[index - 1])
            ):
                return False  # a column or alias named begin: ambiguous
            self.at_start = True
        if self.at_start and self.depth == 0:
            return self._statement_start(name)
        return self._within(token, name)

    def _statement_start(self, name: str) -> bool | None:
        """The first word of a statement in the body (or its label)."""
        index, words, stack = self.index, self.words, self.stack
        if index + 1 < self.count and self.tokens[index + 1].token_type == TokenType.COLON:
            if name in ("BEGIN", "END") or (not stack and index != self.start):
                return False
            self.index += 2  # a label; a statement still starts after it
            return None
        if name in _MYSQL_OPENERS:
            stack.append(name)
            self.index += 1
            if name == "BEGIN" and words[self.index : self.index + 2] == ["NOT", "ATOMIC"]:
                self.index += 2
            self.at_start = name in ("BEGIN", "LOOP", "REPEAT")
            self.declare = self.conditions = False
            return None
        if name == "END":
            self.index = _close(self.tokens, words, stack, index)
            if self.index < 0:
                return False
            if not stack:
                return self.index == self.count
            self.at_start = False
            return None
        if not stack:
            return False
        self.declare = name == "DECLARE"
        self.at_start = name == "ELSE"  # ELSEIF, WHEN and UNTIL are followed by a condition
        self.index += 1
        return None

    def _within(self, token: Token, name: str) -> bool | None:
        """A word inside a statement of the body."""
        index, words, stack = self.index, self.words, self.stack
        if name == "CASE":
            stack.append("CASE_EXPR")
        elif name == "END":
            if stack and stack[-1] == "CASE_EXPR":
                stack.pop()
            elif stack and stack[-1] == "REPEAT" and words[index + 1 : index + 2] == ["REPEAT"]:
                self.index = _close(self.tokens, words, stack, index)
                if self.index < 0 or not stack:
                    return False
                self.at_start = self.conditions = False
                return None
            else:
                return False  # a column or alias named end: ambiguous
        elif name in ("THEN", "ELSE") and self.depth == 0 and stack and stack[-1] in ("IF", "CASE"):
            self.at_start = True
            self.index += 1
            return None
        elif name == "DO" and self.depth == 0 and stack and stack[-1] in ("WHILE", "FOR"):
            self.at_start = True
            self.index += 1
            return None
        if self.declare and name == "FOR" and words[index - 1] == "HANDLER":
            self.conditions = True
        elif self.conditions:
            self.conditions = token.token_type == TokenType.COMMA or _is_condition(token, name)
        self.at_start = False
        self.index += 1
        return None


def _is_condition(token: Token, name: str) -> bool:
    """A token of a handler's condition list (named conditions are not accepted)."""
    return name in _HANDLER_CONDITION_WORDS or token.token_type in (
        TokenType.STRING,
        TokenType.NUMBER,
    )


def _ends_condition(token: Token, name: str) -> bool:
    return name in _HANDLER_CONDITIONS_END or token.token_type in (
        TokenType.STRING,
        TokenType.NUMBER,
    )


def _close(tokens: Sequence[Token], words: Sequence[str], stack: list[str], index: int) -> int:
    """Pop the construct the ``END`` at ``index`` closes; the index after ``END [kind]
    [label]``, or -1 when it closes nothing it can."""
    if not stack:
        return -1
    opened = stack.pop()
    following = words[index + 1] if index + 1 < len(words) else ""
    index += 1
    if opened == "CASE_EXPR":
        return -1
    if opened in _MYSQL_CLOSED_BY_NAME:
        if following != opened:
            return -1
        index += 1
    elif following in _MYSQL_CLOSED_BY_NAME:
        return -1
    if index >= len(tokens) or tokens[index].token_type == TokenType.SEMICOLON:
        return index
    label_ends = index + 1 == len(tokens) or tokens[index + 1].token_type == TokenType.SEMICOLON
    if not label_ends or words[index] in ("BEGIN", "END"):
        return -1
    return index + 1  # ``END label``
