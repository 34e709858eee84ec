"""S29: literals bound to secret-named columns are masked in the SQL an audit payload holds,
in each dialect's forms; other literals and the statement's shape stay readable."""

from __future__ import annotations

import json

import pytest

from pi_notebook.audit.payload import encode_payload
from pi_notebook.audit.redact import Redactor
from pi_notebook.audit.redact_sql import PARSE_LIMIT

S = "Zq9x-s3cret"


def _stored(sql: str) -> str:
    return json.loads(encode_payload({"sql": sql}, Redactor(), 1_000_000))["sql"]


@pytest.mark.parametrize(
    "sql",
    [
        f"INSERT INTO users (name, password) VALUES ('bob', '{S}'), ('al', '{S}2')",
        f"INSERT INTO users (name, password) VALUES ('bob', E'{S}\\'x')",  # PostgreSQL E''
        f"INSERT INTO users (name, password) VALUES ('bob', $${S}$$)",  # dollar quoting
        f"insert into users set name = 'bob', user_password = 'it\\'s {S}'",  # MySQL SET
        f'INSERT INTO users (`api_key`) VALUES ("{S}")',  # MySQL quotes
        f"INSERT INTO users (id, api_token) VALUES (1, 987654321) ON CONFLICT (id) "
        f"DO UPDATE SET api_token = '{S}'",
        f"INSERT INTO users (id, password) VALUES (1, 'a') ON DUPLICATE KEY UPDATE "
        f"password = '{S}'",
        f"INSERT INTO users (password) SELECT '{S}' UNION ALL SELECT crypt('{S}', 'bf')",
        f"UPDATE users SET \"Password\" = '{S}', name = 'bob' WHERE id = 1",
        f"SELECT id FROM users WHERE auth_token IN ('{S}', 'other')",
        f"MERGE INTO users u USING s ON u.id = s.id WHEN NOT MATCHED THEN "
        f"INSERT (id, secret) VALUES (1, '{S}')",
        f"INSERT INTO users (password) VALUES ('{S}'",  # no dialect parses it: masked anyway
    ],
)
def test_s29_a_value_bound_to_a_secret_column_is_masked(sql: str) -> None:
    stored = _stored(sql)
    assert S not in stored and "987654321" not in stored and "***" in stored
    assert stored.split()[0].upper() == sql.split()[0].upper()


def test_s29_other_values_and_the_statement_stay_readable() -> None:
    sql = f"INSERT INTO users (name, password, author) VALUES ('bob', '{S}', 'ann')"
    assert _stored(sql) == "INSERT INTO users (name, password, author) VALUES ('bob', '***', 'ann')"
    plain = "SELECT author, tokens_used FROM books WHERE name = 'api'"
    assert _stored(plain) == plain  # no secret-named column: untouched
    prose = "update the passwords; select a token."
    assert _stored(prose) == prose  # not SQL: left to the text patterns


def test_s29_the_redaction_is_the_redactors_own_rule() -> None:
    """Without secret key names there is no rule for columns either."""
    sql = f"INSERT INTO users (password) VALUES ('{S}')"
    plain = Redactor(secret_keys=None)
    assert json.loads(encode_payload({"sql": sql}, plain, 10_000))["sql"] == sql


def test_s29_a_statement_too_long_to_parse_has_every_literal_masked() -> None:
    """Past PARSE_LIMIT the text is not parsed (seconds on the caller's thread): every quoted
    text and number is masked, whatever the dialect's quoting."""
    rows = ", ".join(f"('u{i}', '{S}{i}', 'C:\\', E'it\\'s', $${S}$$, {i}77)" for i in range(3000))
    sql = f"INSERT INTO users (name, password, a, b, c, d) VALUES {rows}"
    assert len(sql) > PARSE_LIMIT
    stored = _stored(sql)
    assert S not in stored and "it" not in stored.split("VALUES")[1] and "77" not in stored
    assert stored.startswith("INSERT INTO users (name, password, a, b, c, d) VALUES ('***'")
