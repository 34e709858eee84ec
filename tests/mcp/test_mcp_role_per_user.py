"""``python -m pi_notebook.mcp serve --role-per-user``: the served database extension runs each
statement under the requester's PostgreSQL role (the token's subject over HTTP), and any other
engine refuses it when the server starts."""

from __future__ import annotations

import pytest

from pi_notebook.errors import ConfigurationError
from pi_notebook.mcp.serve import (  # pyright: ignore[reportPrivateUsage]
    ServeOptions,
    _database_extension,
    _parser,
    served_session,
)


def _options(*argv: str) -> ServeOptions:
    return _parser().parse_args(["serve", *argv], namespace=ServeOptions())


async def test_role_per_user_on_a_sqlite_database_refuses_to_serve() -> None:
    options = _options("--database-url", "sqlite://", "--role-per-user")
    with pytest.raises(ConfigurationError, match="--role-per-user needs a PostgreSQL database"):
        async with served_session(options):
            pass


def test_role_per_user_reaches_the_served_extension() -> None:
    url = "postgresql+psycopg://pi_agent@db.example/shop"
    assert _database_extension(_options("--database-url", url, "--role-per-user")).role_per_user
    assert not _database_extension(_options("--database-url", url)).role_per_user
