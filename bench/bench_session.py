"""Benchmark of one audited ``query_database`` call through a whole session, as ratios.

Each timing is ``SELECT 1`` through the path a user takes: an ``AgentSession`` with the
database extension, a scripted model that asks for one call per turn, and the audit recorder
writing every record (durable final arguments included) to a real store. Baselines in the
same run, same data store:

- bare: SQLAlchemy ``exec_driver_sql("SELECT 1").fetchall()`` on a reused connection;
- no audit: the same session built with ``audit=False``.

Targets: audited call <= 600 us on SQLite and <= 1.5 ms on PostgreSQL; records per
call is reported too (one record per fact).

    .venv/bin/python bench/bench_session.py                       # SQLite data and audit
    .venv/bin/python bench/bench_session.py --pg postgresql+psycopg://postgres@127.0.0.1/test
    .venv/bin/python bench/bench_session.py --profile            # cProfile of the audited path

``--pg`` names a server: a scratch database is created there for data and audit, and dropped
afterwards. ``--url`` uses that very database for both instead (its audit tables are dropped).
The three timings alternate ``--repeat`` times; each shows its best (the machine is shared).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import pstats
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from pi_notebook import create_agent_session
from pi_notebook.audit import AuditLog
from pi_notebook.audit.schema import metadata
from pi_notebook.database import database_extension
from pi_notebook.testing import ScriptedModel, text, tool_call


def _script(calls: int, tag: str) -> ScriptedModel:
    """One warm-up call and its answer, then ``calls`` calls (one per turn) and an answer."""
    steps: list[Any] = [[tool_call("query_database", {"sql": "SELECT 1"}, id=f"{tag}-warm")]]
    steps.append(text("warm"))
    steps += [
        [tool_call("query_database", {"sql": "SELECT 1"}, id=f"{tag}-{i}")] for i in range(calls)
    ]
    steps.append(text("done"))
    return ScriptedModel(steps)


async def session_per_call(db_url: str, audit: AuditLog | None, calls: int, tag: str) -> float:
    """Seconds per call of one prompt that makes ``calls`` calls (after one warm-up prompt)."""
    session = create_agent_session(
        model=_script(calls, tag),
        extensions=[database_extension(url=db_url)],
        audit=audit if audit is not None else False,
        builtin_tools=False,
    )
    # The warm-up connects, starts the workers and fills the caches.
    await session.prompt("warm up")
    if audit is not None:
        audit.flush()
    session.agent.state.messages = []
    gc.collect()
    started = time.perf_counter()
    await session.prompt("go")
    elapsed = time.perf_counter() - started
    for message in session.messages:
        if getattr(message, "role", None) == "toolResult" and message.is_error:  # type: ignore[attr-defined]
            raise SystemExit(f"a benchmark call failed: {message.content}")  # type: ignore[attr-defined]
    await session.close()
    return elapsed / calls


def bare_per_call(db_url: str, calls: int) -> float:
    engine = sa.create_engine(db_url)
    with engine.connect() as conn:
        conn.exec_driver_sql("SELECT 1").fetchall()
        gc.collect()
        started = time.perf_counter()
        for _ in range(calls):
            conn.exec_driver_sql("SELECT 1").fetchall()
        elapsed = time.perf_counter() - started
    engine.dispose()
    return elapsed / calls


def _scratch_pg(server: str) -> tuple[str, Callable[[], None]]:
    """A new database on ``server``; returns its URL and a function that drops it."""
    name = f"pi_bench_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')

    def drop() -> None:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()

    return sa.make_url(server).set(database=name).render_as_string(hide_password=False), drop


def _reset_store(url: str) -> None:
    engine = sa.create_engine(url)
    metadata.drop_all(engine)
    engine.dispose()


def _records_per_call(log: AuditLog, tag: str) -> float:
    frame = log.to_dataframe(session=log.session_id)
    ids = frame["tool_call_id"].dropna()
    ours = ids[ids.str.startswith(f"{tag}-")]
    return len(ours) / max(1, ours.nunique())


async def measure(
    db_url: str, audit_url: str, calls: int, repeat: int
) -> tuple[float, float, float, float]:
    """Seconds per call of bare SQLAlchemy, the session without audit and with it (each the
    best of ``repeat``, alternating so load on the shared machine hits each alike), and the
    audit records per call."""
    bare, plain, audited = float("inf"), float("inf"), float("inf")
    per_call_records = 0.0
    for r in range(repeat):
        bare = min(bare, bare_per_call(db_url, calls * 10))
        plain = min(plain, await session_per_call(db_url, None, calls, f"p{r}"))
        log = AuditLog(audit_url)
        audited = min(audited, await session_per_call(db_url, log, calls, f"a{r}"))
        per_call_records = _records_per_call(log, f"a{r}")
        log.close()
    return bare, plain, audited, per_call_records


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--url", help="SQLAlchemy URL for data and audit (default: SQLite files)")
    parser.add_argument("--pg", help="a PostgreSQL server URL: run in a scratch database there")
    parser.add_argument("--calls", type=int, default=400, help="calls per timing")
    parser.add_argument("--repeat", type=int, default=5, help="timings: best of N")
    parser.add_argument("--quick", action="store_true", help="200 calls, best of 3")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of one run")
    args = parser.parse_args()
    if args.quick:
        args.calls, args.repeat = 200, 3
    drop: Callable[[], None] | None = None
    if args.pg:
        args.url, drop = _scratch_pg(args.pg)
    try:
        await _bench(args)
    finally:
        if drop is not None:
            drop()


async def _bench(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db_url = args.url or f"sqlite:///{Path(tmp) / 'data.sqlite'}"
        audit_url = args.url or f"sqlite:///{Path(tmp) / 'audit.sqlite'}"
        _reset_store(audit_url)
        backend = sa.make_url(db_url).get_backend_name()
        print(f"data and audit: {backend}, {args.calls} calls, best of {args.repeat}")
        if args.profile:
            log = AuditLog(audit_url)
            profiler = cProfile.Profile()
            profiler.enable()
            await session_per_call(db_url, log, args.calls, "prof")
            profiler.disable()
            log.close()
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(45)
            return
        bare, plain, audited, per_call_records = await measure(
            db_url, audit_url, args.calls, args.repeat
        )
        target = 600e-6 if backend == "sqlite" else 1500e-6
        print(f"bare SQLAlchemy execute     {bare * 1e6:9.1f} us per call")
        # The issue sets the no-audit target on SQLite, whose reads run on the loop; on
        # PostgreSQL the worker hop and the read's round trips come on top (a reference).
        over = plain - bare
        verdict = f"target +100 us: {'met' if over <= 100e-6 else 'NOT met'}"
        print(
            f"session, no audit           {plain * 1e6:9.1f} us per call "
            f"({plain / bare:.1f}x bare, +{over * 1e6:.0f} us; "
            f"{verdict if backend == 'sqlite' else 'reference'})"
        )
        print(
            f"session with audit          {audited * 1e6:9.1f} us per call "
            f"({audited / bare:.1f}x bare, {audited / plain:.2f}x no audit; "
            f"target <= {target * 1e6:.0f} us: {'met' if audited <= target else 'NOT met'})"
        )
        print(f"audit records per call      {per_call_records:9.1f}")


if __name__ == "__main__":
    asyncio.run(main())
