"""Where one statement ends: exactly one statement, or a ``reject``.

A semicolon between two statements is always a ``reject`` (stacked statements are never
run, whatever they are). The only semicolons a single statement may hold are those inside
the body of a routine or trigger, and they are recognised by the body's structure, never
by the words near the start (a column named ``event`` or ``function`` must not turn
``CREATE TABLE x (event int); DELETE FROM t`` into one statement):

* SQLite ``CREATE TRIGGER ... BEGIN stmt; ... END`` and MySQL/MariaDB ``CREATE
  PROCEDURE/FUNCTION/TRIGGER/EVENT ... BEGIN ...; ... END``: semicolons inside
  ``BEGIN ... END`` blocks (``CASE ... END`` nests inside them; a MySQL ``BEGIN`` opens a
  block only when a statement or a label follows it, so ``SELECT begin FROM t`` does not);
* PostgreSQL ``CREATE FUNCTION/PROCEDURE ... BEGIN ATOMIC ...; END`` and ``CREATE RULE ...
  DO (stmt; stmt)``: semicolons inside the atomic block or the parentheses.

Any semicolon outside such a block, or a block that does not close where the text ends,
makes the text more than one statement.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot.tokenizer_core import Token, TokenType

from pi_notebook.sql.lexical import token_types, word

__all__ = ["STACKED", "one_statement"]

STACKED = "more than one statement (stacked statements are never run)"

_BLOCK_DIALECTS = frozenset({"sqlite", "mysql", "postgres"})
_MYSQL_BLOCK_STARTS = frozenset(
    """ALTER ANALYZE BEGIN CALL CASE CLOSE CREATE DECLARE DELETE DO DROP END EXECUTE FETCH
    FLUSH FOR GET IF INSERT ITERATE LEAVE LOCK LOOP NOT OPEN PREPARE REPEAT REPLACE RESIGNAL
    RETURN ROLLBACK SAVEPOINT SELECT SET SHOW SIGNAL START TRUNCATE UNLOCK UPDATE VALUES
    WHILE WITH COMMIT DEALLOCATE""".split()
)
"""Words that may follow a MySQL ``BEGIN`` that opens a block."""
_END_OF = frozenset({"IF", "LOOP", "WHILE", "REPEAT", "FOR"})
"""``END IF``, ``END LOOP``...: ends a construct whose start is not counted."""


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
    if _semicolons_inside_blocks(body, dialect):
        return body, None, True
    return body, STACKED, False


def _opens_block(tokens: Sequence[Token], index: int, dialect: str) -> bool:
    following = word(tokens[index + 1]) if index + 1 < len(tokens) else ""
    if dialect == "postgres":
        return following == "ATOMIC"
    if dialect == "sqlite":
        return following in _MYSQL_BLOCK_STARTS
    labelled = index + 2 < len(tokens) and tokens[index + 2].token_type == TokenType.COLON
    return following in _MYSQL_BLOCK_STARTS or (bool(following) and labelled)


def _semicolons_inside_blocks(tokens: Sequence[Token], dialect: str) -> bool:
    """Every semicolon lies inside a block that closes at the last token (or before)."""
    blocks = parens = 0
    rule = dialect == "postgres" and "RULE" in [word(token) for token in tokens[1:4]]
    index = 0
    while index < len(tokens):
        token = tokens[index]
        kind = token.token_type
        name = word(token)
        if kind == TokenType.L_PAREN:
            parens += 1
        elif kind == TokenType.R_PAREN:
            parens -= 1
            if parens < 0:
                return False
        elif name == "BEGIN" and _opens_block(tokens, index, dialect):
            blocks += 1
        elif name == "CASE" and blocks:
            blocks += 1
        elif name == "END" and blocks:
            following = word(tokens[index + 1]) if index + 1 < len(tokens) else ""
            if following in _END_OF and dialect == "mysql":
                index += 2
                continue
            blocks -= 1
            if following == "CASE" and dialect == "mysql":
                index += 1
        elif kind == TokenType.SEMICOLON:
            inside = blocks > 0 or (rule and parens > 0)
            if not inside:
                return False
        index += 1
    return blocks == 0 and parens == 0
