"""What ``%pi_connect`` checks before it lets a new URL replace the current connection.

Every URL the database tool runs is accepted, checked through the engine seam
(:mod:`pi_notebook.sql.engines`), not SQLAlchemy alone: chDB, a ClickHouse server, Spark
Connect, Snowflake, BigQuery and Trino have no SQLAlchemy dialect. A URL is refused in one
line free of credentials, and the session keeps its current database, when it

* does not parse, or names an engine the tool does not run (the line lists those it runs);
* names a ``dialect only`` engine, or one whose extra is not installed (the line names the
  ``pip install``), or a SQLAlchemy driver that is not installed;
* names the file of an embedded engine (SQLite, DuckDB) or the directory of chDB that does
  not exist: connecting would silently create an empty database;
* cannot be connected to: a SQLAlchemy engine is connected once and disposed (as it
  always was); any other engine gets its own backend (``create_backend``), which runs
  ``SELECT 1`` through its own client, bounded by a connect and a statement timeout, and is
  disposed again: no worker process or server session is left behind.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import URL
from sqlalchemy.exc import ArgumentError

from ..secrets import safe_url, scrub
from ..sql.engines import (
    ENGINES,
    SQLALCHEMY_ENGINES,
    EngineInfo,
    create_backend,
    embedded_path,
    engine_for_url,
)

__all__ = ["check_database_url", "probe_database"]

_CONNECT_TIMEOUT_S = 5
_PROBE_TIMEOUT_S = 10.0
"""Connect and statement timeout of an engine's own backend while it is probed."""
_PROBE_LIMIT_S = 3 * _PROBE_TIMEOUT_S
"""The most ``%pi_connect`` waits for that probe, whatever the engine's client does."""
_PROBE_SQL = "SELECT 1"
_ENGINE_NAMES = {"sqlite": "SQLite", "duckdb": "DuckDB", "chdb": "chDB"}


def check_database_url(url: str) -> str:
    """Validate a database URL for ``%pi_connect``; returns it stripped.

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
    info = _engine_of(parsed)
    refusal = info.dialect_only() or info.missing_extra()
    if refusal is not None:
        raise ValueError(refusal)
    if info in SQLALCHEMY_ENGINES:
        try:
            parsed.get_dialect()
        except Exception as exc:  # NoSuchModuleError, or a driver that is not installed
            raise ValueError(
                f"no driver for {parsed.drivername!r} ({type(exc).__name__}); "
                "install it or use another URL"
            ) from None
    _check_exists(parsed)
    return text


def _engine_of(parsed: URL) -> EngineInfo:
    """The engine on the seam that runs ``parsed``, or a line listing the URLs it runs."""
    try:
        return engine_for_url(parsed)
    except ValueError:
        known = ", ".join(info.url_scheme.split(" ")[0] for info in ENGINES if info.connects)
        raise ValueError(
            f"no driver for {parsed.drivername!r} in the database tool; "
            f"the URLs it runs are {known}"
        ) from None


def _check_exists(parsed: URL) -> None:
    """Refuse the file or directory of an embedded engine that does not exist (connecting
    would create an empty database there), or a chDB URL chDB would misread."""
    named = embedded_path(parsed)
    if named is None:
        return
    kind, path = named
    engine = _ENGINE_NAMES[parsed.get_backend_name()]
    exists = path.is_dir() if kind == "directory" else path.is_file()
    if not exists:
        raise ValueError(
            f"no {engine} {'database directory' if kind == 'directory' else 'file'} at "
            f"{path.absolute()}; give the path of an existing database"
        )


def probe_database(url: str) -> None:
    """Connect once to ``url`` (bounded by a connect timeout) and disconnect: a SQLAlchemy
    engine through SQLAlchemy, any other through its engine's own backend.

    Raises:
        ValueError: with a one-line reason free of credentials.
    """
    parsed = sa.make_url(url)
    if engine_for_url(parsed) in SQLALCHEMY_ENGINES:
        _probe_sqlalchemy(url, parsed)
    else:
        _probe_engine(url)


def _probe_sqlalchemy(url: str, parsed: URL) -> None:
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
        raise ValueError(f"cannot use {safe_url(url)} ({_described(exc, url)})") from None
    try:
        with engine.connect():
            pass
    except Exception as exc:
        raise ValueError(f"cannot connect to {safe_url(url)} ({_described(exc, url)})") from None
    finally:
        engine.dispose()


def _probe_engine(url: str) -> None:
    """Run ``SELECT 1`` through the engine's own backend on a thread of its own (the magic
    may be called on a running event loop), waiting at most :data:`_PROBE_LIMIT_S`."""
    failures: list[str] = []
    done = threading.Event()

    def probe() -> None:
        try:
            failures.append(_round_trip(url))
        except Exception as exc:  # a dispose that failed: said here, never as a traceback
            failures.append(f"cannot use {safe_url(url)} ({_described(exc, url)})")
        finally:
            done.set()

    threading.Thread(target=probe, name="pi_connect probe", daemon=True).start()
    if not done.wait(_PROBE_LIMIT_S):
        raise ValueError(f"cannot connect to {safe_url(url)} (no answer in {_PROBE_LIMIT_S:g} s)")
    if not failures:  # fails closed: a probe that said nothing did not answer
        raise ValueError(f"cannot connect to {safe_url(url)} (the check ended without an answer)")
    if failures[0]:
        raise ValueError(failures[0])


def _round_trip(url: str) -> str:
    """The refusal of ``url`` (``""``: it answered): its backend made, ``SELECT 1`` run
    read-only through the backend's own statement path, the backend disposed."""
    try:
        backend = create_backend(
            url, connect_timeout_s=_PROBE_TIMEOUT_S, statement_timeout_s=_PROBE_TIMEOUT_S, row_cap=1
        )
    except Exception as exc:
        return f"cannot use {safe_url(url)} ({_described(exc, url)})"
    refusal = ""
    try:
        asyncio.run(backend.run("pi_connect", _PROBE_SQL, record_result=False))
    except Exception as exc:
        refusal = f"cannot connect to {safe_url(url)} ({_described(exc, url)})"
    finally:
        backend.dispose()  # its share of a shared worker (a chDB directory) goes back here
    return refusal


def _described(exc: BaseException, url: str) -> str:
    """``exc`` as ``Type: first line``, credentials scrubbed; a backend's "Could not connect
    to URL: cause" as its cause alone (the line names the URL already)."""
    line = _first_line(exc, url)
    cause = line.removeprefix(f"Could not connect to {safe_url(url)}: ")
    return cause if cause != line else f"{type(exc).__name__}: {line}"


def _first_line(exc: BaseException, url: str) -> str:
    inner = getattr(exc, "orig", None) or exc
    text = str(inner).strip().splitlines()
    line = text[0] if text else type(inner).__name__
    return scrub(line[:200], url)
