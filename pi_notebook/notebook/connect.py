"""What ``%pi_connect`` checks before it lets a new URL replace the current connection.

A URL that does not parse, names a driver that is not installed, points at a database file
that does not exist, or cannot be connected to is refused with one line free of credentials,
and the session keeps its current database.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import ArgumentError

from ..secrets import safe_url, scrub

__all__ = ["check_database_url", "probe_database"]

_CONNECT_TIMEOUT_S = 5
_ENGINE_NAMES = {"sqlite": "SQLite", "duckdb": "DuckDB"}


def check_database_url(url: str) -> str:
    """Validate a SQLAlchemy URL for ``%pi_connect``; returns it stripped.

    Raises:
        ValueError: with a one-line reason and what to do.
    """
    text = url.strip().strip("'\"")
    try:
        parsed = sa.make_url(text)
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number
        raise ValueError(
            f"{scrub(text)!r} is not a SQLAlchemy URL; write e.g. sqlite:///path/to/file.db "
            "or postgresql+psycopg://user@host/db"
        ) from None
    try:
        parsed.get_dialect()
    except Exception as exc:  # NoSuchModuleError, or a driver that is not installed
        raise ValueError(
            f"no driver for {parsed.drivername!r} ({type(exc).__name__}); "
            "install it or use another URL"
        ) from None
    if parsed.get_backend_name() in ("sqlite", "duckdb") and parsed.database not in (
        None,
        "",
        ":memory:",
    ):
        # Connecting would silently create an empty database file.
        if not Path(parsed.database or "").expanduser().is_file():
            raise ValueError(
                f"no {_ENGINE_NAMES[parsed.get_backend_name()]} file at {parsed.database}; "
                "give the path of an existing database"
            )
    return text


def probe_database(url: str) -> None:
    """Connect once to ``url`` (bounded by a connect timeout) and disconnect.

    Raises:
        ValueError: with a one-line reason free of credentials.
    """
    parsed = sa.make_url(url)
    backend = parsed.get_backend_name()
    connect_args: dict[str, Any] = {}
    if backend in ("postgresql", "mysql", "mariadb"):
        connect_args["connect_timeout"] = _CONNECT_TIMEOUT_S
    try:
        engine = sa.create_engine(parsed, connect_args=connect_args, poolclass=sa.NullPool)
    except ImportError as exc:
        raise ValueError(
            f"no driver for {parsed.drivername!r} ({exc.name or 'its module'} is not installed); "
            "install it or name an installed driver, e.g. mysql+pymysql:// or postgresql+psycopg://"
        ) from None
    except Exception as exc:
        raise ValueError(
            f"cannot use {safe_url(url)} ({type(exc).__name__}: {_first_line(exc, url)})"
        ) from None
    try:
        with engine.connect():
            pass
    except Exception as exc:
        raise ValueError(
            f"cannot connect to {safe_url(url)} ({type(exc).__name__}: {_first_line(exc, url)})"
        ) from None
    finally:
        engine.dispose()


def _first_line(exc: BaseException, url: str) -> str:
    inner = getattr(exc, "orig", None) or exc
    text = str(inner).strip().splitlines()
    line = text[0] if text else type(inner).__name__
    return scrub(line[:200], url)
